"""The checker's side of the grading worker: start it, talk to it, restart it when it fails.

The worker starts once per grading run (Python and torch cost seconds; a finished run's worker
waits for the next run of the same process instead, see graders/pool.py) and never
runs the student's code itself: it forks a fresh lesson process for every lesson
(milliseconds), so that nothing one lesson's code does to its process (patching torch, say)
reaches another lesson's checks. A call that times out, crashes its lesson process
(``os._exit``, a segfault), prints too much or sends back something unreadable fails that one
check: the worker ends that lesson process with its whole process group and forks a fresh one
for the next call (a worker that died itself is replaced by a new one). A student's exception
(``sys.exit`` included) is just an answer; the lesson process goes on.

While a call runs, the worker may ask questions: the proxies of the graded function's
dependencies (graders/worker/proxies.py) send their inputs, and graders/secret/dependencies.py
answers them here, for that function's dependencies only.

Isolation without a sandbox. The worker runs in its own session and process group with
``python -I`` (no PYTHON* variables, no user site, no script directory on ``sys.path``), in an
empty temporary working directory, with a small environment, standard input from /dev/null and
its output drained and capped by the checker. Before any student code it sets RLIMIT_AS (4 GiB
by default), RLIMIT_CPU, RLIMIT_FSIZE and RLIMIT_CORE=0 (RLIMIT_NPROC too when not root),
asks to die with its parent, turns off dumpability and new privileges, and drops every
capability (so a worker started as root cannot raise its limits again). Whatever it returns
is read as a pickle that may name no class or function (``decode`` in
graders/worker/protocol.py) and validated in the checker; the tensors a call is given live in
memory the checker maps itself (graders/shared.py), so it sees what the call did to them.

The checker bounds itself as well. It reads an answer only if its pickled structure has at
most MAX_OPERATIONS operations (graders/worker/protocol.py), and keeps it only if it has at most
MAX_PARTS parts and MAX_TEXT characters, every shared part counted each time it is reached,
so comparing and describing it costs what its size says; a proxy's question gets no more
time than the call that asks it; and while it grades, the checker's data segment may grow at most
CHECKER_MEMORY (4 GiB) past where it started (``checker_memory``, on Linux).

What that does not stop: the worker runs as the same user as the checker, so the student's
code can read any file that user can (the hidden graders, if they are on disk), write files
the user owns (the grader tree itself, affecting later runs, though not the run in progress:
its tests and oracles are imported before any student code runs, and the worker's source is
read once),
signal or kill the checker, use the network, and fork up to the limits (not at all limited
for root). ``--sandbox`` (graders/sandbox.py) is where those are closed.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .checking import CheckFailed, GraderUnavailable, describe
from .hints import (
    CRASHED,
    EXITED,
    IN_PLACE,
    NOT_IMPLEMENTED,
    NOT_PLAIN,
    OUT_OF_MEMORY,
    TIMED_OUT,
    TOO_MUCH_OUTPUT,
)
from .launch import Launched, bundle, command
from .pool import WorkerPool, default_pool, keeps_idle_workers
from .sandbox import refresh_copy
from .shared import SharedTensors
from .worker import limits, protocol
from .worker.framing import FRAME
from .worker.scenarios import OPTIMIZING_SCENARIOS

DEFAULT_MEMORY = limits.MEMORY  # bytes of address space for the worker
MAX_OUTPUT = 8 << 20  # bytes the student's code may print during one call
MAX_ANSWER = 256 << 20  # bytes of one answer
# An answer as the checker reads it, every shared part counted each time it is reached.
MAX_PARTS = 1 << 21
MAX_TEXT = 64 << 20  # characters and bytes of its strings, together
MAX_DEPTH = 64
# The checker's own memory: while it grades, its data (heap and private mappings) may grow
# this much past what it was at the start (RLIMIT_DATA; see checker_memory).
CHECKER_MEMORY = 4 << 30
STARTUP_TIMEOUT = 180.0
TAIL = 4096
__all__ = ["IN_PLACE", "StudentError", "WorkerClient", "WorkerUnavailable"]


class WorkerUnavailable(GraderUnavailable):
    """The worker could not be started at all: the grading run cannot go on."""


class StudentError(Exception):
    """The student's code raised; ``builtins`` lists the built-in exception classes it is."""

    def __init__(self, info: dict, function: str, during: str = "call") -> None:
        self.type_name = str(info.get("type", "?"))
        self.builtins = [str(b) for b in info.get("builtins", [])]
        self.message = str(info.get("message", ""))
        self.where = info.get("where")
        self.function = function
        self.during = during
        super().__init__(self.detail)

    def is_a(self, name: str) -> bool:
        return name in self.builtins

    @property
    def detail(self) -> str:
        doing = "importing the module" if self.during == "import" else self.function
        where = f" ({self.where})" if isinstance(self.where, str) else ""
        message = f": {self.message}" if self.message else ""
        return f"{doing} raised {self.type_name}{message}{where}"

    @property
    def hint(self) -> str | None:
        """A harness-level hint when the exception itself says what went wrong."""
        if self.is_a("NotImplementedError"):
            return NOT_IMPLEMENTED
        if self.is_a("SystemExit"):
            return EXITED
        if self.is_a("MemoryError") or "can't allocate memory" in self.message:
            return OUT_OF_MEMORY.format(gib=DEFAULT_MEMORY / (1 << 30))
        if "in-place operation" in self.message or "inplace operation" in self.message:
            return IN_PLACE  # autograd's refusal of a change in place (a leaf, a saved tensor)
        return None


