"""instructor/grading_host.py: a checker forked from the warm host answers as the cold
``python -m graders`` would, with its own arguments, environment and directory; a host that
died is started again, and a checker past its time is stopped with what it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from instructor import grading
from instructor.grading_host import GradingHost, _read_until

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
USAGE = ["--watch", "--strict"]  # an error the checker reports before it loads torch


@pytest.fixture(scope="module")
def host():
    made = GradingHost()
    yield made
    made.close()


def _cold(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, bytes]:
    done = subprocess.run(
        [sys.executable, "-m", "graders", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return done.returncode, done.stdout


def test_a_forked_checker_answers_as_the_cold_command(host):
    for argv in (["--help"], USAGE):
        assert host.run(argv, ENV, str(ROOT), 300) == _cold(argv, ENV, ROOT), argv


def test_the_child_has_its_own_environment_and_directory(host, tmp_path):
    (tmp_path / "seed.txt").write_text("not a seed\n")
    argv = ["embeddings", "--seed-file", "seed.txt"]  # read from the child's directory
    status, out = host.run(argv, ENV, str(tmp_path), 300)
    assert (status, out) == _cold(argv, ENV, tmp_path) and status == 2
    assert out.startswith(b"error: ") and b"seed" in out, out
    seeded = {**ENV, "COURSE_INPUT_SEED": "garbage"}  # read from the child's environment
    status, out = host.run(["embeddings"], seeded, str(ROOT), 300)
    assert (status, out) == (2, b"error: COURSE_INPUT_SEED must be an integer, not 'garbage'\n")
    assert (status, out) == _cold(["embeddings"], seeded, ROOT)


@pytest.fixture
def light_host():
    """A host that imports nothing ahead (a cheap one to start again): what it forks imports
    what it needs, as a cold command does."""
    made = GradingHost(warm=())
    yield made
    made.close()


def test_a_host_runs_in_its_requests_environment_but_for_the_seed(light_host):
    assert light_host.run(USAGE, ENV, str(ROOT), 300) == _cold(USAGE, ENV, ROOT)
    first = light_host.pid
    per_child = {**ENV, "COURSE_INPUT_SEED": "5", "PYTEST_CURRENT_TEST": "another test"}
    assert light_host.run(USAGE, per_child, str(ROOT), 300) == _cold(USAGE, ENV, ROOT)
    assert light_host.pid == first, "a seed of its own started another host"
    other = {**ENV, "TMPDIR": str(ROOT / "build")}  # read at import: a host of its own
    assert light_host.run(USAGE, other, str(ROOT), 300) == _cold(USAGE, ENV, ROOT)
    assert light_host.pid not in (None, first)


def test_a_host_that_died_is_started_again(light_host):
    host = light_host
    assert host.run(USAGE, ENV, str(ROOT), 300) is not None
    first = host.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    waited = 0.0
    while host.running():
        assert waited < 60, "the killed host still runs"  # hang guard
        time.sleep(0.05)
        waited += 0.05
    status, out = host.run(USAGE, ENV, str(ROOT), 300)
    assert status == 2 and out.startswith(b"error: --strict needs a grading that ends")
    assert host.pid not in (None, first)


def test_a_checker_past_its_time_is_stopped_with_what_it_started():
    started = subprocess.Popen(
        ["sh", "-c", "echo started; sleep 600 & sleep 600"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert started.stdout is not None
    try:
        assert started.stdout.readline() == b"started\n"
        out, stopped = _read_until(started.stdout.fileno(), time.monotonic() + 0.2, started.pid)
    finally:
        started.kill()
    # the background sleep, which held the pipe open too, was stopped with its group
    assert (out, stopped) == (b"", True) and started.wait() == -signal.SIGKILL
    done = subprocess.Popen(["sh", "-c", "echo done"], stdout=subprocess.PIPE)
    assert done.stdout is not None
    assert _read_until(done.stdout.fileno(), time.monotonic() + 600, done.pid) == (b"done\n", False)
    done.wait()


def _comparable(report: dict) -> str:
    """The report but where it was written and when."""
    kept = {k: v for k, v in report.items() if k != "target"}
    kept["lessons"] = [{k: v for k, v in e.items() if k != "graded"} for e in report["lessons"]]
    return json.dumps(kept, sort_keys=True)


@pytest.mark.slow
def test_a_submission_grades_the_same_forked_and_cold(monkeypatch):
    files = {path.name: path.read_bytes() for path in (ROOT / "solutions").glob("*.py")}
    files["embeddings.py"] += b"\ndef nearest(*args, **kwargs):\n    raise ValueError\n"
    reports = {}
    for cold in ("1", "0"):
        monkeypatch.setenv(grading.COLD_VARIABLE, cold)
        graded = grading.grade_files("embeddings", files, sandbox=False, seed=7)
        assert graded["error"] is None, graded["log"]
        reports[cold] = graded["report"]
    assert grading.shared_host() is not None and grading.shared_host().running()
    assert 0 < reports["0"]["points"] < reports["0"]["max_points"]
    assert _comparable(reports["0"]) == _comparable(reports["1"])
