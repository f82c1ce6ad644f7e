"""The guard's count of CPU includes the processes a test starts, live or ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import cpu_guard
from support.cpu_guard import tree_seconds

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parents[1]

SPIN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"


@pytest.fixture(params=["children-files", "whole-proc-scan"])
def walk(request, monkeypatch):
    """Both ways the guard finds a process's children: the kernel's per-thread lists, and the
    scan of all of /proc it falls back on where those are missing."""
    if request.param == "whole-proc-scan":
        monkeypatch.setattr(cpu_guard, "_HAS_CHILDREN_FILES", False)
    elif not cpu_guard._HAS_CHILDREN_FILES:
        pytest.skip("this kernel keeps no /proc/PID/task/TID/children files")


def test_an_ended_child_counts(walk):
    before = tree_seconds()
    subprocess.run([sys.executable, "-c", SPIN], check=True)
    assert tree_seconds() - before >= 0.45


def test_a_live_child_counts_and_a_process_not_owned_only_its_children(walk):
    child = subprocess.Popen(
        [sys.executable, "-c", SPIN + "print('spun', flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Once it has spun all of its 0.5 s (it says so, then sleeps): the two scans below are
        # not one instant, and a child still spinning leaves the difference short. Its own count
        # in /proc is whole clock ticks, rounded down (0.49 for a child that spun 0.509 s): a
        # wait for that count to reach 0.5 waited forever on a fresh clone.
        assert child.stdout is not None and child.stdout.readline() == "spun\n"
        assert tree_seconds() - tree_seconds(frozenset({child.pid})) >= 0.45
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


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
