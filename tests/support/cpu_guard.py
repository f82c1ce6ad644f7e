"""The CPU a test uses: this process's and every process it started, live or ended.

tests/conftest.py fails a test not marked ``slow`` that uses more than :data:`NOT_SLOW_BOUND`.
Processor time, not wall time: a loaded machine stretches the second, not the first, so the
verdict does not depend on the machine's speed or load.
"""

from __future__ import annotations

import os

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


def tree_seconds(not_own: frozenset[int] = frozenset()) -> float:
    """CPU-seconds of this process and its live descendants so far, with the children each has
    waited for. A process in ``not_own`` counts only its children's time (the fork server's
    template: its own start-up is shared by the whole session, its commands are the tests')."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := _stat(int(name))) is not None:
            stats[int(name)] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0, [os.getpid()]
    while stack:
        pid = stack.pop()
        if pid in stats:
            _, own, waited = stats[pid]
            total += waited + (0 if pid in not_own else own)
            stack.extend(children.get(pid, []))
    return total / _TICK
