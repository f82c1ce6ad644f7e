"""Commands in the tests, started from a warm template process instead of a cold interpreter.

A test that runs ``python -m graders ...`` pays for ``import torch`` (about 3 CPU-seconds)
every time. :func:`run` takes the arguments after the interpreter, as :func:`subprocess.run`
does, and hands them to one template process per test worker (started on first use, ended with
the worker) that has imported torch, matplotlib, nbformat and the project's own packages once;
the template forks a child per command (:func:`popen` starts one that runs beside the test: a
watch the test edits files under, then stops with SIGINT). The child gets what a fresh
interpreter would have: its own environment, working directory, ``sys.argv``, ``sys.path``,
standard streams (the caller's pipe ends, passed over a Unix socket), exit status
(``SystemExit``'s code, 1 with the traceback for an uncaught exception, ``-N`` for signal N),
default signal handlers, no atexit or logging handlers of the template's, and fresh random
seeds.

What a fork cannot give, it does not pretend to: a command whose ``sys.path`` (its working
directory or script folder, and ``PYTHONPATH``) finds a project package in another copy of the
project (a release folder, a fresh clone, a student's target with its own ``gpt/``), that sets an
interpreter option, that changes a ``PYTHON*`` variable, or that changes a variable a project
module reads when imported (:data:`READ_AT_IMPORT`), starts cold, by :func:`subprocess.run`,
automatically. The template never imports a student's package (exercises/, solutions/).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# The project's packages: the template imports them, and a command that would find one of them
# in another folder starts cold (it must run that copy).
PROJECT_PACKAGES = ("core", "gpt", "graders", "instructor", "live", "tools")
# What the template imports once, so that no command pays for it: torch and what the grading,
# training and compare commands import on every run.
WARM_IMPORTS = (
    "torch",
    "torch._dynamo",  # an optimizer imports it: compare and train make one
    "matplotlib",
    "matplotlib.pyplot",
    "numpy",
    "nbformat",
    "filelock",
    "core",
    "core.manifest",
    "gpt",
    "gpt.model",
    # not gpt.train, gpt.compare, gpt.generate: commands run them as __main__ (runpy warns
    # where the module is imported already, and a fresh interpreter has not imported it)
    "gpt.checkpoint",
    "gpt.corpus",
    "gpt.tokenizer",
    "graders",
    "graders.runner",  # not graders.client: graders.__main__ starts its worker early without it
    "instructor",
    "live",
)
# Environment variables a module above reads when it is imported: a command that sets one to
# another value than the template had starts cold. tests/support/test_forkserver.py finds every
# module-level read in the project's packages and fails if one is missing here.
# OMP_NUM_THREADS is not among them: the child sets torch's thread count from its own.
READ_AT_IMPORT = ("MPLBACKEND", "TORCH_LOGS", "TORCHDYNAMO_DISABLE")
# Python variables that only change how the interpreter starts or imports (PYTHONPATH is honoured
# by rebuilding sys.path in the child; the rest would need a fresh interpreter).
# The tests that keep a cold start of each command the tests fork, and why: what a fresh
# interpreter does before the command's main (imports, usage errors before torch loads, signals
# from the caller) is checked there once. tests/support/test_forkserver.py checks they exist.
COLD_STARTS = {
    "graders": (
        "tests/graders/test_graders.py::test_cli_bad_usage_is_one_line_and_nonzero",
        "usage errors come before torch loads",
    ),
    "gpt.train": (
        "tests/gpt/test_training.py::test_ctrl_c_stops_with_one_line_and_a_checkpoint_then_resumes",
        "SIGINT from the caller to the process it started",
    ),
    "gpt.compare": (
        "tests/gpt/test_compare.py::test_untouched_exercises_fall_back_and_claim_nothing",
        "a whole compare from a fresh interpreter (torch._dynamo imported by the optimizer)",
    ),
    "gpt.generate": (
        "tests/gpt/test_generate.py::test_progress_lines_when_standard_error_is_not_a_terminal",
        "generation from a fresh interpreter",
    ),
    "instructor": (
        "tests/instructor/test_release.py::test_a_lesson_released_later_keeps_the_courses_site",
        "a release from a fresh interpreter",
    ),
    "bench/train_throughput.py": (
        "tests/bench/test_train_throughput.py::test_bad_arguments_are_one_line_before_anything_runs",
        "its usage errors come before torch loads",
    ),
    "torch.distributed.run": (
        "tests/gpt/test_distributed.py::test_two_processes_give_the_losses_of_one",
        "torchrun -m gpt.train: every process a fresh interpreter, not forked (--run-path)",
    ),
}
# Set (to anything) in the test run's environment, every command starts cold: the suite as it was
# before the fork server, to compare its cost or to rule the server out of a failure.
COLD_SWITCH = "COURSE_TESTS_COLD"
HONOURED_PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    stdin: Any = None,  # as subprocess: a file descriptor, a file, PIPE/DEVNULL or None
    stdout: Any = None,
    stderr: Any = None,
    capture_output: bool = False,
    text: bool = False,
    timeout: float | None = None,
    check: bool = False,
    cold: bool = False,
) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, *args], ...)``, forked from the warm template when it
    can be (see the module's docstring), cold otherwise; the same result either way. ``cold``
    starts it cold regardless: the tests in :data:`COLD_STARTS` keep one cold start a command."""
    if capture_output:
        if stdout is not None or stderr is not None:
            raise ValueError("capture_output takes no stdout or stderr: drop one of them")
        stdout = stderr = subprocess.PIPE
    if input is not None and stdin is not None:
        raise ValueError("input takes no stdin: drop one of them")
    argv, workdir, environment, why = _command(args, cwd, env, cold)
    if why is not None:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=workdir,
            env=environment,
            input=input,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            timeout=timeout,
            check=check,
        )
    done = _server().call(argv, workdir, environment, input, stdin, stdout, stderr, text, timeout)
    if check and done.returncode:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done


