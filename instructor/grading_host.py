"""A warm grading host: one process that imports torch, pytest and the graders once, and forks
the checker of each submission from there.

A cold ``python -m graders LESSON --target ... --hidden --sandbox`` spends seconds of CPU
importing torch before it grades anything, and autograde runs one per submission. A process
that grades (the autograde process, whose local Dask workers are threads, or a worker process
of an external Dask cluster) starts one host instead, ``python -m instructor.grading_host``,
the first time it grades; the host imports what every checker imports (:data:`WARM`: never a
student's package: the host has none) and then only forks. Each child is what that command would
have been: a session of its own, its own argv, environment and working directory, standard input
from /dev/null, standard output and error on the caller's pipe, every other descriptor of the
host closed, the atexit handlers at its end and the exit status the caller reads (a signal's as
negative, as ``Popen`` gives it); it asks to die with the host. The submission's code runs in
neither: the child is the checker, which starts the sandboxed worker that runs it, exactly as the
cold command does.

The conversation. The caller holds one end of a datagram socket pair (the host's control); a
request is one datagram, the JSON ``{"argv", "env", "cwd"}``, carrying two descriptors: the
caller's end of a fresh stream socket pair for the replies, and the write end of the pipe the
child's output goes to. The host answers on that socket one line ``{"pid": N}`` once the child
runs (the caller stops it by its process group at its time limit) and one line
``{"status": S}`` when it has ended. The host ends, and kills what still runs, when its standard
input (a pipe from the caller's process) reaches its end: the process that started it is gone
or closed it.

Where fork or Unix sockets are missing, where the host cannot start or stops answering before
a child runs, :meth:`GradingHost.run` returns None and the caller runs the cold command
(instructor/grading.py).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import IO, NoReturn

from core.cli import die_with_parent, no_fork_here
from core.manifest import ROOT
from graders.seed import SEED_VARIABLE

# What every checker imports before it grades, imported once by the host: torch (seconds),
# pytest, the harness, and the secret half's oracles and dependencies where they are installed.
WARM = (
    "torch",
    "pytest",
    "rich.console",
    "graders.__main__",
    "graders.runner",
    "graders.client",
    "graders.plugin",
    "graders.answers",
    "graders.terminal",
    "graders.graph",
    "graders.secret.oracles",
    "graders.secret.dependencies",
)
START_TIMEOUT = 300.0  # seconds for a new host to import WARM and fork a first child
REPLY_TIMEOUT = 60.0  # seconds for the status once the child's output has ended
MAX_REQUEST = 1 << 20  # bytes of one request (its environment, mostly)
# Variables of a request that are the child's alone: the secret seed never reaches the host's
# environment, and pytest's name of the test running (which nothing reads on import) changes
# with every test of the project's suite, not what a host has imported.
PER_CHILD = (SEED_VARIABLE, "PYTEST_CURRENT_TEST")


# -- the host's side ---------------------------------------------------------------------------


def warm_up(modules: Sequence[str]) -> None:
    """Import ``modules`` (a module the tree lacks, the secret half in a release, is left to
    the child, which reports it as the cold command would)."""
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def serve(control: socket.socket) -> None:
    """Fork a checker per request on ``control`` until standard input ends."""
    children: dict[int, socket.socket] = {}  # pid -> the caller's reply socket
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "stdin")
    selector.register(control, selectors.EVENT_READ, "control")
    try:
        while True:
            for key, _ in selector.select(0.1 if children else None):
                if key.data == "stdin":
                    if not os.read(0, 1 << 10):
                        return  # the caller's process is gone, or closed the pipe
                else:
                    _accept(control, children)
            _reap(children)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _accept(control: socket.socket, children: dict[int, socket.socket]) -> None:
    try:
        message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 2)
    except OSError:
        return
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return
    reply, output = socket.socket(fileno=fds[0]), fds[1]
    try:
        request = json.loads(message)
        argv, env, cwd = list(request["argv"]), dict(request["env"]), str(request["cwd"])
    except (ValueError, KeyError, TypeError):
        os.close(output)
        reply.close()
        return
    try:
        pid = os.fork()
    except OSError:  # no process to be had now: the caller runs the cold command
        os.close(output)
        with contextlib.suppress(OSError):
            reply.sendall(b'{"pid": null}\n')
        reply.close()
        return
    if pid == 0:
        _child(argv, env, cwd, output)
    os.close(output)
    try:
        reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass  # the caller went away; the child's status will find no one either
    children[pid] = reply


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = children.pop(pid, None)
        if reply is None:
            continue
        with contextlib.suppress(OSError):
            line = json.dumps({"status": os.waitstatus_to_exitcode(status)})
            reply.sendall(line.encode() + b"\n")
        reply.close()


def _child(argv: list[str], env: dict[str, str], cwd: str, output: int) -> NoReturn:
    """Become ``python -m graders ARGV`` (see the module docstring) and exit with its status."""
    status = 1
    try:
        os.setsid()
        die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.closerange(3, _max_fd())  # the host's sockets and pipes are none of the checker's
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # found again from this environment's TMPDIR
        from graders import __main__ as command

        sys.argv = [command.__file__, *argv]
        status = command.main(argv)
    except SystemExit as exit:
        status = _exit_status(exit.code)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a process
        traceback.print_exc()
        status = 1
    finally:
        try:
            atexit._run_exitfuncs()  # the kept workers end, as at a cold process's end
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        finally:
            os._exit(status if isinstance(status, int) else 1)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as Python reports it
    return 1


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        return 1 << 16


def main(argv: list[str] | None = None) -> int:
    """``python -m instructor.grading_host FD MODULE...``: FD is the host's end of the control
    socket, the modules what it imports before it forks."""
    args = sys.argv[1:] if argv is None else argv
    control = socket.socket(fileno=int(args[0]))
    warm_up(args[1:])
    serve(control)
    return 0


# -- the caller's side -------------------------------------------------------------------------


class GradingHost:
    """A caller's host process, started on first use and again if it has died (it dies with
    the thread that started it: the threads engine's threads end with each autograde)."""

    def __init__(self, warm: Sequence[str] = WARM) -> None:
        self.warm = list(warm)  # what the host imports (the project's tests import less)
        self._lock = threading.Lock()
        self._popen: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._env: dict[str, str] = {}  # the host's environment

    def _running_host(self, env: dict[str, str]) -> socket.socket:
        """The control socket of a host that runs in ``env`` (started now if none does); the
        lock held. What reads the environment when it is imported (torch, tempfile's folder)
        read the one a cold command would have: a request in another starts another host."""
        if (
            self._popen is not None
            and self._popen.poll() is None
            and self._control is not None
            and self._env == env
        ):
            return self._control
        self._end()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "instructor.grading_host",
                    str(theirs.fileno()),
                    *self.warm,
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                # It dies with the thread that started it, as a cold grading run does, and its
                # children die with it: a killed autograde leaves no checker running.
                preexec_fn=die_with_parent,
            )
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        self._control, self._env = mine, env
        return mine

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        timeout: float,
        *,
        started: Callable[[int], None] = lambda pid: None,
        ended: Callable[[int], None] = lambda pid: None,
    ) -> tuple[int | None, bytes] | None:
        """``python -m graders ARGV`` forked by the host: its exit status (None when stopped
        at ``timeout``) and its output, as the cold command gives them; None when the host
        could not run it (the caller runs the cold command). ``started`` and ``ended`` are
        told the child's process group while it runs (what an interrupted autograde stops)."""
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
        base = {k: v for k, v in env.items() if k not in PER_CHILD}
        reading, writing = os.pipe()
        ours, theirs = socket.socketpair()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._running_host(base), [request], [theirs.fileno(), writing])
                except OSError:  # a host that died since it last answered: a new one
                    self._end()
                    socket.send_fds(self._running_host(base), [request], [theirs.fileno(), writing])
        except OSError:
            os.close(reading)
            ours.close()
            return None
        finally:
            os.close(writing)
            theirs.close()
        try:
            with ours, ours.makefile("rb") as replies:
                ours.settimeout(START_TIMEOUT)
                answered, pid = _field(replies, "pid")
                if pid is None:
                    if not answered:
                        # The host died, never started or is too slow: it ends (a child it
                        # forks late dies with it), and nothing of this submission ran.
                        self.close()
                    return None
                started(pid)
                try:
                    out, stopped = _read_until(reading, time.monotonic() + timeout, pid)
                    ours.settimeout(REPLY_TIMEOUT)
                    status = _field(replies, "status")[1]
                finally:
                    ended(pid)
        finally:
            os.close(reading)
        if stopped:
            return None, out
        # No status: the host died under it, and the child with it (PDEATHSIG).
        return (status if status is not None else -signal.SIGKILL), out

    def _end(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._popen is not None:
            popen, self._popen = self._popen, None
            if popen.stdin is not None:
                with contextlib.suppress(OSError):
                    popen.stdin.close()  # the host ends at the end of its input
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()

    @property
    def pid(self) -> int | None:
        """The host process's id (None before the first ``run``)."""
        with self._lock:
            return None if self._popen is None else self._popen.pid

    def running(self) -> bool:
        """Whether a host process runs now (one starts with the next ``run`` otherwise)."""
        with self._lock:
            return self._popen is not None and self._popen.poll() is None

    def close(self) -> None:
        """End the host (and whatever it still runs)."""
        with self._lock:
            self._end()


def _field(replies: IO[bytes], name: str) -> tuple[bool, int | None]:
    """Whether the host answered (False: it went away, or said nothing in time), and the next
    reply line's ``name`` (None where it said none: it could not fork)."""
    try:
        value = json.loads(replies.readline())[name]
    except (OSError, ValueError, KeyError, TypeError):
        return False, None
    return True, value if isinstance(value, int) else None


def _read_until(fd: int, deadline: float, pid: int) -> tuple[bytes, bool]:
    """The child's output (the pipe ``fd``) to its end; at ``deadline`` its process group is
    stopped and the rest read (for REPLY_TIMEOUT seconds at most). Returns the output and
    whether it was stopped."""
    chunks: list[bytes] = []
    stopped = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if stopped:
                    return b"".join(chunks), stopped  # something else holds the pipe open
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)  # the checker and what it started
                stopped, deadline = True, time.monotonic() + REPLY_TIMEOUT
                continue
            if not selector.select(remaining):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks), stopped
            chunks.append(chunk)


@functools.cache
def shared_host() -> GradingHost | None:
    """This process's one host (ended at its exit); None where fork or Unix sockets are
    missing."""
    if no_fork_here("grading") is not None:
        return None
    host = GradingHost()
    atexit.register(host.close)
    return host


if __name__ == "__main__":
    sys.exit(main())
