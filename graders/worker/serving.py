"""The worker's processes: the one that forks a lesson process for every lesson, and the lesson
process that imports the student's package and answers the checker's requests."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from .absent import make_absent
from .framing import read_frame, read_message, write_frame
from .hardening import SECCOMP, _die_with_parent, harden, limits_report, refuse_syscalls
from .limits import CPU_SECONDS, FILE_SIZE, MEMORY, USER_PROCESSES
from .protocol import (
    DTYPES,
    GENERATOR,
    SHARED,
    _safe_str,
    decode,
    encode,
    pack,
)
from .proxies import RAISED, DependencyRefused, UseOwn, make_proxies
from .scenarios import SCENARIOS
from .tracing import ready_tracer, trace

ALIAS = "submission"  # the student's package is imported under this fixed name


class Worker:
    def __init__(self, target: str, requests: int, answers: int) -> None:
        self.target = os.path.abspath(target)
        self.package: types.ModuleType | None = None
        self.requests, self.answers = requests, answers
        self.proxies = make_proxies(self.ask)
        # Taken before the student's module is imported: rebinding the module's names later
        # (SCENARIOS["evaluate"] = forged, strip = a report of its own) changes nothing this
        # lesson process runs.
        self.scenarios = dict(SCENARIOS)
        self.pack, self.strip, self.trace = pack, strip, trace

    def ask(self, name: str, question: Any) -> Any:
        """A proxy's question to the checker, answered while the request is still running."""
        write_frame(self.answers, encode({"ask": name, "question": question}))
        frame = read_frame(self.requests)
        if frame is None:
            raise SystemExit(3)
        reply = decode(frame)
        if not reply.get("ok"):
            error = str(reply.get("error", "refused"))
            kind = RAISED.get(str(reply.get("raised")))
            if kind is not None:  # the trusted code raised it, as the caller's own would
                raise kind(error)
            raise (UseOwn if reply.get("own") else DependencyRefused)(error)
        return reply["value"]

    def import_module(self, module: str) -> types.ModuleType:
        if self.package is None:
            init = os.path.join(self.target, "__init__.py")
            if os.path.exists(init):
                package = _load_package(ALIAS, self.target)
            else:
                package = types.ModuleType(ALIAS)
                package.__path__ = [self.target]
                sys.modules[ALIAS] = package
            self.package = package
        return importlib.import_module(f"{ALIAS}.{module}")

    def resolve(self, function: str) -> Any:
        module, _, name = function.partition(".")
        return getattr(self.import_module(module), name)

    @contextmanager
    def proxied(self, function: str, names: list[str], fresh: bool = True) -> Iterator[None]:
        """Put the proxies of ``function``'s dependencies (those the checker will answer) into
        its module while it runs; the module's own objects return afterwards. ``fresh``: a new
        request (the ranks tables sent so far are forgotten, as the checker forgets them)."""
        names = [n for n in names if isinstance(n, str) and _proxied_name(n)]
        if fresh:
            self.proxies.tables.clear()
        module = self.import_module(function.partition(".")[0]) if names else None
        missing = object()
        saved: list[tuple[Any, str, Any]] = []  # (module, name, its own object) to put back

        def plug(where: Any, attribute: str, proxy: Any) -> None:
            saved.append((where, attribute, getattr(where, attribute, missing)))
            setattr(where, attribute, proxy)

        for name in names:
            proxy = self.proxies[name]
            lesson, dot, called = name.rpartition(".")
            if not dot:  # a function of the graded module's own lesson
                plug(module, name, proxy)
                continue
            # An earlier lesson's function (``attention.attention``): in its own module, and
            # under every name the graded module holds it by (``from .attention import
            # attention as attend`` too); without it there, under its own name.
            other = self.import_module(lesson)
            own = getattr(other, called, missing)
            self.proxies.own[name] = own if callable(own) else None
            plug(other, called, proxy)
            held = [key for key, value in vars(module).items() if value is own]
            for key in held if own is not missing and held else [called]:
                plug(module, key, proxy)
        try:
            yield
        finally:
            for where, attribute, value in reversed(saved):
                if value is missing:
                    delattr(where, attribute)
                else:
                    setattr(where, attribute, value)
            self.proxies.own.clear()

    def handle(self, request: dict, fds: list[int]) -> dict:
        op = request["op"]
        if op == "import":
            self.import_module(request["module"])
            return {"ok": True}
        if op == "limits":
            return {"ok": True, "value": pack(limits_report())}
        if op not in ("call", "scenario"):
            raise ValueError(f"unknown request {op!r}")
        function = request["function"]
        fn = self.resolve(function)
        proxied = self.proxied(function, list(request.get("proxies", ())))
        if op == "call":
            # The inputs are held in tuples, which the student's code cannot refill; tensors
            # the checker shares stay in memory it reads back itself after the call.
            shared = map_shared(request.get("shared", ()), fds)
            args = tuple(revive(request["args"], shared))
            kwargs = tuple(revive(request["kwargs"], shared).items())
            if request.get("trace"):
                # A by-hand function: the checker grades the graph it runs itself, not a value.
                with proxied:
                    traced = self.trace(fn, args, dict(kwargs))
                inputs = [self.strip(list(args)), self.strip(dict(kwargs))]
                return {
                    "ok": True,
                    "value": self.pack(traced["value"]),
                    "graph": self.pack(traced["graph"]),
                    "inputs": self.pack(inputs),
                }
            with proxied:
                value = fn(*args, **dict(kwargs))
            # What the call left its inputs as (the tensors the checker shares, it reads
            # itself; this report adds the lists and dicts around them).
            inputs = [self.strip(list(args)), self.strip(dict(kwargs))]
            return {"ok": True, "value": self.pack(value), "inputs": self.pack(inputs)}
        config = revive(request["config"])
        with proxied:
            value = self.scenarios[request["name"]](fn, **config)
        return {"ok": True, "value": self.pack(value)}

    def describe(self, error: BaseException) -> dict:
        kind = type(error)
        where = None
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if frame.filename.startswith(self.target + os.sep):
                where = f"{os.path.relpath(frame.filename, self.target)}, line {frame.lineno}"
                break
        filename = getattr(error, "filename", None)  # a SyntaxError names its own place
        if where is None and isinstance(error, SyntaxError) and isinstance(filename, str):
            if filename.startswith(self.target + os.sep):
                where = f"{os.path.relpath(filename, self.target)}, line {error.lineno}"
        return {
            "type": getattr(kind, "__qualname__", "?"),
            "builtins": [c.__name__ for c in kind.__mro__ if c.__module__ == "builtins"],
            "message": _safe_str(error),
            "where": where,
        }


