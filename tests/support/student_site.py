"""The student site, built as `nox -s docs` builds it, for the tests that read or serve it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support import forkserver

ROOT = Path(__file__).resolve().parents[2]


def build_student_site(out: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the repository's site into ``out`` (COURSE_INSTRUCTOR
    unset): the finished process, for the caller to judge. It is forked from the tests' warm
    template (support/forkserver.py), which has imported torch and matplotlib for the chapters'
    examples."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_INSTRUCTOR"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    command = ["-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml"]
    return forkserver.run(
        [*command, "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
