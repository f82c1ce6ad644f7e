"""One grading run, as a cluster worker performs it: the harness on one submission's files.

Kept apart from :mod:`.autograde` (the scheduling and the recording) and light on imports (the
standard library, the course layout and the notebook's harness command): a Dask worker
unpickles :func:`grade_files` before its first task, and what this module imports every worker
pays for before it grades anything (nbformat's schema validator alone costs a second).

The harness runs forked from this process's warm grading host (:mod:`.grading_host`: torch and
the graders imported once, not once per submission), else, where the host cannot run (no fork,
or :data:`COLD_VARIABLE` set to 1), as the cold command ``python -m graders ...``; the two give
the same report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from core.cli import die_with_parent
from core.manifest import ROOT
from graders.notebook import harness_command

from .course import PACKAGE
from .grading_host import shared_host

DEFAULT_TIMEOUT = 900.0  # seconds for one submission's grading run (all its checks)
ATTEMPTS = 2  # a grading run that graded nothing at all is tried again once
COLD_VARIABLE = "COURSE_COLD_GRADING"  # 1: every grading run is a cold `python -m graders`
# The process groups of the grading runs this process has going (the threads engine grades in
# this process): what an interrupted autograde stops, for they run in sessions of their own
# that Ctrl-C never reaches.
_running: set[int] = set()
_running_lock = threading.Lock()


def grade_files(
    lesson: str,
    files: dict[str, bytes],
    *,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    seed: int | None = None,
    scratch: str | None = None,
) -> dict[str, Any]:
    """Grade one submission's package with the harness (public and hidden checks) in a process
    of its own; runs on a cluster worker. ``seed`` decides the checks' inputs (default: a new
    secret one); the submission is written to a temporary folder in ``scratch`` where that
    folder exists here (the run's own, which an interrupted autograde removes), else in the
    system's. Returns ``{"report", "error", "seconds", "log", "seed"}``."""
    started = time.monotonic()
    error, report, output = None, None, b""
    seed = seed or secret_seed()
    where = scratch if scratch and os.path.isdir(scratch) else None
    # Only this user may enter it (0700, as mkdtemp makes it): it holds the student's code.
    with tempfile.TemporaryDirectory(prefix=scratch_prefix(GRADE), dir=where) as tmp:
        target = Path(tmp) / PACKAGE
        for rel, data in files.items():
            path = target / rel
            if ".." in Path(rel).parts or path.is_symlink():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        # What is inside is readable by the sandbox's own user (its copy is bound in); the
        # folder itself stays this user's alone, so no other user of the machine reaches it.
        for root, _dirs, names in os.walk(tmp):
            if root != tmp:
                os.chmod(root, 0o755)
            for name in names:
                os.chmod(Path(root) / name, 0o644)
        report_path = Path(tmp) / "report.json"
        command = harness_command(lesson, target, report_path, hidden=True, sandbox=sandbox)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH",)}
        env["PYTHONPATH"] = str(ROOT)
        # Inputs no release holds, drawn from a secret of this submission's own (never passed
        # to the sandbox): recorded answers earn nothing here (graders/answers.py).
        env["COURSE_INPUT_SEED"] = str(seed)
        for _attempt in range(ATTEMPTS):
            error, report = None, None
            status, out = _run(command, env, timeout)
            output += out[-(1 << 20) :]
            if status is None:
                error = f"the grading run took longer than {timeout:g} s and was stopped"
            elif status != 0:
                error = f"the grading run exited with status {status}"
            try:
                report = json.loads(report_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                report = None
            # A run that graded nothing failed for reasons of its own (the worker could not
            # start, the machine was out of memory): that is not the student's doing.
            if error is None or "took longer" in error or graded_any(report):
                break
    if report is None:
        error = error or "the grading run left no report"
        report = {"lessons": [], "points": 0, "max_points": 0, "complete": False}
    return {
        "report": report,
        "error": error,
        "seconds": round(time.monotonic() - started, 2),
        "log": output.decode("utf-8", "replace"),
        "seed": seed,
    }


RUN, GRADE = "course-autograde-", "course-grade-"  # scratch folders, in the temporary directory
SANDBOX_COPY = "grading-sandbox-"  # the sandbox's copies of a submission (graders/sandbox.py)
_PID = re.compile(r"^(?:course-autograde-|course-grade-|grading-sandbox-)(\d+)-")


def scratch_prefix(kind: str) -> str:
    """A scratch folder's name prefix: its kind and this process's id, so that a later run
    can tell the folders of a run that was killed (:func:`remove_stale_scratch`)."""
    return f"{kind}{os.getpid()}-"


def remove_stale_scratch(where: str | None = None) -> list[str]:
    """Remove the scratch folders (student code) that runs of this user left in the temporary
    directory when they were killed and could not remove them: those named with the id of a
    process that no longer runs. Returns what was removed."""
    folder = where or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        found = _PID.match(entry.name)
        try:
            mine = (
                entry.is_dir(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
            )
        except OSError:
            continue
        if not found or not mine or _alive(int(found.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process of that id
    return True


def _run(command: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, bytes]:
    """Run the harness, forked from the warm host where it can be; its exit status (None when
    stopped at ``timeout``) and its output."""
    host = shared_host() if os.environ.get(COLD_VARIABLE) != "1" else None
    if host is not None and command[:3] == [sys.executable, "-m", "graders"]:
        outcome = host.run(command[3:], env, str(ROOT), timeout, started=_started, ended=_ended)
        if outcome is not None:
            return outcome
    return _run_cold(command, env, timeout)


def _started(group: int) -> None:
    with _running_lock:
        _running.add(group)


def _ended(group: int) -> None:
    with _running_lock:
        _running.discard(group)


def _run_cold(command: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, bytes]:
    """The harness as a process of its own (what the warm host stands in for)."""
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    _started(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        _stop(proc.pid)
        out, _ = proc.communicate()
        return None, out
    finally:
        _ended(proc.pid)


def _stop(group: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGKILL)  # the harness and what it started


def stop_running() -> None:
    """Stop every grading run of this process (an interrupted autograde)."""
    with _running_lock:
        for group in list(_running):
            _stop(group)


def secret_seed() -> int:
    """A seed for one grading run's inputs: secret, and never the public one (0)."""
    return secrets.randbelow(2**63 - 1) + 1


def graded_any(report: dict | None) -> bool:
    rows = [row for lesson in (report or {}).get("lessons", []) for row in lesson["checks"]]
    return any(row.get("passed") or row.get("detail") != "not graded" for row in rows)