def _proxied_name(name: str) -> bool:
    """A function of the graded lesson (``split_heads``) or of an earlier one
    (``attention.attention``)."""
    lesson, _, function = name.rpartition(".")
    return function.isidentifier() and (not lesson or lesson.isidentifier())


def revive(obj: Any, shared: list[Tensor] | None = None) -> Any:
    """Requests are plain data; ``{GENERATOR: seed}`` stands for a seeded torch.Generator and
    ``{SHARED: slot}`` for a tensor in memory the checker shares (see ``map_shared``)."""
    if isinstance(obj, dict):
        if set(obj) == {GENERATOR}:
            return torch.Generator().manual_seed(obj[GENERATOR])
        if set(obj) == {SHARED} and shared is not None:
            return shared[obj[SHARED]]
        return {k: revive(v, shared) for k, v in obj.items()}
    if isinstance(obj, list):
        return [revive(v, shared) for v in obj]
    if isinstance(obj, tuple):
        return tuple(revive(v, shared) for v in obj)
    return obj


def map_shared(table: Iterable, fds: list[int]) -> list[Tensor]:
    """The tensors of ``table`` (``[offset, dtype, shape, requires_grad]`` each), mapped from
    the file the checker sent (``fds[0]``): what the call writes to them, the checker sees."""
    import mmap

    tensors = []
    for offset, dtype, shape, grad in table:
        count = 1
        for n in shape:
            count *= n
        memory = mmap.mmap(fds[0], count * DTYPES[dtype].itemsize, offset=offset)
        tensor = torch.frombuffer(memory, dtype=DTYPES[dtype], count=count).view(shape)
        tensors.append(tensor.requires_grad_(True) if grad else tensor)
    return tensors


def strip(obj: Any) -> Any:
    """The inputs as plain data again (generators dropped), to see what a call changed."""
    if isinstance(obj, torch.Generator):
        return None
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(strip(v) for v in obj)
    return obj


def provide(folder: str) -> None:
    """Make the course's provided package (``gpt/``: no exercise in it, it ships to students)
    importable under its own name from ``folder``: lesson modules import it (tokens uses
    ``gpt.vocab`` for GPT-2's merge ranks)."""
    _load_package(os.path.basename(folder), folder)


