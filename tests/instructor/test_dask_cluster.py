"""Autograde's Dask clusters: the local one lets no other process in, and an
external one, a scheduler and a worker started as separate processes the way
docs/instructors.md says, grades a class.

Whoever connects to a Dask scheduler runs code on its workers, as the instructor. The local
cluster therefore has no port at all: its scheduler and workers are threads of autograde's
process.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cpu_guard import children_of
from support.extras import require_extra

require_extra("distributed", "the grading extra (Dask distributed) is missing")
require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"


def _answer() -> int:
    return 42


@contextlib.contextmanager
def _client(address: str, **options) -> Iterator:
    """``distributed.Client(address, **options)``, closed on leaving. A client that fails to
    connect is closed before this raises: left to the garbage collector, its ``__del__`` could
    run inside the next Client's start, which holds Dask's loop lock, and its ``close`` would
    wait on that lock for ever (seen: a run hung in a test of a client refused by a TLS
    scheduler). So the collector is off while a client starts, and a failed one's frames are
    let go and collected at once."""
    from distributed import Client

    enabled = gc.isenabled()
    gc.disable()
    try:
        client = Client(address, **options)
    except BaseException as error:
        chained, seen = error, set()
        while chained is not None and id(chained) not in seen:  # the frames hold the client
            seen.add(id(chained))
            chained.__traceback__ = None
            chained = chained.__cause__ or chained.__context__
        gc.collect()
        raise
    finally:
        if enabled:
            gc.enable()
    with client:
        yield client


def _address(hexed: str) -> tuple[str, int]:
    """(host, port) of an address as /proc/net/tcp* writes it (``0100007F:8CE3``)."""
    host, port = hexed.split(":")
    raw = bytes.fromhex(host)
    # The kernel writes each 32-bit word of the address in the machine's byte order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(port, 16)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _listening() -> set[tuple[str, int]]:
    """(host, port) of each TCP socket of this process that listens (/proc/net/tcp* and the
    process's descriptors)."""
    own = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                own.add(target[len("socket:[") : -1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in own:  # 0A: LISTEN; 9: the inode
                    found.add(_address(fields[1]))
    return found


def test_the_local_cluster_lets_no_other_machine_in_and_starts_no_process():
    """Whoever reaches a Dask scheduler runs code on its workers, as the instructor: the local
    cluster's scheduler and workers are threads of autograde's process, talking in-process
    (no interpreter to start: its tasks only wait on grading runs, each a process of its own).
    The HTTP servers Dask starts beside them listen on the loopback interface only and serve
    nothing: not the task pages that name students, not the proxy to other ports."""
    from instructor.autograde import Engine

    listening, children = _listening(), set(children_of(os.getpid()))
    with Engine("dask", workers=2) as engine:
        assert engine.cluster.scheduler_address.startswith("inproc://")
        workers = engine.client.scheduler_info(n_workers=-1)["workers"]
        assert len(workers) == 2 and all(a.startswith("inproc://") for a in workers), workers
        assert engine.client.submit(_answer).result(timeout=600) == 42
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no HTTP_PROXY
        for host, port in _listening() - listening:
            assert host in ("127.0.0.1", "::1"), f"Dask listens on {host}:{port}"
            for path in ("/health", "/metrics", "/info/main/workers.html", "/proxy/22/x/"):
                with pytest.raises(urllib.error.HTTPError, match="404"):
                    direct.open(f"http://{_url_host(host)}:{port}{path}", timeout=60)
        assert set(children_of(os.getpid())) <= children


def _started() -> int:
    return time.monotonic_ns()


def test_tasks_start_in_the_order_they_are_given():
    """Dask orders tasks of equal priority by their keys' hashes; autograde's follow the
    submissions' order (so the first submitted starts first, and a rerun grades alike)."""
    from instructor.autograde import Engine

    given = [(student, LESSON, "0" * 16) for student in ("zoe", "crash", "ann", "moe", "bob")]
    given += [(f"student{i:02d}", LESSON, "0" * 16) for i in range(20, 0, -1)]
    with Engine("dask", workers=1) as engine:
        started = {
            key: result
            for batch in engine.run({key: (_started, (), {}) for key in given})
            for key, result, error in batch
            if error is None
        }
    assert sorted(started, key=started.__getitem__) == given


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask(*args: str, env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _credentials(folder: Path) -> dict[str, str]:
    """A CA, a certificate and its key as files (what an instructor makes with openssl)."""
    from distributed.security import Security

    made = Security.temporary()
    pems = {"ca": made.tls_ca_file, "cert": made.tls_scheduler_cert, "key": made.tls_scheduler_key}
    files = {}
    for name, pem in pems.items():
        path = folder / f"{name}.pem"
        path.write_text(pem)
        path.chmod(0o600)
        files[name] = str(path)
    return files


def _wait_for_a_worker(address: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with _client(address, timeout=10) as client:
                if client.scheduler_info()["workers"]:
                    return
        except (OSError, TimeoutError):
            pass
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(1)


@pytest.mark.parametrize("protocol", ["tcp", "tls"])
def test_autograde_on_a_scheduler_and_a_worker_started_apart(released_course, tmp_path, protocol):
    """`python -m distributed.cli.dask_scheduler` and `... dask_worker` in processes of their
    own, started outside the repository with it on PYTHONPATH (as docs/instructors.md says; here the
    tests' folder too, for the stand-in harness), grade a class that autograde records here.
    Over TLS, the scheduler, the worker and autograde hold the files of the instructor's own
    CA (autograde through Dask's configuration), and a client without them is refused."""
    if protocol == "tls":
        pytest.importorskip("cryptography", reason="making TLS credentials needs cryptography")
    import dask
    from support.autograde_fakes import fake_grade, marks

    from instructor import autograde as pipeline
    from instructor.course import Course

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    for student, fails in (("ann", {}), ("bob", {"lookup-matches-indexing": "off-by-one"})):
        dest = course.submitted / student / LESSON
        shutil.copytree(course.release / LESSON, dest)
        module = dest / "exercises" / "embeddings.py"
        module.write_text(module.read_text() + marks(fails))
    elsewhere = tmp_path / "cluster"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    port = _free_port()
    address = f"{protocol}://127.0.0.1:{port}"
    tls: list[str] = []
    config: dict[str, object] = {}
    if protocol == "tls":
        files = _credentials(elsewhere)
        tls = ["--tls-ca-file", files["ca"], "--tls-cert", files["cert"], "--tls-key", files["key"]]
        config = {
            "distributed.comm.require-encryption": True,
            "distributed.comm.tls.ca-file": files["ca"],
            "distributed.comm.tls.client.cert": files["cert"],
            "distributed.comm.tls.client.key": files["key"],
        }
    processes = []
    try:
        processes.append(
            _dask(
                "distributed.cli.dask_scheduler",
                *("--host", "127.0.0.1", "--port", str(port), "--protocol", protocol),
                "--no-dashboard",
                *tls,
                env=env,
                cwd=elsewhere,
                log=tmp_path / "scheduler.log",
            )
        )
        processes.append(
            _dask(
                "distributed.cli.dask_worker",
                address,
                *("--nworkers", "1", "--nthreads", "1", "--no-dashboard"),
                *tls,
                env=env,
                cwd=elsewhere,
                log=tmp_path / "worker.log",
            )
        )
        with dask.config.set(config):
            _wait_for_a_worker(address, tmp_path / "worker.log")
            outcomes = {
                o.student: o
                for o in pipeline.autograde(
                    course, [LESSON], scheduler=address, grader=fake_grade, progress=False
                )
            }
        assert all(o.recorded and o.graded for o in outcomes.values()), [
            o.notes for o in outcomes.values()
        ]
        assert outcomes["ann"].points == outcomes["ann"].max_points > outcomes["bob"].points
        if protocol == "tls":
            from distributed.security import Security

            with pytest.raises((OSError, TimeoutError, TypeError)):
                with _client(address, timeout=3, security=Security(require_encryption=True)):
                    pass
    finally:
        for process in processes:
            os.killpg(process.pid, 15)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
