"""instructor/grading.py: what a cluster worker imports before its first task."""

from __future__ import annotations

import subprocess
import sys

import pytest
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


# As the other user: each folder listed and each file read that it can, named.
READ_ALL = (
    'for path in "$@"; do if [ -d "$path" ]; then ls -A "$path" >/dev/null 2>&1 && '
    'echo "listed $path"; else head -c 1 "$path" >/dev/null 2>&1 && echo "read $path"; fi; '
    "done; true"
)


AUTOGRADE = (
    "import sys\n"
    "from instructor import autograde\n"
    "from instructor.course import Course\n"
    "autograde.autograde(Course.at(sys.argv[1]), ['embeddings'], engine='threads', "
    "sandbox=False, progress=False)\n"
)
# What a plain nbgrader autograde's first cell runs: no run folder of autograde's around it.
GRADE_ONE = (
    "import sys\n"
    "from instructor.__main__ import main\n"
    "main(['--course', sys.argv[1], 'grade-submission', '--student', 'ann', '--lesson', "
    "'embeddings', '--no-sandbox'])\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("script", [AUTOGRADE, GRADE_ONE], ids=["autograde", "nbgrader-cell"])
def test_a_killed_grading_leaves_nothing_another_user_reads(
    course, other_user, open_folder, script
):
    """A grading killed outright (SIGKILL: no cleanup runs) leaves its scratch folders, with
    the student's code, in the temporary directory: only their owner may enter them, and the
    next run removes them (a live run's are kept)."""
    import os
    import signal
    import time

    from support.autograde_fakes import submit

    from instructor.grading import remove_stale_scratch, scratch_prefix

    marker = "# ann's own work, for no other user's eyes"
    module = submit(course.root, "ann", {}) / "exercises" / "embeddings.py"
    module.write_text(module.read_text() + marker + "\n")
    env = {**os.environ, "TMPDIR": str(open_folder), "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-c", script, str(course.root)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        waited = 0.0
        while not list(open_folder.rglob("course-grade-*/exercises/*.py")):
            assert run.poll() is None, "the grading ended before it could be killed"
            assert waited < 300, "no submission was written to the scratch folder"  # hang guard
            time.sleep(0.2)
            waited += 0.2
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    left = sorted(open_folder.iterdir())
    assert left and all(p.stat().st_mode & 0o777 == 0o700 for p in left), left
    held = [p for p in open_folder.rglob("*.py") if marker in p.read_text()]
    assert held  # the student's code is what was left
    uid, gid = other_user
    everything = [str(p) for top in left for p in [top, *top.rglob("*")]]

    def readable(**who: object) -> str:
        command = ["/bin/sh", "-c", READ_ALL, "sh", *everything]
        return subprocess.run(command, capture_output=True, text=True, check=True, **who).stdout

    assert f"read {held[0]}" in readable()  # what the owner reads
    seen = readable(user=uid, group=gid, extra_groups=[])
    assert seen == "", seen  # not one folder listed, not one file read by the other user
    # The next run removes what the killed one left, and nothing of a live run.
    live = open_folder / f"{scratch_prefix('course-grade-')}kept"
    live.mkdir(mode=0o700)
    # (a worker's own empty working folder, grader-worker-*, 0700 too, may be left beside them)
    scratch = [p for p in left if not p.name.startswith("grader-worker-")]
    assert scratch
    assert sorted(remove_stale_scratch(str(open_folder))) == sorted(map(str, scratch))
    kept = [p for p in open_folder.iterdir() if not p.name.startswith("grader-worker-")]
    assert kept == [live]
