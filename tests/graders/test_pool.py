"""graders/pool.py: the one owner of the workers kept beyond a grading, its rules checked on
stand-ins for workers (no process starts here; tests/graders/test_launch.py and
test_sandbox.py run the same rules with real workers)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from graders.pool import WorkerPool, default_pool
from graders.worker import limits

MEMORY = limits.MEMORY


class Worker:
    """What the pool asks of a worker: whether it runs, to retire, to end."""

    def __init__(self, *, running: bool = True, retires: bool = True) -> None:
        self.alive = running
        self.retires = retires
        self.retired = 0
        self.killed = False

    def running(self) -> bool:
        return self.alive and not self.killed

    def retire(self) -> bool:
        self.retired += 1
        return self.retires

    def kill(self) -> None:
        self.killed = True


@pytest.fixture
def pool():
    with WorkerPool() as made:
        yield made


@pytest.fixture
def targets(tmp_path: Path) -> list[Path]:
    made = [tmp_path / name for name in ("first", "second")]
    for target in made:
        target.mkdir()
    return made


def _take(pool: WorkerPool, target: Path, sandbox: bool = False, renew=lambda proc: True):
    return pool.take_idle(target, sandbox=sandbox, memory=MEMORY, renew=renew)


def test_an_unsandboxed_worker_serves_any_target_once(pool, targets):
    worker = Worker()
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=worker)
    assert worker.retired == 1 and not worker.killed and pool.held()["idle"] == 1
    renewed = []
    assert _take(pool, targets[1], renew=lambda proc: renewed.append(proc) or True) is worker
    assert renewed == [worker] and _take(pool, targets[1]) is None


def test_one_idle_worker_per_kind(pool, targets):
    kept, more = Worker(), Worker()
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=kept)
    pool.keep(targets[1], sandbox=False, memory=MEMORY, proc=more)
    assert more.killed and not kept.killed and pool.held()["idle"] == 1
    other_memory = Worker()  # another command line: another kind
    pool.keep(targets[0], sandbox=False, memory=MEMORY // 2, proc=other_memory)
    assert not other_memory.killed and pool.held()["idle"] == 2
    assert _take(pool, targets[0]) is kept


def test_a_sandboxed_worker_serves_only_its_target_and_one_is_kept_in_all(pool, targets):
    first, second = Worker(), Worker()
    pool.keep(targets[0], sandbox=True, memory=MEMORY, proc=first)
    assert _take(pool, targets[1], sandbox=True) is None
    assert _take(pool, targets[0]) is None, "a sandboxed worker served an unsandboxed grading"
    assert pool.idle_targets() == [str(targets[0].resolve())]
    pool.keep(targets[1], sandbox=True, memory=MEMORY, proc=second)
    assert first.killed and pool.idle_targets() == [str(targets[1].resolve())]
    assert _take(pool, targets[1], sandbox=True) is second


def test_a_dead_or_unready_kept_worker_is_ended_not_taken(pool, targets):
    dying, unready = Worker(), Worker()
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=dying)
    dying.alive = False  # it died while it waited
    assert _take(pool, targets[0]) is None and dying.killed
    pool.keep(targets[0], sandbox=True, memory=MEMORY, proc=unready)
    assert _take(pool, targets[0], sandbox=True, renew=lambda proc: False) is None
    assert unready.killed and pool.held()["idle"] == 0


def test_a_worker_that_cannot_retire_is_ended(pool, targets):
    stuck = Worker(retires=False)
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=stuck)
    assert stuck.killed and pool.held()["idle"] == 0


def test_only_the_main_thread_keeps_and_takes_idle_workers(pool, targets):
    """A worker asks to die with the thread that started it (PDEATHSIG)."""
    kept, from_thread = Worker(), Worker()
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=kept)
    taken = []

    def grading_in_a_thread() -> None:
        taken.append(_take(pool, targets[0]))
        pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=from_thread)

    thread = threading.Thread(target=grading_in_a_thread)
    thread.start()
    thread.join()
    assert taken == [None] and from_thread.killed and not kept.killed
    assert _take(pool, targets[0]) is kept


def test_a_spare_is_its_owners_and_one_at_a_time(pool):
    owner, other = object(), object()
    first, second = Worker(), Worker()
    pool.keep_spare(owner, first)
    pool.keep_spare(owner, second)
    assert first.killed and not second.killed
    assert pool.take_spare(other) is None
    assert pool.take_spare(owner) is second and pool.take_spare(owner) is None


def test_closing_ends_every_worker_and_the_pool_stays_usable(targets):
    idle, spare = Worker(), Worker()
    with WorkerPool() as pool:
        pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=idle)
        pool.keep_spare(object(), spare)
        assert pool.held() == {"early": 0, "idle": 1, "spare": 1}
    assert idle.killed and spare.killed
    assert pool.held() == {"early": 0, "idle": 0, "spare": 0}
    again = Worker()
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=again)
    assert _take(pool, targets[1]) is again
    pool.close()


def test_no_worker_starts_early_where_an_idle_one_serves(pool, targets):
    pool.keep(targets[0], sandbox=False, memory=MEMORY, proc=Worker())
    assert pool.start_early(targets[1], sandbox=False) is None
    assert pool.held() == {"early": 0, "idle": 1, "spare": 0}


def test_the_default_pool_is_one_object():
    assert default_pool() is default_pool()
    assert isinstance(default_pool(), WorkerPool)