def _load_package(name: str, folder: str) -> types.ModuleType:
    """The package in ``folder`` (its ``__init__.py``), imported as ``name``."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {folder} as a package")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="grader worker")
    parser.add_argument("--target", required=True)
    parser.add_argument("--memory", type=int, default=MEMORY)
    parser.add_argument("--cpu", type=int, default=CPU_SECONDS)
    parser.add_argument("--fsize", type=int, default=FILE_SIZE)
    parser.add_argument("--nproc", type=int, default=USER_PROCESSES)
    parser.add_argument("--provided", default=None, metavar="DIR")
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args(argv)
    # Standard input is a Unix socket to the checker (the control channel); it moves to a
    # private descriptor. The student's prints go to standard error (which the checker drains
    # and caps) and input() reads nothing.
    control = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    harden(args.memory, args.cpu, args.fsize, args.nproc)
    import faulthandler

    faulthandler.enable(sys.stderr)
    sys.dont_write_bytecode = True
    torch.set_num_threads(1)
    # What torch imports the first time a backward is given its gradient (sympy: half a
    # second): here once, not in every lesson process on some check's clock.
    importlib.import_module("torch.fx.experimental.symbolic_shapes")
    if args.provided:
        provide(args.provided)
    write_frame(control, encode({"ok": True, "pid": os.getpid()}))
    if args.trace:  # a grading that traces: while the checker still starts, not on its clock
        ready_tracer()
    serve_lessons(control, args.target)


def _empty_working_directory(keep: frozenset[str]) -> None:
    """Remove what the lesson processes wrote where they ran, so that a kept worker's next
    grading starts as a new worker's would. ``keep``: what was there before any lesson (in a
    sandbox's /tmp, the folders that mounts below it need)."""
    import shutil

    for entry in os.scandir("."):
        if entry.name in keep:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def serve_lessons(control: int, target: str) -> None:
    """Fork a fresh lesson process for every ``{"op": "fork"}`` on the control channel.

    This process has imported torch but never runs the student's code, so every lesson starts
    from the same clean state in milliseconds. A lesson process gets a socket of its own
    (passed to the checker over the control channel) and no access to the control channel;
    the next fork, an ``{"op": "end"}``, or the end of the control channel kills it and
    everything it started. A fork may name another target (an unsandboxed checker keeps an
    idle worker for its next grading run, whatever that run grades), and may ask for
    torch._dynamo to be imported first (``"dynamo": True``: an optimizer imports it).
    """
    import socket

    channel = socket.socket(fileno=os.dup(control))
    keep = frozenset(os.listdir("."))
    lesson: int | None = None
    while True:
        frame = read_frame(control)
        if frame is None:
            if lesson is not None:
                _reap(lesson)
            return
        request = decode(frame)
        if request.get("op") == "status":  # the lesson's channel closed: how it ended
            write_frame(control, encode({"status": None if lesson is None else _ended(lesson)}))
            lesson = None
            continue
        if lesson is not None:
            _reap(lesson)
            lesson = None
        if request.get("op") == "end":  # the grading run is over: no lesson until the next
            _empty_working_directory(keep)  # what the lessons left (a sandbox's private /tmp)
            write_frame(control, encode({"ok": True}))
            continue
        graded = str(request.get("target", target))
        if request.get("dynamo"):
            # torch imports torch._dynamo (a second or more) the first time an optimizer is
            # made: here, before the fork, it is on no check's clock, and every later lesson
            # process has it.
            importlib.import_module("torch._dynamo")
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the lesson process
            try:
                os.close(control)
                channel.close()
                ours.close()
                serve(theirs.detach(), graded)
            finally:
                os._exit(0)
        theirs.close()
        socket.send_fds(channel, [b"L"], [ours.fileno()])
        ours.close()
        lesson = pid


def _ended(pid: int) -> int | None:
    """The lesson process's exit code (negative: the signal), or None if it had not ended
    within a second (it closed its socket and went on: it is killed)."""
    import time

    for _ in range(20):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    _reap(pid)
    return None


def _reap(pid: int) -> None:
    import signal

    for kill in (os.killpg, os.kill):  # its process group, then itself
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def serve(fd: int, target: str) -> None:
    """One lesson: import the student's code and answer requests on ``fd`` until it closes."""
    os.setpgid(0, 0)  # its own group: the next fork kills whatever this one started
    _die_with_parent()  # fork clears it
    # Threads torch starts for itself start now, before the filter and any student code.
    torch.ones(1, requires_grad=True).sum().backward()
    SECCOMP[0] = refuse_syscalls()
    make_absent()  # the tokenizer libraries: the tokens lesson's exercises are their twins
    worker = Worker(target, fd, fd)
    import socket

    channel = socket.socket(fileno=os.dup(fd))
    write_frame(fd, encode({"ok": True, "pid": os.getpid()}))
    while True:
        frame, fds = read_message(channel)
        if frame is None:
            return
        try:
            answer = worker.handle(decode(frame), fds)
        except BaseException as error:  # noqa: BLE001 - SystemExit, KeyboardInterrupt too
            answer = {"ok": False, "error": worker.describe(error)}
        finally:
            for descriptor in fds:  # a mapping keeps its own reference to the file
                os.close(descriptor)
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - the student may have closed or replaced it
            pass
        write_frame(fd, encode(answer))
