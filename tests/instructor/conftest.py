"""Fixtures of the instructor tests: a writable copy of the released course (autograde,
regrade), and for the Gradescope autograder's tests (test_gradescope.py, test_gradescope_run.py)
the zip, unpacked as Gradescope unpacks it, and what its unprivileged fallback needs here."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.system_packages import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
GRADESCOPE_LESSON = "embeddings"
SITE = "https://course.example.org/gpt/"  # the site the course's release recorded


@pytest.fixture
def course(released_course, tmp_path, monkeypatch):
    """A copy of the released course of its own, on the default (SQLite) gradebook."""
    from instructor.course import Course
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    return Course.at(root)


def _open_folder(prefix: str) -> Path:
    """A fresh folder every user may enter, outside pytest's private (0700) temporary tree,
    as /autograder is: the worker's unprivileged user reads gpt/ and the upload there."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


@pytest.fixture
def open_folder() -> Iterator[Path]:
    folder = _open_folder("course-gradescope-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def gradescope_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The autograder zip of GRADESCOPE_LESSON, built from a course folder holding what a
    release leaves for it (the released package, release.json with the site's address),
    without the minute nbgrader's release takes."""
    pytest.importorskip("nbformat", reason="the grading extra (nbgrader) is not installed")
    from instructor.course import Course
    from instructor.gradescope import build

    course = tmp_path_factory.mktemp("gradescope-course")
    released = course / "source" / GRADESCOPE_LESSON / "exercises"
    shutil.copytree(ROOT / "exercises", released, ignore=shutil.ignore_patterns("__pycache__"))
    (course / "release.json").write_text(json.dumps({"site_url": SITE}) + "\n")
    return build(Course.at(course), GRADESCOPE_LESSON, course / "gradescope")


@pytest.fixture
def unpack(gradescope_zip: Path, open_folder: Path) -> Callable[[str], Path]:
    """``unpack(NAME)``: the zip laid out as Gradescope lays it out (source/, submission/,
    run_autograder) under ``open_folder/NAME`` instead of /autograder; returns that folder."""
    from support.autograder_folder import lay_out

    def unpacked(name: str) -> Path:
        return lay_out(gradescope_zip, open_folder / name / "autograder")

    return unpacked


@pytest.fixture(scope="session")
def student_user() -> str:
    """The autograder's unprivileged user, created as setup.sh creates it (which needs root,
    as Gradescope runs setup.sh and run_autograder)."""
    from instructor.gradescope_run import STUDENT_USER, SYSTEM_TOOLS, ensure_user

    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        skip_or_fail("the unprivileged fallback needs Linux and root (to create its user)")
    missing = [t for t in ("useradd", "setpriv") if not shutil.which(t, path=SYSTEM_TOOLS)]
    if missing:
        skip_or_fail(f"{' and '.join(missing)} not installed (apt-get install passwd util-linux)")
    ensure_user()
    return STUDENT_USER


def _others_can_reach(path: Path) -> bool:
    """Whether a user of no group of the owner's can reach ``path`` (every folder above it,
    as written and resolved, searchable by others) and read it (and run it, or list it)."""
    resolved = path.resolve()
    folders = [*Path(os.path.abspath(path)).parents, *resolved.parents]
    return all(f.stat().st_mode & 0o001 for f in folders) and (
        resolved.stat().st_mode & 0o005 == 0o005
    )


@pytest.fixture(scope="session")
def student_python() -> Iterator[str]:
    """An interpreter with this environment's packages that the unprivileged user can run:
    this one where others may reach it, else (a Python or a checkout under /root, as pyenv's)
    the system's Python of the same version in a virtualenv whose .pth adds this environment's
    site-packages: where others cannot reach those either, bind-mounted into an open folder in
    a mount namespace of the interpreter's own (a wrapper enters it: the checker and its workers
    inherit it)."""
    import shlex
    import site
    import sysconfig

    packages = [Path(p) for p in site.getsitepackages()]
    if all(_others_can_reach(p) for p in [Path(sys.executable), *packages]):
        yield sys.executable
        return
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(f"python{version}", path="/usr/bin:/bin")
    if system is None:
        skip_or_fail(
            f"no Python {version} that other users can run: {sys.executable} is in a private "
            f"folder, and there is no /usr/bin/python{version}"
        )
    private_site = not all(_others_can_reach(p) for p in packages)
    unshare = shutil.which("unshare", path="/usr/bin:/bin")
    mount = shutil.which("mount", path="/usr/bin:/bin")
    if private_site and (os.geteuid() != 0 or unshare is None or mount is None):
        skip_or_fail(
            "this environment's site-packages are in a private folder, and binding them into "
            "an open one needs root, unshare and mount"
        )
    folder = _open_folder("course-student-python-")
    bin_dir = folder / "bin"
    lib = folder / Path(sysconfig.get_path("purelib", "venv", vars={"base": "."}))
    bin_dir.mkdir()
    lib.mkdir(parents=True)
    (bin_dir / "python").symlink_to(system)
    (folder / "pyvenv.cfg").write_text(
        f"home = {Path(system).parent}\ninclude-system-site-packages = false\n"
    )
    binds = []
    if private_site:
        for number, path in enumerate(packages):
            seen = folder / "site" / str(number)
            seen.mkdir(parents=True)
            binds.append(f"{mount} --bind {shlex.quote(str(path))} {shlex.quote(str(seen))}")
        packages = [folder / "site" / str(number) for number in range(len(packages))]
    adds = "".join(f"import site; site.addsitedir({str(p)!r})\n" for p in packages)
    (lib / "course-dev.pth").write_text(adds)
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    python = str(bin_dir / "python")
    if binds:
        inside = " && ".join([*binds, 'exec "$0" "$@"'])
        wrapper = bin_dir / "python-with-site"
        wrapper.write_text(
            f"#!/bin/sh\nexec {unshare} --mount --propagation private /bin/sh -c "
            f'{shlex.quote(inside)} {shlex.quote(python)} "$@"\n'
        )
        wrapper.chmod(0o755)
        python = str(wrapper)
    yield python
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def path_without_bwrap() -> Iterator[str]:
    """A PATH that finds every command of this one but bubblewrap's ``bwrap``, as on a
    Gradescope image without it."""
    folder = _open_folder("course-no-bwrap-")
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for tool in Path(entry).iterdir():
            if tool.name != "bwrap" and not (folder / tool.name).exists():
                (folder / tool.name).symlink_to(tool)
    yield str(folder)
    shutil.rmtree(folder, ignore_errors=True)


OTHER_USER = "course-other"  # a second local user of the grading machine, for what it may read


@pytest.fixture(scope="session")
def other_user() -> tuple[int, int]:
    """(uid, gid) of a second, unprivileged local user (created here, which needs root)."""
    import pwd

    from instructor.gradescope_run import SYSTEM_TOOLS

    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        skip_or_fail("a second local user needs Linux and root (to create it)")
    useradd = shutil.which("useradd", path=SYSTEM_TOOLS)
    if not useradd:
        skip_or_fail("useradd not installed (apt-get install passwd)")
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:
        shell = shutil.which("nologin", path=SYSTEM_TOOLS) or "/bin/false"
        command = [useradd, "--system", "--no-create-home", "--shell", shell, OTHER_USER]
        import subprocess

        subprocess.run(command, check=True, capture_output=True)
        entry = pwd.getpwnam(OTHER_USER)
    return entry.pw_uid, entry.pw_gid
