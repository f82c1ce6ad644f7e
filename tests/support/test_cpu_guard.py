"""The guard's count of CPU includes the processes a test starts, live or ended."""

from __future__ import annotations

import subprocess
import sys
import time

from support.cpu_guard import tree_seconds

SPIN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"


def test_an_ended_child_counts():
    before = tree_seconds()
    subprocess.run([sys.executable, "-c", SPIN], check=True)
    assert tree_seconds() - before >= 0.45


def test_a_live_child_counts_and_a_process_not_owned_only_its_children():
    child = subprocess.Popen([sys.executable, "-c", SPIN + "time.sleep(600)"])
    try:
        # Until it has spun all of its 0.5 s (it sleeps after): the two scans below are not one
        # instant, and a child still spinning at 0.45 leaves the difference just short of it.
        while _own(child.pid) < 0.5:
            time.sleep(0.05)
        assert tree_seconds() - tree_seconds(frozenset({child.pid})) >= 0.45
    finally:
        child.kill()
        child.wait()


def _own(pid: int) -> float:
    import os

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