def _failed(detail: str, hint: str) -> CheckFailed:
    return CheckFailed(detail, hint=hint)


class _Process:
    """One worker: the process that forks lessons, the current lesson's socket, the buffers.

    The worker (graders/worker/serving.py, ``serve_lessons``) listens on a control socket; every
    ``fork`` gives a fresh lesson process and its own socket, passed back over the control
    socket. Requests and answers travel on the lesson's socket; the student's prints on the
    worker's standard error.
    """

    def __init__(self, launched: Launched) -> None:
        self.launched = launched
        self.control = launched.control
        self.popen = launched.popen
        assert self.popen.stderr is not None  # stderr=PIPE
        self.stderr = self.popen.stderr
        os.set_blocking(self.stderr.fileno(), False)
        self.channel = self.control  # until the first fork: the worker's greeting comes here
        self.target: str | None = None  # the target a fork names (None: the worker's own)
        self.dynamo = False  # whether forks ask the worker to import torch._dynamo first
        self.greeted = False
        self.ready = False
        self.alive = True
        self.lesson_used = False  # whether the current lesson process has run student code
        self.imported: set[str] = set()  # the student's modules the lesson process imported
        self.tail = bytearray()
        self.buffer = bytearray()
        self.pending = launched.pending  # what of the bundle the socket did not take at once

    def running(self) -> bool:
        """Whether the worker still lives (its lesson process may not)."""
        return self.alive and self.popen.poll() is None

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            if self.channel is not self.control:
                with suppress(OSError):
                    self.channel.close()
            self.launched.kill()

    def await_ready(self, timeout: float) -> None:
        """Wait for the worker's greeting (once), then for its first lesson process."""
        if self.ready:
            return
        try:
            if not self.greeted:
                answer = self.exchange(b"", timeout, what="starting the worker")
                if not isinstance(answer, dict) or answer.get("ok") is not True:
                    self.kill()
                    raise WorkerUnavailable("the grading worker sent a malformed greeting")
                self.greeted = True
            self.fork(timeout)
        except CheckFailed as failure:
            raise WorkerUnavailable(
                f"the grading worker did not start: {failure.detail}; its output:\n"
                + self.tail.decode("utf-8", "replace")
            ) from None
        self.ready = True

    def fork(self, timeout: float) -> None:
        """A fresh lesson process (the worker ends the previous one) and its socket."""
        self._leave_lesson()
        fork: dict[str, Any] = {"op": "fork"}
        if self.target is not None:
            fork["target"] = self.target
        if self.dynamo:
            fork["dynamo"] = True
        request = protocol.encode(fork)
        try:
            self.control.setblocking(True)
            self.control.settimeout(timeout)
            self.control.sendall(FRAME.pack(len(request)) + request)
            _, fds, _, _ = socket.recv_fds(self.control, 1, 1)
        except OSError:  # socket.timeout included
            raise self._died("forking a lesson process") from None
        finally:
            if self.alive:
                self.control.setblocking(False)
        if len(fds) != 1:
            raise self._died("forking a lesson process")
        self.channel = socket.socket(fileno=fds[0])
        self.channel.setblocking(False)
        self.lesson_used = False
        self.imported.clear()
        answer = self.exchange(b"", timeout, what="starting a lesson process")
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            self.kill()
            raise _failed("the lesson process sent a malformed greeting", NOT_PLAIN)
        self._forget_output()

    def _leave_lesson(self) -> None:
        """Back to the control channel: the lesson's socket and what was in flight on it go."""
        if self.channel is not self.control:
            self.channel.close()
        self.channel = self.control
        self.buffer.clear()
        self.pending.clear()
        self.ready = False

    def _forget_output(self) -> None:
        """What an ended lesson process printed last is no one's now."""
        while _read(self.stderr):
            pass
        self.tail.clear()

    def _lesson_status(self) -> int | None:
        """The ended lesson process's exit code, from the worker (None if it cannot say)."""
        answer = self._control({"op": "status"})
        status = answer.get("status") if isinstance(answer, dict) else None
        return status if isinstance(status, int) else None

    def _control(self, message: dict, timeout: float = 5.0) -> Any:
        """One request to the worker itself on the control channel, and its answer (None if
        it cannot answer). Only the worker, which never runs student code, writes there."""
        request = protocol.encode(message)
        data = b""
        try:
            self.control.setblocking(True)
            self.control.settimeout(timeout)
            self.control.sendall(FRAME.pack(len(request)) + request)
            while (
                len(data) < FRAME.size
                or len(data) < FRAME.size + (FRAME.unpack(data[: FRAME.size])[0])
            ):
                chunk = self.control.recv(1 << 16)
                if not chunk:
                    return None
                data += chunk
            return protocol.decode(data[FRAME.size :])
        except Exception:  # noqa: BLE001 - a worker that cannot answer
            return None
        finally:
            if self.alive:
                self.control.setblocking(False)

    def retire(self) -> bool:
        """End the lesson process and all it started; the worker empties its working
        directory, so that it is as a new one after its greeting; False (and killed) if it
        cannot."""
        if not self.alive or not self.greeted or self.popen.poll() is not None:
            self.kill()
            return False
        self._leave_lesson()
        answer = self._control({"op": "end"})
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            self.kill()
            return False
        self._forget_output()
        return True

    def _note_output(self, chunk: bytes) -> None:
        self.tail += chunk
        del self.tail[:-TAIL]

    def exchange(
        self,
        payload: bytes,
        timeout: float,
        *,
        what: str,
        limit: float | None = None,
        fds: tuple[int, ...] = (),
    ) -> Any:
        """Send one frame (if any, with ``fds`` on its first byte), read one answer frame,
        within ``timeout`` seconds.

        Any failure kills the process and raises CheckFailed with the harness's hint, which
        names ``limit`` (the check's own limit, where ``timeout`` is what was left of it).
        """
        limit = timeout if limit is None else limit
        channel = self.channel
        if payload:
            self.pending += FRAME.pack(len(payload)) + payload
        if not self.pending:  # a frame that came with the one before it
            answer = self._take_frame(what)
            if answer is not None:
                return answer
        deadline = time.monotonic() + timeout
        printed = 0
        selector = selectors.DefaultSelector()
        selector.register(self.stderr, selectors.EVENT_READ, "output")
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.pending else 0)
        selector.register(channel, events, "channel")
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._fail(
                        f"{what} did not finish within {limit:g} s",
                        TIMED_OUT.format(seconds=limit),
                    )
                for key, mask in selector.select(min(remaining, 0.5)):
                    if key.data == "output":
                        chunk = _read(self.stderr)
                        if chunk is None:
                            continue
                        if not chunk:
                            selector.unregister(self.stderr)
                            continue
                        printed += len(chunk)
                        self._note_output(chunk)
                        if printed > MAX_OUTPUT:
                            raise self._fail(
                                f"{what} printed more than {MAX_OUTPUT >> 20} MiB",
                                TOO_MUCH_OUTPUT.format(mib=MAX_OUTPUT / (1 << 20)),
                            )
                        continue
                    if mask & selectors.EVENT_WRITE and self.pending:
                        try:
                            if fds:  # with the frame's first byte, once
                                sent = socket.send_fds(channel, [self.pending[: 1 << 20]], fds)
                                fds = ()
                            else:
                                sent = channel.send(self.pending[: 1 << 20])
                        except BlockingIOError:
                            sent = 0
                        except OSError:  # BrokenPipeError: it is gone
                            raise self._died(what) from None
                        del self.pending[:sent]
                        if not self.pending:
                            selector.modify(channel, selectors.EVENT_READ, "channel")
                    if mask & selectors.EVENT_READ:
                        try:
                            chunk = channel.recv(1 << 20)
                        except BlockingIOError:
                            continue
                        except OSError:
                            chunk = b""
                        if not chunk:
                            raise self._died(what)
                        self.buffer += chunk
                        answer = self._take_frame(what)
                        if answer is not None:
                            return answer
        finally:
            selector.close()

    def _take_frame(self, what: str) -> Any:
        size = FRAME.size
        if len(self.buffer) < size:
            return None
        length = FRAME.unpack(self.buffer[:size])[0]
        if length > MAX_ANSWER:
            raise self._fail(f"{what} sent back more than {MAX_ANSWER >> 20} MiB", NOT_PLAIN)
        if len(self.buffer) < size + length:
            return None
        frame = bytes(self.buffer[size : size + length])
        del self.buffer[: size + length]
        if protocol.too_many_operations(frame):
            raise self._fail(f"{what} sent back a structure too large to read", NOT_PLAIN)
        try:
            return protocol.decode(frame)
        except Exception:  # noqa: BLE001 - the student may have written to the channel
            raise self._fail(f"{what}: the worker's answer was unreadable", NOT_PLAIN) from None

    def _fail(self, detail: str, hint: str) -> CheckFailed:
        self.drop_lesson()
        return _failed(detail, hint)

    def drop_lesson(self) -> None:
        """After a lesson process failed (it timed out, crashed, flooded or sent garbage): it
        goes, and the worker, which never runs student code, forks the next one (it ends the
        failed one and all it started first). A worker that is itself in trouble is killed."""
        if self.channel is self.control or not self.alive or self.popen.poll() is not None:
            self.kill()
            return
        self._leave_lesson()

    def _died(self, what: str) -> CheckFailed:
        proc = self.popen
        code: int | None = None
        if self.channel is not self.control and proc.poll() is None:
            code = self._lesson_status()  # the worker lives: ask it how the lesson ended
        else:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        while chunk := _read(self.stderr):  # until nothing is left (b"") or none yet (None)
            self._note_output(chunk)
        if code is None:
            how = "it closed its channel"
        elif code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"it exited with status {code}: sys.exit or os._exit?"
        return self._fail(f"{what}: the worker died ({how})", CRASHED.format(how=how))