def popen(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
) -> Forked | subprocess.Popen:
    """``subprocess.Popen([sys.executable, *args], ...)`` for a command that runs beside the
    test (polled, signalled, waited for), forked from the warm template where :func:`run` would
    fork it, cold otherwise. Its streams are files or descriptors, DEVNULL or STDOUT, not PIPE.
    It holds the template until it has ended and been waited for (``poll`` or ``wait``)."""
    if subprocess.PIPE in (stdin, stdout, stderr):
        raise ValueError("popen takes no PIPE: give a file (or use run)")
    argv, workdir, environment, why = _command(args, cwd, env, cold=False)
    streams = {"stdin": stdin, "stdout": stdout, "stderr": stderr}
    if why is not None:
        return subprocess.Popen([sys.executable, *argv], cwd=workdir, env=environment, **streams)
    return _server().start(argv, workdir, environment, stdin, stdout, stderr)


def _command(
    args: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    cold: bool,
) -> tuple[list[str], str, dict[str, str], str | None]:
    """The command's arguments, working directory and environment as the child gets them, and
    why it starts cold (None: it forks)."""
    argv = [os.fspath(a) for a in args]
    workdir = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    environment = dict(os.environ if env is None else env)
    why = "asked" if cold else "COURSE_TESTS_COLD is set" if os.environ.get(COLD_SWITCH) else None
    return argv, workdir, environment, why or cold_reason(argv, workdir, environment)


def cold_reason(argv: list[str], cwd: str, env: Mapping[str, str]) -> str | None:
    """Why this command must start in a fresh interpreter, or None if a fork runs it as one
    would."""
    if not argv or argv[0] not in ("-m", "-c") and argv[0].startswith("-"):
        return f"interpreter option {argv[:1]}: only -m, -c and a script are forked"
    if argv[0] in ("-m", "-c") and len(argv) < 2:
        return f"{argv[0]} without its argument"
    template = _template_env()
    for name in sorted(set(env) | set(template)):
        if name.startswith("PYTHON") and name not in HONOURED_PYTHON_VARIABLES:
            if env.get(name) != template.get(name):
                return f"{name} differs from the template's"
    for name in READ_AT_IMPORT:
        if env.get(name) != template.get(name):
            return f"{name} (read when a module is imported) differs from the template's"
    for folder in _leading_path(argv, cwd, env):
        for package in PROJECT_PACKAGES:
            found = Path(folder) / package
            if (found / "__init__.py").is_file() or found.with_suffix(".py").is_file():
                if Path(folder).resolve() != ROOT:
                    return f"{found} is another copy of the project's {package}"
    return None


