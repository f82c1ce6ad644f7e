"""graders/launch.py: the worker's command line and process, started early (by the grading's
WorkerPool, graders/pool.py) before the checker imports torch, which the grading then takes
instead of starting one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from variants import Variant, build_target

from graders.client import WorkerClient
from graders.pool import WorkerPool

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


@pytest.fixture(scope="module")
def first_grading(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """A grading that takes the worker its pool started early, and that pool, the worker kept
    idle in it for the next grading (one worker, one import of torch, for both tests)."""
    target = _parent_pid(tmp_path_factory.mktemp("early"))
    with WorkerPool() as pool:
        early = pool.start_early(target, sandbox=False)
        started = early is not None and pool.held()["early"] == 1
        client = WorkerClient(target, pool=pool)
        try:
            parent = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
        finally:
            client.close()
        yield SimpleNamespace(
            pool=pool,
            target=target,
            early=early,
            started=started,
            parent=parent,
            starts=client.starts,
            held=pool.held(),
        )


def test_the_grading_takes_the_worker_started_early(first_grading):
    run = first_grading
    assert run.started
    assert run.parent == run.early.popen.pid, (
        "the lesson process was not forked by the early worker"
    )
    assert run.starts == 1 and run.held == {"early": 0, "idle": 1, "spare": 0}


def test_an_early_worker_that_died_is_not_taken(tmp_path):
    target = _parent_pid(tmp_path)
    with WorkerPool() as pool:
        early = pool.start_early(target, sandbox=False)
        assert early is not None
        early.popen.kill()
        early.popen.wait()
        client = WorkerClient(target, pool=pool)
        try:
            parent = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
        finally:
            client.close()
        assert parent != early.popen.pid and client.starts == 1 and not pool.held()["early"]


def test_no_worker_starts_early_where_a_kept_one_will_serve(first_grading):
    """A second grading in the same process (``main()`` called again, the watch) takes the
    worker the first one left idle: starting another early would only cost a torch import."""
    pool, target = first_grading.pool, first_grading.target
    assert pool.start_early(target, sandbox=False) is None
    again = WorkerClient(target, pool=pool)
    try:
        second = again.call("objective.perplexity", [1.0], {}, timeout=60)[0]
    finally:
        again.close()
    assert pool.held() == {"early": 0, "idle": 1, "spare": 0}
    pool.close()
    assert second == first_grading.parent and again.starts == 0
    assert pool.held() == {"early": 0, "idle": 0, "spare": 0}, "closing the pool kept a worker"


def test_a_grading_that_cannot_run_starts_no_worker_early(tmp_path, capfd):
    """A bad lesson or target is reported before any worker could serve it: starting one
    early would only cost a torch import (and, in a process that grades again, keep it)."""
    from graders.__main__ import main

    with WorkerPool() as pool:
        assert main(["--target", str(tmp_path / "no-such-dir")], pool=pool) == 2
        assert main(["nosuchlesson", "--target", str(ROOT / "solutions")], pool=pool) == 2
        assert pool.held() == {"early": 0, "idle": 0, "spare": 0}
    errors = capfd.readouterr().err.splitlines()
    assert len(errors) == 2 and all(line.startswith("error: ") for line in errors), errors