class WorkerClient:
    """The worker of one target package, with a fresh lesson process for every lesson; see
    the module docstring.

    After a failure that killed a worker (not only its lesson process), a spare one is kept
    warm, so that code which kills its worker again and again costs little more than that.
    ``pool`` holds the worker started early, the idle ones and the spare (graders/pool.py;
    default: the process-wide one).
    """

    def __init__(
        self,
        target: Path,
        *,
        sandbox: bool = False,
        memory: int = DEFAULT_MEMORY,
        startup_timeout: float = STARTUP_TIMEOUT,
        pool: WorkerPool | None = None,
    ) -> None:
        self.target = Path(target).resolve()
        self.pool = pool if pool is not None else default_pool()
        self.sandbox = sandbox
        self.memory = memory
        self.startup_timeout = startup_timeout
        # Read once, before any student code runs: rewriting the file later changes nothing.
        self._source = bundle()
        self._answers = _dependency_answers()
        self._proc: _Process | None = None
        self.starts = 0  # worker processes started
        self.failures = 0  # workers lost (a failed lesson process costs only a fork)
        self.broken: dict[str, Exception] = {}  # module -> why it cannot be imported

    def _spawn(self) -> _Process:
        """A kept worker that still lives (in the main thread), else the one started early
        for this grading, else a new one."""
        sandbox, memory = self.sandbox, self.memory
        launched = self.pool.take_early(self.target, sandbox=sandbox, memory=memory)
        proc = self.pool.take_idle(self.target, sandbox=sandbox, memory=memory, renew=self._renew)
        if proc is not None:
            assert isinstance(proc, _Process)  # the pool keeps what clients gave it
            if launched is not None:
                launched.kill()
            return proc
        self.starts += 1
        if launched is None:
            try:
                launched = Launched(self._command(), self._source)
            except OSError as error:
                raise WorkerUnavailable(f"cannot start the grading worker: {error}") from error
        proc = _Process(launched)
        if keeps_idle_workers() and not self.sandbox:
            proc.target = str(self.target)  # what the forks of a kept worker import
        return proc

    def _command(self) -> list[str]:
        return command(self.target, sandbox=self.sandbox, memory=self.memory)

    def _renew(self, proc: _Process) -> bool:
        """Ready a kept worker for this run: unsandboxed, its forks name this target;
        sandboxed, the copy it binds holds the target's files as they are now."""
        if not self.sandbox:
            proc.target = str(self.target)
            return True
        copy = proc.launched.copy
        if copy is None:
            return False
        try:
            refresh_copy(copy, self.target)
        except OSError:
            return False
        return True

    def start(self) -> None:
        """Have a worker starting (it imports torch meanwhile); no waiting."""
        if self._proc is None or not self._proc.alive:
            if self._proc is not None:
                self.failures += 1
            self._proc = self._take_spare() or self._spawn()
            if self.failures:
                self.pool.keep_spare(self, self._spawn())

    def fresh(self) -> None:
        """A fresh lesson process from here on (a new lesson begins): nothing the previous
        lesson's code did to its process reaches the next. Costs a fork (at the next
        request), not a start."""
        proc = self._proc
        if proc is None or not proc.alive:
            self.start()  # a new worker's first lesson process is fresh already
        elif proc.lesson_used:
            proc.ready = False

    def _ready(self) -> _Process:
        self.start()
        assert self._proc is not None
        while True:
            established = self._proc.greeted
            try:
                self._proc.await_ready(self.startup_timeout)
                return self._proc
            except WorkerUnavailable:
                if not established:
                    raise
                # A worker that could fork before and cannot now (the student's code killed
                # it, or it died while it was kept): a new one.
                self._proc.kill()
                self.failures += 1
                self._proc = self._take_spare() or self._spawn()

    def _take_spare(self) -> _Process | None:
        proc = self.pool.take_spare(self)
        assert proc is None or isinstance(proc, _Process)  # the spare this client kept
        return proc

    def close(self) -> None:
        """End this client's workers; a healthy one waits in the pool for the next client."""
        for proc in (self._proc, self._take_spare()):
            if proc is not None:
                self.pool.keep(self.target, sandbox=self.sandbox, memory=self.memory, proc=proc)
        self._proc = None

    # -- requests ------------------------------------------------------------------------------

    def request(
        self,
        message: dict,
        timeout: float,
        *,
        what: str,
        function: str | None = None,
        fds: tuple[int, ...] = (),
    ) -> dict:
        """One request; harness failures raise CheckFailed, the student's errors StudentError.

        While it runs, the proxies of ``function``'s dependencies may ask questions; they are
        answered here, on a clock of their own (the function's limit does not run meanwhile).
        The limit is the checker's: one ``timeout`` for the function's own time, whatever the
        lesson process writes on its socket (anything but a question or the answer fails)."""
        proc = self._ready()
        proc.lesson_used = True
        if self._answers is not None:
            self._answers.allow(function)
        # Two clocks: the function's own time (``timeout``), and the checker's time answering
        # its questions (``timeout`` in all). The checker's part never counts against the
        # function, so a slow or busy checker cannot make a correct function miss its limit.
        started, answering = time.monotonic(), 0.0
        try:
            answer = proc.exchange(protocol.encode(message), timeout, what=what, fds=fds)
            while isinstance(answer, dict) and "ask" in answer:
                asked = time.monotonic()
                reply = self._reply(answer, asked + max(timeout - answering, 0.001))
                spent = time.monotonic() - asked
                answering += spent
                started += spent
                remaining = max(started + timeout - time.monotonic(), 0.001)
                answer = proc.exchange(protocol.encode(reply), remaining, what=what, limit=timeout)
        finally:
            if self._answers is not None:
                self._answers.allow(None)
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            proc.drop_lesson()
            raise _failed(f"{what}: the worker's answer was malformed", NOT_PLAIN)
        return answer

    def _reply(self, question: dict, deadline: float) -> dict:
        from .replayed import Raised, Refused, Unrecorded

        if self._answers is None:
            return {"ok": False, "error": "this grader answers no questions"}
        try:
            value = self._answers.answer(question["ask"], question.get("question"), deadline)
        except Raised as raised:  # the worker raises it in the caller, as its own would
            return {"ok": False, "error": str(raised), "raised": raised.kind}
        except Unrecorded as unrecorded:  # the release: the submission's own function answers
            return {"ok": False, "error": str(unrecorded), "own": True}
        except Refused as refusal:
            return {"ok": False, "error": str(refusal)}
        return {"ok": True, "value": value}

    def _proxies(self, function: str) -> list[str]:
        return [] if self._answers is None else self._answers.names(function)

    def _prepare(self, *, dynamo: bool) -> None:
        """Before a request that imports torch._dynamo (a second or more: a scenario that makes
        an optimizer), a lesson process
        forked after the worker imported it, so that no check's clock pays for it; other
        lessons never import it at all."""
        self.start()
        proc = self._proc
        if dynamo and proc is not None and not proc.dynamo:
            proc.dynamo = True
            proc.ready = False  # the next request forks, the import first

    def ensure_module(self, module: str, timeout: float) -> None:
        """Import the student's module once; an import that fails is remembered for the run
        (so a module that hangs on import costs one timeout, not one per check). The import
        gets twice a call's time: a busy machine must not fail a whole lesson."""
        if module in self.broken:
            raise self.broken[module]
        proc = self._proc
        if proc is not None and proc.alive and proc.ready and module in proc.imported:
            return
        try:
            answer = self.request(
                {"op": "import", "module": module}, 2 * timeout, what=f"importing {module}.py"
            )
        except CheckFailed as failure:
            self.broken[module] = failure
            raise
        if not answer["ok"]:
            error = StudentError(_dict(answer.get("error")), f"{module}.py", during="import")
            self.broken[module] = error
            raise error
        assert self._proc is not None  # the request made it ready
        self._proc.imported.add(module)

    def call(
        self,
        function: str,
        args: list,
        kwargs: dict,
        timeout: float,
        trace: bool = False,
    ) -> tuple[Any, Any]:
        """The student's ``module.function(*args, **kwargs)``: (result, [args, kwargs] after).
        ``trace``: the lesson process traces the call instead (graders/worker/tracing.py), and
        the result is (the value's skeleton, the operator graph), for graders/graph.py.

        The tensors among the inputs live in a file the checker made and maps itself
        (graders/shared.py): a call that changed one in place fails (IN_PLACE) on what the
        checker reads back, not on the lesson process's report of its inputs."""
        self.ensure_module(function.partition(".")[0], timeout)
        with SharedTensors([args, kwargs]) as shared:
            answer = self.request(
                {
                    "op": "call",
                    "function": function,
                    "args": shared.sent[0],
                    "kwargs": shared.sent[1],
                    "shared": shared.table,
                    "proxies": self._proxies(function),
                    "trace": trace,
                },
                timeout,
                what=_name(function),
                function=function,
                fds=shared.fds,
            )
            changed = shared.changed()
        if not answer["ok"]:
            raise StudentError(_dict(answer.get("error")), _name(function))
        value = unpack(answer.get("value"), _name(function))
        if trace:
            value = (value, unpack(answer.get("graph"), f"the operator graph of {_name(function)}"))
        if changed:
            raise _failed(f"{_name(function)} changed its input in place", IN_PLACE)
        inputs = unpack(answer.get("inputs"), f"the inputs of {_name(function)}")
        return value, inputs

    def scenario(self, name: str, function: str, config: dict, timeout: float) -> Any:
        self._prepare(dynamo=name in OPTIMIZING_SCENARIOS)
        self.ensure_module(function.partition(".")[0], timeout)
        answer = self.request(
            {
                "op": "scenario",
                "name": name,
                "function": function,
                "config": config,
                "proxies": self._proxies(function),
            },
            timeout,
            what=_name(function),
            function=function,
        )
        if not answer["ok"]:
            raise StudentError(_dict(answer.get("error")), _name(function))
        return unpack(answer.get("value"), _name(function))

    def limits(self, timeout: float = 30.0) -> dict:
        """The worker's resource limits and privileges (for the project's tests)."""
        answer = self.request({"op": "limits"}, timeout, what="reading limits")
        return unpack(answer.get("value"), "limits")