def _leading_path(argv: list[str], cwd: str, env: Mapping[str, str]) -> list[str]:
    """The folders a fresh interpreter puts first on sys.path: the working directory (``-m``,
    ``-c``) or the script's folder, then PYTHONPATH's entries."""
    if argv[0] in ("-m", "-c"):
        first = cwd
    else:
        first = os.path.dirname(os.path.join(cwd, argv[0]))
    extra = [os.path.join(cwd, p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [first, *extra]


# The environment the template is started with: the test worker's when the first command ran
# (after the session's fixtures set theirs), without PYTHONPATH and torch's thread variables
# (so that the template learns torch's own default thread count).
_TEMPLATE_ENV: list[dict[str, str]] = []
_NOT_INHERITED = ("PYTHONPATH", "PYTHONSAFEPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _template_env() -> dict[str, str]:
    if not _TEMPLATE_ENV:
        _TEMPLATE_ENV.append({k: v for k, v in os.environ.items() if k not in _NOT_INHERITED})
    return _TEMPLATE_ENV[0]


class _Client:
    """The test worker's end of the template: one command at a time."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        code = (
            f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"from support.forkserver import serve; serve({theirs.fileno()})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=_template_env(),
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.channel = ours
        self.lock = threading.Lock()
        ready = _read(self.channel)
        if ready != {"ready": True}:
            raise RuntimeError(f"the fork server did not start: {ready}")

    def call(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        input: str | bytes | None,
        stdin: int | None,
        stdout: int | None,
        stderr: int | None,
        text: bool,
        timeout: float | None,
    ) -> subprocess.CompletedProcess:
        with self.lock:
            return self._call(argv, cwd, env, input, stdin, stdout, stderr, text, timeout)

    def start(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        stdin: Any,
        stdout: Any,
        stderr: Any,
    ) -> Forked:
        """A command started, running beside the caller; the template is its until it ends."""
        self.lock.acquire()
        try:
            pid, _ = self._send(argv, cwd, env, None, (stdin, stdout, stderr))
        except BaseException:
            self.lock.release()
            raise
        return Forked(self, pid, [sys.executable, *argv])

    def _call(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        input: str | bytes | None,
        stdin: Any,
        stdout: Any,
        stderr: Any,
        text: bool,
        timeout: float | None,
    ) -> subprocess.CompletedProcess:
        pid, mine = self._send(argv, cwd, env, input, (stdin, stdout, stderr))
        deadline = None if timeout is None else time.monotonic() + timeout
        data = input.encode() if isinstance(input, str) else input
        writer = mine.pop(0) if input is not None else None
        outputs = _communicate(writer, data, mine, deadline)
        if outputs is None:
            _kill(pid)
            _read(self.channel)  # the server reaped it
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout)
        status = _read(self.channel)
        out = err = None
        streams = iter(outputs)
        if stdout == subprocess.PIPE:
            out = next(streams)
        if stderr == subprocess.PIPE:
            err = next(streams)
        if text:
            out = None if out is None else _decode(out)
            err = None if err is None else _decode(err)
        return subprocess.CompletedProcess([sys.executable, *argv], status["returncode"], out, err)

    def _send(
        self, argv: list[str], cwd: str, env: dict[str, str], input: Any, streams: tuple
    ) -> tuple[int, list[int]]:
        """Ask the template for the command (``streams``: its stdin, stdout and stderr, as
        subprocess takes them): the child's pid, and this side's ends of the pipes made for it
        (the input's first)."""
        stdin, stdout, stderr = streams
        mine: list[int] = []  # the ends this process reads or writes
        theirs: list[int] = []  # the child's ends of the pipes made here, closed once sent
        fds: list[int] = []

        def pipe(reading: bool) -> int:
            r, w = os.pipe()
            mine.append(r if reading else w)
            theirs.append(w if reading else r)
            return w if reading else r

        devnull = os.open(os.devnull, os.O_RDWR)
        theirs.append(devnull)
        # standard input: the input's pipe, a given fd, or (as subprocess.run) this process's own
        if input is not None:
            fds.append(pipe(reading=False))
        elif stdin == subprocess.DEVNULL:
            fds.append(devnull)
        else:
            fds.append(0 if stdin is None else _fileno(stdin))
        for stream, own in ((stdout, 1), (stderr, 2)):
            if stream == subprocess.PIPE:
                fds.append(pipe(reading=True))
            elif stream == subprocess.DEVNULL:
                fds.append(devnull)
            elif stream == subprocess.STDOUT:
                fds.append(fds[1])
            else:
                fds.append(own if stream is None else _fileno(stream))
        request = {"argv": argv, "cwd": cwd, "env": env}
        _write(self.channel, request, fds)
        for fd in theirs:
            os.close(fd)
        return _read(self.channel)["pid"], mine

    def close(self) -> None:
        self.channel.close()  # the server's read ends: it exits
        try:
            self.process.wait(timeout=60)  # a hang guard only
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Forked:
    """A command :func:`popen` forked: what a test asks of ``subprocess.Popen`` (``pid``,
    ``returncode``, ``poll``, ``wait``, ``send_signal``, ``kill``); the template reports its exit
    status when it ends."""

    def __init__(self, client: _Client, pid: int, args: list[str]) -> None:
        self.client, self.pid, self.args = client, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._wait(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        import select

        if self.returncode is None and select.select([self.client.channel], [], [], timeout)[0]:
            self.returncode = _read(self.client.channel)["returncode"]
            self.client.lock.release()  # the template serves the next command
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not one the template has reaped (its pid may be another's)
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _fileno(stream: Any) -> int:
    """A file descriptor, or an open file's (as subprocess takes either)."""
    return stream if isinstance(stream, int) else stream.fileno()


def _decode(data: bytes) -> str:
    """As subprocess's text mode: the locale's encoding, universal newlines."""
    import io

    return io.TextIOWrapper(io.BytesIO(data)).read()


def _communicate(
    writer: int | None, data: bytes | None, readers: list[int], deadline: float | None
) -> list[bytes] | None:
    """Write ``data`` to ``writer`` and read every reader to its end; None past the deadline."""
    import selectors

    chunks: dict[int, list[bytes]] = {fd: [] for fd in readers}
    selector = selectors.DefaultSelector()
    for fd in readers:
        selector.register(fd, selectors.EVENT_READ)
    view = memoryview(data or b"")
    if writer is not None:
        if view:
            os.set_blocking(writer, False)
            selector.register(writer, selectors.EVENT_WRITE)
        else:
            os.close(writer)
    try:
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == writer:
                    try:
                        sent = os.write(fd, view[:65536])
                    except BrokenPipeError:
                        sent = len(view)
                    view = view[sent:]
                    if not view:
                        selector.unregister(fd)
                        os.close(fd)
                    continue
                chunk = os.read(fd, 65536)
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    selector.unregister(fd)
        return [b"".join(chunks[fd]) for fd in readers]
    finally:
        for fd in list(selector.get_map()):
            os.close(fd)
        for fd in readers:
            try:
                os.close(fd)
            except OSError:
                pass
        selector.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_CLIENT: list[_Client] = []


def _server() -> _Client:
    if not _CLIENT:
        _CLIENT.append(_Client())
    return _CLIENT[0]


def template_pids() -> frozenset[int]:
    """The process id of this worker's template, if started (its own CPU is the session's)."""
    return frozenset(c.process.pid for c in _CLIENT)


def stop() -> None:
    """End this worker's template, if it was started (the tests' conftest does, at the end)."""
    while _CLIENT:
        _CLIENT.pop().close()


# The wire: a 4-byte length, a JSON object, and the file descriptors it carries.


def _write(channel: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    body = json.dumps(message).encode()
    socket.send_fds(channel, [struct.pack("!I", len(body)) + body], list(fds))


def _read(channel: socket.socket, fds: int = 0) -> Any:
    head, received, _, _ = socket.recv_fds(channel, 4, max(fds, 1))
    if not head:
        return None
    while len(head) < 4:
        head += channel.recv(4 - len(head))
    (size,) = struct.unpack("!I", head)
    body = b""
    while len(body) < size:
        more = channel.recv(size - len(body))
        if not more:
            raise EOFError("the fork server's channel closed mid-message")
        body += more
    message = json.loads(body)
    if fds:
        return message, received
    for fd in received:
        os.close(fd)
    return message


# The template's side.


def serve(fd: int) -> None:
    """The template: import what commands need, then fork a child per request until the
    channel closes."""
    fresh_signals = {
        s: signal.getsignal(s)
        for s in signal.valid_signals()
        if s not in (signal.SIGKILL, signal.SIGSTOP)
    }
    base_path = [
        p for p in sys.path[1:] if p != str(TESTS)
    ]  # the interpreter's own, after '' and tests
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    import torch

    # torch's count with no variable set (reads OpenMP's settings; starts no thread): a child
    # whose environment sets none gets it back, as a fresh interpreter would
    default_threads = torch.get_num_threads()
    channel = socket.socket(fileno=fd)
    _write(channel, {"ready": True})
    while True:
        got = _read(channel, fds=3)
        if got is None:
            return
        request, streams = got
        pid = os.fork()
        if pid == 0:
            try:
                channel.close()
                code = _child(request, streams, fresh_signals, base_path, default_threads)
            except BaseException:  # noqa: BLE001 - whatever happened, the child never returns
                code = 1
            os._exit(code)
        for stream in streams:
            os.close(stream)
        _write(channel, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _write(channel, {"returncode": os.waitstatus_to_exitcode(status)})


def _child(
    request: dict[str, Any],
    streams: list[int],
    fresh_signals: dict,
    base_path: list[str],
    default_threads: int,
) -> int:
    """In the forked child: become the command's fresh interpreter, run it, and return its exit
    status."""
    import atexit
    import logging
    import random
    import runpy
    import traceback

    for handler, value in fresh_signals.items():
        try:
            signal.signal(handler, value)
        except (OSError, ValueError, TypeError):
            pass
    for target, fd in enumerate(streams):
        os.dup2(fd, target)
    for fd in set(streams):
        if fd > 2:
            os.close(fd)
    sys.stdin = open(0, closefd=False, encoding=None)  # noqa: SIM115 - the process's own stream
    unbuffered = bool(request["env"].get("PYTHONUNBUFFERED"))
    sys.stdout = open(1, "w", closefd=False, buffering=1 if unbuffered else -1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")  # noqa: SIM115
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    atexit._clear()  # the template's: a fresh interpreter has none
    logging.root.handlers.clear()
    logging.root.setLevel(logging.WARNING)
    random.seed()
    import numpy
    import torch

    numpy.random.seed()
    torch.seed()
    threads = request["env"].get("OMP_NUM_THREADS", "")
    torch.set_num_threads(
        int(threads) if threads.isdigit() and int(threads) > 0 else default_threads
    )
    argv = request["argv"]
    leading = _leading_path(argv, request["cwd"], request["env"])
    sys.path[:] = [*leading, *base_path]
    code = 0
    try:
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]  # runpy sets argv[0] to the module's file
                # as in a fresh interpreter, the module run as __main__ is not also the one
                # imported by name (and runpy warns where it is already imported)
                sys.modules.pop(argv[1], None)
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[0] = ""
                exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
            else:
                sys.argv = list(argv)
                runpy.run_path(argv[0], run_name="__main__")
        finally:
            for thread in threading.enumerate():  # as the interpreter's shutdown does
                if thread is not threading.main_thread() and not thread.daemon:
                    thread.join()
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException as error:  # noqa: BLE001 - as the interpreter: print it, exit 1
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
            trace = trace.tb_next  # the frames of this module and runpy: not the command's
        traceback.print_exception(type(error), error, trace)
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _exit_code(code: object) -> int:
    """What the interpreter exits with for ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
