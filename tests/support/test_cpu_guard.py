"""The guard's count of CPU includes the processes a test starts, live or ended."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from support.cpu_guard import tree_seconds

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parents[1]

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


GUARDED_RUN = """
import sys
import time

import pytest

sys.path.insert(0, {tests!r})
from support import cpu_guard

cpu_guard.NOT_SLOW_BOUND = 0.3


def pytest_configure(config):
    config.pluginmanager.register(cpu_guard.CpuGuard(), "cpu-guard")


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.fixture(scope="session")
def costly():
    spin(0.6)
"""


def test_a_session_fixture_counts_to_no_test_and_a_test_over_the_bound_fails(pytester):
    """The guard as a run registers it: the session fixture's 0.6 s (above the bound) is charged
    to none of its tests, a test's own 0.6 s fails it (at its teardown, where the guard counts),
    and a test marked slow may use it."""
    pytester.makeconftest(GUARDED_RUN.format(tests=str(TESTS)))
    pytester.makepyfile(
        """
        import pytest
        from conftest import spin

        def test_first_to_ask(costly):
            pass

        def test_second_to_ask(costly):
            pass

        def test_spins():
            spin(0.6)

        @pytest.mark.slow
        def test_spins_marked_slow():
            spin(0.6)
        """
    )
    pytester.makeini("[pytest]\nmarkers = slow: slow\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)  # test_spins: its call passed, its teardown fails
    result.stdout.fnmatch_lines(["*test_spins used * CPU-seconds*NOT_SLOW_BOUND (0.3)*"])
