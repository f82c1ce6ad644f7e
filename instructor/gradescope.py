"""``gradescope LESSON``: the lesson as a Gradescope autograder zip (instructors only).

Upload ``gradescope/LESSON.zip`` as a programming assignment's autograder, on Gradescope's
Ubuntu 22.04 base image. Gradescope unpacks it into ``/autograder/source``, runs ``setup.sh``
once when it builds the image (``SETUP``: Python 3.11, PyTorch's CPU build and the grader's
packages, bubblewrap, then :mod:`.gradescope_run`'s ``--setup``: the unprivileged user and a
self-check) and ``run_autograder`` for every submission, which runs :mod:`.gradescope_run`:
the harness on the upload, isolated, and ``results.json`` from its report, its links on the
course site the release recorded (``gradescope.json``). The zip holds the checker
(``graders/`` with the hidden graders and the secret half, ``core/``, ``gpt/``, the manifest)
and the lesson's released package, so it is as secret as the instructor's tree: never share
it with students.
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
# Gradescope runs this, as root, for every submission (the course's instructor/gradescope.py
# wrote it). AUTOGRADER_ROOT and PYTHON stand in for /autograder and setup.sh's Python in tests.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${PYTHON:-$ROOT/venv/bin/python}"
if [ ! -x "$PYTHON" ]; then
    mkdir -p "$ROOT/results"
    cat >"$ROOT/results/results.json" <<'JSON'
{"score": 0, "stdout_visibility": "hidden", "tests": [],
 "output": "Not graded: setup.sh installed no Python. No fault of yours: the staff must fix it."}
JSON
    exit 0
fi
cd "$ROOT/source" && exec "$PYTHON" gradescope_run.py
"""
# Gradescope's base image is Ubuntu 22.04, whose python3 is 3.10: Python 3.11 comes from the
# deadsnakes PPA (its latest 3.11 release, where Ubuntu's own python3.11 of 22.04 is an early
# 3.11.0), in a virtualenv of its own; PyTorch's CPU build alone from PyTorch's index (PyPI's
# Linux wheel is a CUDA build of several GB), the rest from PyPI, GPT-2's vocabulary package
# without its dependencies, as the noxfile installs them.
SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, building the autograder's image (the course's
# instructor/gradescope.py wrote it). `setup.sh --check` skips the installs (no network) and
# runs only the last step: the unprivileged user, then a line per check that grading works.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
PYTHON="${{PYTHON:-$VENV/bin/python}}"
if [ "${{1:-}}" != "--check" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends ca-certificates software-properties-common \\
        gpg-agent bubblewrap util-linux passwd
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
    python3.11 -m venv "$VENV"
    PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -c "$SOURCE/constraints.txt")
    "${{PIP[@]}}" --no-deps --index-url {torch_index} torch
    "${{PIP[@]}}" -r "$SOURCE/requirements.txt"
    "${{PIP[@]}}" --no-deps {vocab}
fi
exec "$PYTHON" "$SOURCE/gradescope_run.py" --setup
"""
TREES = ("core", "graders", "gpt")  # the checker and the code it imports


def setup_script() -> str:
    """``setup.sh``: installs as the noxfile does (its CPU index, gpt/vocab.py's package)."""
    from gpt.vocab import VOCAB_PACKAGE

    from .release import torch_cpu_index

    index = torch_cpu_index()
    return SETUP.format(torch_index=index, vocab=VOCAB_PACKAGE)


def _tree(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    )


def build(course: Course, lesson: str, to: Path | None = None) -> Path:
    """Write the autograder zip of ``lesson`` (released in ``course``); returns its path."""
    from .release import course_site, requirements

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
    files["gradescope_run.py"] = (Path(__file__).parent / "gradescope_run.py").read_bytes()
    # The site the results link to: the one the release recorded, as in nbgrader feedback.
    config = {"lesson": lesson, "module": about.module, "site_url": course_site(course)}
    files["gradescope.json"] = json.dumps(config, indent=1).encode() + b"\n"
    files["requirements.txt"] = requirements().encode()
    files["constraints.txt"] = (ROOT / "constraints.txt").read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        scripts = {"run_autograder": RUN_AUTOGRADER.encode(), "setup.sh": setup_script().encode()}
        for name, data in [*scripts.items(), *sorted(files.items())]:
            info = zipfile.ZipInfo(name)
            # Readable by all: the worker reads gpt/ as an unprivileged user (gradescope_run.py
            # locks the checker's secrets). The scripts are executable, as Gradescope runs them.
            info.external_attr = (0o755 if name in scripts else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    path = Path(to or course.root / "gradescope") / f"{lesson}.zip"
    atomic_write_bytes(path, buffer.getvalue())
    return path
