"""graders/worker_user.py: the command prefix that runs the worker as an unprivileged user."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from graders.worker_user import WORKER_USER_VARIABLE, WorkerUserError, user_prefix

linux_root = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="switching user needs root"
)


def test_no_user_asked_for_means_no_prefix(monkeypatch):
    monkeypatch.delenv(WORKER_USER_VARIABLE, raising=False)
    assert user_prefix() == []


def test_an_unknown_user_or_root_is_one_line(monkeypatch):
    monkeypatch.setenv(WORKER_USER_VARIABLE, "no-such-user-of-the-course")
    with pytest.raises(WorkerUserError, match="no-such-user-of-the-course: no such user"):
        user_prefix()
    with pytest.raises(WorkerUserError, match="is root: name an unprivileged user"):
        user_prefix("root")


@linux_root
def test_the_prefix_runs_the_command_as_that_user_in_a_folder_of_its_own(tmp_path):
    """nobody (every Linux has it) runs the command, owns its working directory (given to it
    by the prefix) and has no supplementary group and no capability."""
    nobody = pwd.getpwnam("nobody")
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    tmp_path.chmod(0o755)
    report = "import os; print(os.getuid(), os.getgid(), os.getgroups(), os.stat('.').st_uid)"
    done = subprocess.run(
        [*user_prefix("nobody"), "/usr/bin/python3", "-I", "-c", report],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=2)[:2] == [str(nobody.pw_uid), str(nobody.pw_gid)]
    assert done.stdout.split()[-1] == str(nobody.pw_uid)
    assert "[]" in done.stdout
    status = subprocess.run(
        [*user_prefix("nobody"), "/bin/grep", "^CapEff", "/proc/self/status"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert status.stdout.split() == ["CapEff:", "0000000000000000"], status.stderr


def test_grading_with_a_user_that_cannot_be_had_stops_with_one_line(monkeypatch, capfd):
    """Before any worker starts, as the sandbox's preflight does: no traceback."""
    from graders.__main__ import main

    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv(WORKER_USER_VARIABLE, "no-such-user-of-the-course")
    assert main(["embeddings", "--target", str(root / "solutions"), "--json", os.devnull]) == 2
    err = capfd.readouterr().err
    assert (
        err == f"error: {WORKER_USER_VARIABLE}=no-such-user-of-the-course: no such user "
        "(create it with useradd)\n"
    )
