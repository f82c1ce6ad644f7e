"""graders/launch.py: the worker's command line and process, and the start made early, before
the checker imports torch, which the grading then takes instead of starting one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from variants import Variant, build_target

import graders.client
from graders import launch
from graders.client import WorkerClient
from graders.worker import limits

ROOT = Path(__file__).resolve().parents[2]


def test_starting_a_worker_needs_no_torch_in_the_checker():
    """What ``python -m graders`` runs before it starts the worker imports no torch, so the
    worker's import of torch and the checker's overlap."""
    code = (
        "import sys, graders.__main__, graders.launch, graders.runner, graders.terminal; "
        "print(sorted({'torch', 'pytest', 'graders.client'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def _parent_pid(tmp_path: Path) -> Path:
    code = """
        def perplexity(loss):
            import os
            return os.getppid()
    """
    return build_target(tmp_path, [Variant("objective", "perplexity", "parent", code)])


def test_the_grading_takes_the_worker_started_early(tmp_path, monkeypatch):
    monkeypatch.setattr(graders.client, "_keeps_idle_workers", lambda: False)
    target = _parent_pid(tmp_path)
    launch.start_early(target, sandbox=False)
    early = launch._early[(target.resolve(), False, limits.MEMORY)]
    client = WorkerClient(target)
    try:
        parent = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
    finally:
        client.close()
    assert parent == early.popen.pid, "the lesson process was not forked by the early worker"
    assert client.starts == 1 and not launch._early


def test_an_early_worker_that_died_is_not_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(graders.client, "_keeps_idle_workers", lambda: False)
    target = _parent_pid(tmp_path)
    launch.start_early(target, sandbox=False)
    early = launch._early[(target.resolve(), False, limits.MEMORY)]
    early.popen.kill()
    early.popen.wait()
    client = WorkerClient(target)
    try:
        parent = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
    finally:
        client.close()
    assert parent != early.popen.pid and client.starts == 1 and not launch._early
