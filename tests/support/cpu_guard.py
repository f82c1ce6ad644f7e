"""The CPU a test uses: this process's and every process it started, live or ended.

:class:`CpuGuard` (registered by tests/conftest.py) fails a test not marked ``slow`` that uses more
than :data:`NOT_SLOW_BOUND`. Processor time, not wall time: a loaded machine stretches the second,
not the first, so the verdict does not depend on the machine's speed or load.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from support.forkserver import template_pids

# A test not marked slow uses at most this many CPU-seconds (its process and its children). The
# suite's profile: the heaviest routine tests use 4-7 (a grading command with its worker); the
# ones above 10 train, grade whole courses or build the site, and are marked slow.
NOT_SLOW_BOUND = 12.0
_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent, own ticks, ticks of its ended and waited children) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()  # after the command's name, which may hold spaces
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _children_from_files(pid: int) -> list[int]:
    """The children of a live process, from each of its threads' ``children`` file (a kernel
    built with CONFIG_PROC_CHILDREN)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as f:
                found.extend(int(child) for child in f.read().split())
        except OSError:
            pass  # the thread has just ended
    return found


_HAS_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def children_reader() -> Callable[[int], list[int]]:
    """How to list a live process's children: its threads' ``children`` files, read when asked
    (only the processes of one tree), or, where the kernel keeps none, one pass over every
    process in /proc, made now."""
    if _HAS_CHILDREN_FILES:
        return _children_from_files
    by_parent: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := _stat(int(name))) is not None:
            by_parent.setdefault(found[0], []).append(int(name))
    return lambda pid: by_parent.get(pid, [])


def children_of(pid: int) -> list[int]:
    """The children of the live process ``pid``."""
    return children_reader()(pid)


def tree_seconds(not_own: frozenset[int] = frozenset()) -> float:
    """CPU-seconds of this process and its live descendants so far, with the children each has
    waited for. A process in ``not_own`` counts only its children's time (the fork server's
    template: its own start-up is shared by the whole session, its commands are the tests').

    It reads this process's tree alone (each process's ``children`` files), not every
    process of a machine that runs other work: it is called twice a test."""
    children = children_reader()
    total, stack = 0, [os.getpid()]
    while stack:
        pid = stack.pop()
        if (found := _stat(pid)) is None:
            continue  # ended since its parent was read
        _, own, waited = found
        total += waited + (0 if pid in not_own else own)
        stack.extend(children(pid))
    return total / _TICK


class CpuGuard:
    """The guard's hooks, as a plugin of the run.

    A test is counted from its setup to its teardown, so a module's fixture counts to the first
    test that needs it (the order within a file is fixed). A session fixture's setup counts to no
    test: which test asks first depends on how pytest-xdist deals the files, and the verdict must
    not. Nor does the fork server's own start-up (tests/support/forkserver.py); the commands it
    forks count.
    """

    def __init__(self) -> None:
        self.session_depth = 0
        self.session_seconds = 0.0  # session fixtures' setups so far
        self.started: dict[str, tuple[float, float]] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        if fixturedef.scope != "session":
            yield
            return
        self.session_depth += 1
        before = tree_seconds(template_pids())
        try:
            yield
        finally:
            self.session_depth -= 1
            if self.session_depth == 0:  # the outermost: the nested ones are inside it
                self.session_seconds += tree_seconds(template_pids()) - before

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.started[item.nodeid] = (tree_seconds(template_pids()), self.session_seconds)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when != "teardown" or item.nodeid not in self.started:
            return
        before, session_before = self.started.pop(item.nodeid)
        used = tree_seconds(template_pids()) - before - (self.session_seconds - session_before)
        if used > NOT_SLOW_BOUND and item.get_closest_marker("slow") is None and report.passed:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} used {used:.1f} CPU-seconds (with the processes it started), "
                f"more than NOT_SLOW_BOUND ({NOT_SLOW_BOUND}) in tests/support/cpu_guard.py: "
                "mark it @pytest.mark.slow, or make it cheaper"
            )
