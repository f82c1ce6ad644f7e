"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import os
import random
import socket
import sys
import threading
from pathlib import Path

import pytest
from support.cpu_guard import CpuGuard
from support.release_site import RELEASED_SITE
from support.run_once import built_once
from support.student_site import build_student_site
from support.system_packages import require

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config: pytest.Config) -> None:
    """With several pytest-xdist workers, each worker and what it starts (a training run, a
    site build, a grader's checker) computes on one thread: the workers already fill the cores,
    and torch's extra threads would only wait on each other, slowing every worker (the
    end-to-end training run took four times its quiet time beside another worker). An explicit
    OMP_NUM_THREADS wins; speed never decides a verdict."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    # The CPU guard: a plugin of the whole run rather than hooks of this file, whose hooks pytest
    # does not call for the session's own fixtures (their node is the Session, above tests/).
    config.pluginmanager.register(CpuGuard(), "cpu-guard")


@pytest.fixture(scope="session", autouse=True)
def _no_personal_jupyter_config(tmp_path_factory):
    """The tests never read the developer's own Jupyter settings (``~/.jupyter``: nbgrader's
    late-penalty plugin, server options): Jupyter's config directory is an empty one of the
    session's."""
    os.environ["JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("jupyter-config"))
    os.environ.pop("JUPYTER_CONFIG_PATH", None)


@pytest.fixture(scope="session", autouse=True)
def _console_scripts_on_path():
    """The test environment's console scripts are on PATH, as in an activated environment or
    a nox session (nbgrader runs ``alembic`` to create a gradebook): what ``python -m
    instructor`` does for itself."""
    from instructor.__main__ import with_console_scripts

    with_console_scripts()


PYTEST_OWN = "PYTEST_CURRENT_TEST"


@pytest.fixture(autouse=True)
def _environment_kept():
    """What a test (or a library it calls) writes into this process's environment is undone
    after it. A variable left behind silently costs the rest of the pytest-xdist worker: with a
    PYTHONHASHSEED the fork server's template was not started with, every later command starts
    cold (tests/support/forkserver.py), three or four CPU-seconds each. Dask's nannies did that
    once, when autograde's local cluster had worker processes (test_autograde checks that
    autograde leaves the environment as it found it): this is the guard for whatever else
    might."""
    before = dict(os.environ)
    yield
    # PYTEST_CURRENT_TEST is pytest's own (set for each phase, removed after the teardown): left
    # alone, since a fixture set up in this test may have copied the environment without it.
    for name in set(os.environ) - set(before) - {PYTEST_OWN}:
        del os.environ[name]
    for name, value in before.items():
        if name != PYTEST_OWN and os.environ.get(name) != value:
            os.environ[name] = value


@pytest.fixture
def bubblewrap() -> Path:
    """bwrap's path; the test skips (fails under CI) where bubblewrap is not installed."""
    return require("bubblewrap")


@pytest.fixture(scope="module")
def listener():
    """A TCP server on the host's loopback: the sandbox must not reach it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _sentences(seed: int, n: int) -> str:
    """Made-up English-like text with real structure (so a model can learn it)."""
    rng = random.Random(seed)
    subjects = ["The cat", "A small dog", "My neighbour", "The old clock", "Every student"]
    verbs = ["watches", "follows", "remembers", "ignores", "describes"]
    objects = ["the quiet river", "a red kite", "the long winter", "an open door", "the tide"]
    endings = [".", " again.", " every morning.", " without a word."]
    return " ".join(
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}{rng.choice(endings)}"
        for _ in range(n)
    )


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """A text file of about 6,000 GPT-2 tokens."""
    path = tmp_path / "corpus.txt"
    path.write_text(_sentences(0, 900))
    return path


@pytest.fixture(scope="session")
def released_course(tmp_path_factory) -> Path:
    """A course directory with every lesson released (``python -m instructor release``):
    the student release in release/SLUG/. Skips where nbgrader is not installed.

    Built once per test run, not once per pytest-xdist worker (a release grades the reference
    of every lesson: a minute of CPU; support/run_once.py). Tests read it or copy it, never
    change it."""
    from support import forkserver

    pytest.importorskip("nbgrader", reason="the grading extra (nbgrader) is not installed")

    def release(folder: Path) -> None:
        built = forkserver.run(
            ["-m", "instructor", "--course", str(folder / "course"), "release"]
            + ["--site-url", RELEASED_SITE],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]

    return built_once(tmp_path_factory, "released", release) / "course"


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The student site, as ``nox -s docs`` builds it (``mkdocs build --strict``), built once
    per test run (every chapter's code runs in it: half a minute of CPU; support/run_once.py)
    for the site's tests and the live course's. Tests read it, never change it."""

    def student_site(folder: Path) -> None:
        result = build_student_site(folder)
        if result.returncode != 0:
            pytest.fail(
                "mkdocs build --strict failed:\n" + result.stdout[-5000:] + result.stderr[-10000:]
            )

    return built_once(tmp_path_factory, "site", student_site)


@pytest.fixture(scope="session", autouse=True)
def _fork_server():
    """This worker's fork server (tests/support/forkserver.py) ends with the session and is
    waited for, so that its CPU time counts to the run."""
    from support import forkserver

    yield
    forkserver.stop()
