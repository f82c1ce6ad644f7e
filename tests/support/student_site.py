"""The student site, built as `nox -s docs` builds it, for the tests that read or serve it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_student_site(out: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the repository's site into ``out`` (COURSE_INSTRUCTOR
    unset): the finished process, for the caller to judge."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_INSTRUCTOR"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml"]
    return subprocess.run(
        [*command, "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
