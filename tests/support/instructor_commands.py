"""What the instructor tests share: the course's root and lesson, the manifest, instructor
commands run as the command line runs them (in a process of their own or in the test's), the
points of the released lesson, and the marks of the tests that need the Linux sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import forkserver

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"
STUDENT_MISTAKE = "off-by-one"  # a named mistake of lookup-matches-indexing
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_bwrap = pytest.mark.usefixtures("bubblewrap")


def manifest():
    from core.manifest import load_manifest

    return load_manifest()


def instructor(course: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return forkserver.run(
        ["-m", "instructor", "--course", str(course), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def instructor_here(capfd: pytest.CaptureFixture, course: Path, *args: str) -> tuple[int, str, str]:
    """An instructor command run in this process (:func:`instructor.__main__.main`, as the
    command line runs it, without a second of interpreter start-up): its exit status, and
    what it printed to standard output and to standard error."""
    from instructor.__main__ import main

    capfd.readouterr()  # what came before is not the command's
    status = main(["--course", str(course), *args])
    out, err = capfd.readouterr()
    return status, out, err


def released_points(course: Path) -> dict[str, float]:
    """Check id -> points of the lesson's notebook as released (the manifest may have gained
    checks since: the release is what was graded)."""
    import nbformat

    from instructor.gradebook import check_of_cell

    nb = nbformat.read(course / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    return {
        check_of_cell(c.source)[1]: c.metadata.nbgrader["points"]
        for c in nb.cells
        if c.metadata.nbgrader.get("grade")
    }
