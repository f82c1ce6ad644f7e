"""The grading workers kept beyond one grading, and their one owner: ``WorkerPool``.

A worker costs seconds to start (Python, then torch), so three kinds outlive the moment they
are made, and a pool holds them all:

- **early**: ``python -m graders`` starts its worker (``start_early``) before the checker
  imports torch, pytest and the oracles, so that the two imports of torch overlap; the
  grading's ``graders.client.WorkerClient`` takes it (``take_early``) instead of starting one.
- **idle**: a finished grading's workers wait for the next grading of the same process
  (instructor tooling grading many targets, the project's tests, ``--watch``). A worker never
  runs the student's code, only forks lesson processes that do, so a later grading forks from
  it as from a new one. Unsandboxed, one serves whatever the next grading grades (a fork names
  its target), keyed by its command but the target and its environment. Sandboxed, one serves
  the next grading of the same target only, its sandbox's copy made again from the target's
  files as they are now (graders/sandbox.py's refresh_copy); one is kept in all, the last
  target's. Workers are kept only by the main thread: a worker asks to die with the thread
  that started it (PDEATHSIG), so one a short-lived thread started cannot serve later.
- **spare**: after a failure that killed a client's worker, a second one warms up beside the
  replacement, so code that kills its worker again and again costs little more than that.

``close`` (the context manager's exit, and ``atexit`` for every pool not closed by then) ends
them all. Callers that pass no pool share ``default_pool()``, the one process-wide pool.
"""

from __future__ import annotations

import atexit
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from .launch import Launched, bundle, command, environment
from .worker import limits

IDLE_WORKERS = 1  # kept per kind of worker (each holds torch: hundreds of MB)


class Kept(Protocol):
    """What the pool asks of a kept worker (graders/client.py's ``_Process``)."""

    def running(self) -> bool: ...

    def retire(self) -> bool: ...

    def kill(self) -> None: ...


def keeps_idle_workers() -> bool:
    """Whether this thread may keep or take idle workers (see the module docstring)."""
    return threading.current_thread() is threading.main_thread()


def _resolved(target: Path | str) -> Path:
    return Path(target).expanduser().resolve()


class WorkerPool:
    """Every grading worker kept beyond one grading: started early, idle, or spare."""

    def __init__(self) -> None:
        # Workers are handed over under the lock; started, retired and killed outside it (each
        # waits on a process), so one thread's slow worker holds up no other thread.
        self._lock = threading.Lock()
        self._early: dict[tuple, Launched] = {}
        self._idle: dict[tuple, list[Kept]] = {}
        self._spares: dict[object, Kept] = {}
        atexit.register(self.close)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- started early -------------------------------------------------------------------------

    def start_early(
        self,
        target: Path | str,
        *,
        sandbox: bool,
        memory: int = limits.MEMORY,
        trace: bool = False,
    ) -> Launched | None:
        """Start the worker a grading of ``target`` will take, now (``trace``: one that will
        trace a by-hand function), unless one is started already or a kept idle worker will
        serve that grading. Returns the one started; a start that fails here is left to the
        grading, which reports it."""
        key = (_resolved(target), sandbox, memory)
        try:
            idle_key = self._idle_key(*key)
            with self._lock:
                if key in self._early or (keeps_idle_workers() and self._idle.get(idle_key)):
                    return None
            launched = Launched(
                command(key[0], sandbox=sandbox, memory=memory, trace=trace), bundle()
            )
        except Exception:  # noqa: BLE001 - the grading starts its own and reports why it cannot
            return None
        with self._lock:
            if key not in self._early:
                self._early[key] = launched
                return launched
        launched.kill()  # another thread's start came first
        return None

    def take_early(self, target: Path | str, *, sandbox: bool, memory: int) -> Launched | None:
        """The worker ``start_early`` started for this grading, if it did and it still runs."""
        with self._lock:
            launched = self._early.pop((_resolved(target), sandbox, memory), None)
        if launched is not None and launched.popen.poll() is not None:
            launched.kill()
            return None
        return launched

    # -- idle ----------------------------------------------------------------------------------

    def _idle_key(self, target: Path, sandbox: bool, memory: int) -> tuple:
        """What a kept worker must share with the one a grading would start. Unsandboxed: its
        command but the target (the last two arguments) and its environment (the working
        directory apart). Sandboxed: the target itself and the memory, as well."""
        where = (
            ("sandbox", str(target), memory)
            if sandbox
            else tuple(command(target, sandbox=False, memory=memory)[:-2])
        )
        return (*where, *sorted(environment("").items()), bundle())

    def take_idle(
        self,
        target: Path | str,
        *,
        sandbox: bool,
        memory: int,
        renew: Callable[[Any], bool],
    ) -> Kept | None:
        """A kept worker that still lives and that ``renew`` readies for this grading (the
        main thread only); the dead and the unready are ended on the way."""
        if not keeps_idle_workers():
            return None
        key = self._idle_key(_resolved(target), sandbox, memory)
        while True:
            with self._lock:
                idle = self._idle.get(key)
                if not idle:
                    return None
                proc = idle.pop()
            if proc.running() and renew(proc):
                return proc
            proc.kill()

    def keep(self, target: Path | str, *, sandbox: bool, memory: int, proc: Kept) -> None:
        """A grading is done with ``proc``: it waits, retired, for the next grading of this
        kind, or ends (a full pool, another thread, a worker that cannot retire)."""
        key = self._idle_key(_resolved(target), sandbox, memory)
        ended: list[Kept] = []
        with self._lock:
            if sandbox:  # one sandboxed worker kept in all: this target's
                for other in [k for k in self._idle if k[0] == "sandbox" and k != key]:
                    ended += self._idle.pop(other)
            full = len(self._idle.get(key, [])) >= IDLE_WORKERS
        for gone in ended:
            gone.kill()
        if full or not keeps_idle_workers() or not proc.retire():
            proc.kill()
            return
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < IDLE_WORKERS:
                idle.append(proc)
                return
        proc.kill()

    def idle_targets(self) -> list[str]:
        """The targets of the kept sandboxed workers (for the project's tests)."""
        with self._lock:
            return [key[1] for key, idle in self._idle.items() if key[0] == "sandbox" and idle]

    # -- spare ---------------------------------------------------------------------------------

    def keep_spare(self, owner: object, proc: Kept) -> None:
        """``owner``'s spare worker, warming up for its next failure (one per owner)."""
        with self._lock:
            previous = self._spares.pop(owner, None)
            self._spares[owner] = proc
        if previous is not None:
            previous.kill()

    def take_spare(self, owner: object) -> Kept | None:
        with self._lock:
            return self._spares.pop(owner, None)

    # -- all -----------------------------------------------------------------------------------

    def held(self) -> dict[str, int]:
        """How many workers of each kind the pool holds."""
        with self._lock:
            return {
                "early": len(self._early),
                "idle": sum(len(idle) for idle in self._idle.values()),
                "spare": len(self._spares),
            }

    def close(self) -> None:
        """End every worker the pool holds (it stays usable: a later grading refills it)."""
        with self._lock:
            early = list(self._early.values())
            kept = [proc for idle in self._idle.values() for proc in idle]
            kept += self._spares.values()
            self._early.clear()
            self._idle.clear()
            self._spares.clear()
        for launched in early:
            launched.kill()
        for proc in kept:
            proc.kill()


@functools.cache
def default_pool() -> WorkerPool:
    """The process-wide pool of the callers that pass none (one object, made on first use)."""
    return WorkerPool()