@contextmanager
def checker_memory(budget: int = CHECKER_MEMORY) -> Iterator[None]:
    """The checker's own memory bound while it grades: its data segment (heap and private
    mappings, RLIMIT_DATA's measure) may grow ``budget`` bytes past what it is now, so that an
    answer that would cost more fails its check with a MemoryError instead of exhausting the
    machine. The limit before is restored afterwards. Where the platform has no such limit
    (not Linux), the answers' own bounds (MAX_ANSWER, MAX_PARTS, MAX_TEXT) are the bound."""
    try:
        import resource

        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
        before = resource.getrlimit(resource.RLIMIT_DATA)
    except (ImportError, OSError, StopIteration, ValueError):
        yield
        return
    soft, hard = before
    limit = used + budget
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, before)


def _dependency_answers() -> Any:
    """graders/secret/dependencies.py's answerer; where it is absent (the student release), the
    recorded answers for earlier lessons' functions (graders/replayed.py), and the worker runs
    a function with the submission's own versions of its own lesson's."""
    from .secret_half import installed_secret

    module = installed_secret("dependencies")
    if module is None:
        from .replayed import Replayed

        return Replayed()
    return module.Answers()


def unpack(packed: Any, what: str) -> Any:
    """A packed value (see graders/worker/protocol.py) as plain data, or CheckFailed."""
    if not isinstance(packed, dict):
        raise _failed(f"{what}: the worker's answer was malformed", NOT_PLAIN)
    given = packed.get("type")
    kind = given if isinstance(given, str) else "?"
    payload = packed.get("payload")
    if not isinstance(payload, bytes):
        raise _failed(
            f"{what} returned a {kind} that cannot be sent back as data ({packed.get('error')})",
            NOT_PLAIN,
        )
    if protocol.too_many_operations(payload):
        raise _failed(f"{what} returned a {kind} too large to check", NOT_PLAIN)
    try:
        value = protocol.decode(payload)
    except Exception:  # noqa: BLE001 - UnpicklingError and friends: not plain data
        raise _failed(f"{what} returned a {kind}, which is not plain data", NOT_PLAIN) from None
    _bounded(value, what, kind)
    return value


def _bounded(value: Any, what: str, kind: str) -> None:
    """An answer the checker can compare and describe quickly: at most MAX_PARTS parts and
    MAX_TEXT characters, each counted every time it is reached (a list of a million
    references to one string is a million strings), nested at most MAX_DEPTH deep."""
    text = 0
    try:
        for part in protocol.parts_of(value, MAX_PARTS, MAX_DEPTH):
            if isinstance(part, str | bytes):
                text += len(part)
                if text > MAX_TEXT:
                    raise protocol.TooLarge(f"more than {MAX_TEXT >> 20} M characters of text")
    except protocol.TooLarge as why:
        raise _failed(f"{what} returned a {kind} too large to check ({why})", NOT_PLAIN) from None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {"type": "?", "message": describe(value)}


def _name(function: str) -> str:
    return function.partition(".")[2] or function


def _read(stream: Any) -> bytes | None:
    """Available bytes; b"" at end of file; None when nothing is available yet."""
    try:
        return os.read(stream.fileno(), 1 << 20)
    except BlockingIOError:
        return None
    except OSError:
        return b""
