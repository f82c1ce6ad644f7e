"""instructor/grading.py: what a cluster worker imports before its first task."""

from __future__ import annotations

import subprocess
import sys

from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.instructor_commands import (  # noqa: E402
    ROOT,
)


def test_a_cluster_worker_imports_little_before_its_first_task():
    """A Dask worker unpickles instructor.grading.grade_files before it grades
    anything: that module must not pull in the recording's libraries (nbformat's validator
    alone costs a second per worker) nor torch (the harness's own process imports it)."""
    heavy = ["distributed", "jsonschema", "nbformat", "nbgrader", "sqlalchemy", "torch"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, instructor.grading; print([m for m in {heavy!r} if m in sys.modules])",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout
