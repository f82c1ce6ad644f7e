"""``gradescope LESSON``: the lesson as a Gradescope autograder zip (instructors only).

Upload ``gradescope/LESSON.zip`` as a programming assignment's autograder. Gradescope unpacks
it into ``/autograder/source``, runs ``setup.sh`` once when it builds the image (the
requirements, and bubblewrap for the sandbox) and ``run_autograder`` for every submission,
which runs :mod:`.gradescope_run`: the harness on the upload, ``results.json`` from its report.
The zip holds the checker (``graders/`` with the hidden graders and the secret half, ``core/``,
``gpt/``, the manifest) and the lesson's released package, so it is as secret as the
instructor's tree: never share it with students.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from core.atomic import atomic_write_bytes
from core.manifest import ROOT, load_manifest

from .course import PACKAGE, Course
from .errors import SetupError

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (the course's instructor/gradescope.py wrote it).
cd "${AUTOGRADER_ROOT:-/autograder}/source" && exec "${PYTHON:-python3}" gradescope_run.py
"""
SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, building the autograder's image.
set -e
apt-get update && apt-get install -y bubblewrap
pip3 install -r /autograder/source/requirements.txt
"""
TREES = ("core", "graders", "gpt")  # the checker and the code it imports


def _tree(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    )


def build(course: Course, lesson: str, to: Path | None = None) -> Path:
    """Write the autograder zip of ``lesson`` (released in ``course``); returns its path."""
    from .release import requirements

    about = load_manifest().lesson(lesson)
    package = course.source / lesson / PACKAGE
    if not package.is_dir():
        raise SetupError(f"{lesson!r} is not released in {course.root}: release it first")
    files: dict[str, bytes] = {}
    for tree in TREES:
        for path in _tree(ROOT / tree):
            files[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    files["course/lessons.toml"] = (ROOT / "course" / "lessons.toml").read_bytes()
    for path in _tree(package):
        files[f"{PACKAGE}/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    released = course.root / "release.json"  # the site the links point to
    if released.is_file():
        files["release.json"] = released.read_bytes()
    files["gradescope_run.py"] = (Path(__file__).parent / "gradescope_run.py").read_bytes()
    config = {"lesson": lesson, "module": about.module}
    files["gradescope.json"] = json.dumps(config, indent=1).encode() + b"\n"
    files["requirements.txt"] = requirements().encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        scripts = {"run_autograder": RUN_AUTOGRADER.encode(), "setup.sh": SETUP.encode()}
        for name, data in [*scripts.items(), *sorted(files.items())]:
            info = zipfile.ZipInfo(name)
            # Readable by all: the sandboxed worker reads gpt/ as an unprivileged user. The
            # scripts are executable, as Gradescope runs them.
            info.external_attr = (0o755 if name in scripts else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    path = Path(to or course.root / "gradescope") / f"{lesson}.zip"
    atomic_write_bytes(path, buffer.getvalue())
    return path
