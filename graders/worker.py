"""The grading worker: the one process that runs the student's code.

The checker (pytest, in another process) sends requests as plain data; the worker imports the
student's package, calls one function (or runs a small *scenario* around it, such as "build a
toy model, run the student's train_step, return the new parameters"), and answers with plain
data. Both directions are ``torch.save`` bytes; the checker reads answers with
``torch.load(weights_only=True)``, so nothing the student returns can run code in the checker.

Nothing trusted lives here: no expected value, no reference implementation, no rule's
verdict. A function that builds on others of its module gets *proxies* for them, which ask the
checker (see make_proxies); the checker judges every answer in its own process.

This file runs standalone. ``graders.client`` starts ``python -I -c BOOTSTRAP --target DIR ...``
with a Unix socket as standard input and sends this file's source there; the process then forks
a fresh lesson process, with a socket of its own, for every lesson (``serve_lessons``), so the
worker needs no file of the grader tree (a sandbox shows it none) and imports only the standard
library, torch and regex. The checker imports this module as well, for the pieces both sides
share: the framing, the toy model and the scenarios. It holds no solution of any exercise: it
ships to students.

Requests (a dict each):
    {"op": "import", "module": "embeddings"}
    {"op": "call", "function": "embeddings.lookup", "args": [...], "kwargs": {...},
     "return_inputs": True, "proxies": [...], "rule": {"ops": [...], "message": "..."}}
    {"op": "scenario", "name": "train_step", "function": "training.train_step", "config": {...}}
    {"op": "limits"}
Answers: {"ok": True, "value": PACKED, "inputs": PACKED, "again": PACKED} or {"ok": False,
"error": {...}} ("inputs": the call's inputs after it; "again": its answer to a second call on
the same objects), where
PACKED is {"type": name, "payload": torch.save bytes or None, "error": why not}: the value is
packed apart so that an answer that is not plain data still arrives as a readable failure.
While a request runs, a proxy may send {"ask": NAME, "question": ...}; the checker replies
{"ok": True, "value": ...} or {"ok": False, "error": why} before the request's answer comes.
A call that runs the function a second time sends {"ran": 1} between the two runs (each run has
the check's limit of its own).
"""

from __future__ import annotations

import argparse
import dis
import importlib
import importlib.util
import io
import os
import struct
import sys
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack
from torch.utils.data import DataLoader, Dataset

ALIAS = "submission"  # the student's package is imported under this fixed name
FRAME = struct.Struct(">Q")
GENERATOR = "__torch_generator__"  # {GENERATOR: seed} in a request becomes a seeded Generator
TOO_LONG = "grader's toy model: got {T} positions but it has only {L} (context_length)"
MESSAGE_LIMIT = 2000

# The worker is started as `python -I -c BOOTSTRAP ARGS`, then reads this file's source as one
# frame on standard input and runs its main().
BOOTSTRAP = """\
import os, struct, sys, types
def read(n):
    data = b''
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit(3)
        data += chunk
    return data
source = read(struct.unpack('>Q', read(8))[0]).decode('utf-8')
module = types.ModuleType('grader_worker')
sys.modules['grader_worker'] = module
exec(compile(source, '<grader worker>', 'exec'), module.__dict__)
module.main(sys.argv[1:])
"""


# --------------------------------------------------------------------------------------------
# Framing and plain-data packing (both sides)


def encode(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def decode(payload: bytes) -> Any:
    """Plain data only: tensors, numbers, strings, bytes, lists, tuples, dicts, None."""
    return torch.load(io.BytesIO(payload), weights_only=True)


# Pickle operations in one frame, value or table that the checker reads (a string or a tensor's
# data is one): torch's weights-only unpickler reads about half a million a second, so this
# bounds its time.
MAX_OPERATIONS = 1 << 20


def too_many_operations(payload: bytes) -> bool:
    """Whether the pickled structure in ``torch.save`` bytes (its ``data.pkl``) has more than
    MAX_OPERATIONS operations, counted without building anything; False when it is no such archive
    (decoding it then fails on its own). The checker's test before it decodes anything."""
    import io
    import pickletools
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            # every operation takes a byte at least: a short pickle needs no count
            names = [
                info.filename
                for info in archive.infolist()
                if info.filename.endswith(".pkl") and info.file_size > MAX_OPERATIONS
            ]
            for name in names:
                for count, _ in enumerate(pickletools.genops(archive.read(name))):
                    if count >= MAX_OPERATIONS:
                        return True
    except Exception:  # noqa: BLE001 - a malformed archive or pickle: decode refuses it
        return False
    return False


def pack(value: Any) -> dict:
    """A value as a separately decodable payload, or why it could not be saved."""
    try:
        kind = type(value).__qualname__
    except Exception:  # noqa: BLE001 - a hostile metaclass
        kind = "?"
    try:
        return {"type": kind, "payload": encode(value), "error": None}
    except BaseException as error:  # noqa: BLE001 - anything the student's object raises
        return {"type": kind, "payload": None, "error": _safe_str(error)}


class TooLarge(ValueError):
    """A value with more parts, or deeper nesting, than its reader allows."""


def parts_of(obj: Any, most: int, deepest: int) -> Iterator[Any]:
    """Every part of ``obj`` (itself, the items of its lists and tuples, the keys and values of
    its dicts) each time it is reached: a part shared a million times is a million parts, so
    the walk costs what the value would cost written out. TooLarge past ``most`` parts or
    ``deepest`` levels, before the walk holds more than ``most`` parts."""
    count = 0
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            raise TooLarge(f"nested more than {deepest} deep")
        yield item
        if isinstance(item, list | tuple | dict):
            count += len(item) * (2 if isinstance(item, dict) else 1)
            if count > most:
                raise TooLarge(f"more than {most} parts")
            if isinstance(item, dict):
                stack.extend((part, depth + 1) for pair in item.items() for part in pair)
            else:
                stack.extend((part, depth + 1) for part in item)


def _safe_str(obj: object) -> str:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


# --------------------------------------------------------------------------------------------
# Dependencies. While one function is graded, the names of its own module that it builds on
# (lm_loss's cross_entropy, fit's train_step, ...) are replaced by *proxies*, so that every check
# grades one function and a mistake in one function costs only its own checks. A proxy holds no
# answer: it sends its inputs to the checker, which computes the answer with its trusted
# implementation (graders/secret/dependencies.py, in the checker's process) and sends back
# plain data, with what the trusted code did to the objects it was given (see _Crossing).
# The checker decides which names are proxied (a function's ``builds_on`` in the manifest) and
# answers only for the dependencies of the function it is grading at that moment, so a proxy
# kept for later answers nothing. Where the checker has no trusted implementations
# (the student release) a request names no proxies, and a function runs with the submission's
# own versions of its dependencies.


class DependencyRefused(RuntimeError):
    """The checker would not answer a proxy's question (not a dependency of this check)."""


# Every proxy is the same: it knows no lesson. What is not plain data crosses as a marker, by
# its type, and the checker's answer says what becomes of the caller's objects:
#   an nn.Module       {MODULE: [slot, state dict, training]}; afterwards it takes the gradients the
#                      checker computed and the training mode the checker's copy ended in;
#   a torch.Generator  {GENERATOR_STATE: [slot, state]}; afterwards it holds the state the
#                      checker's draws left, as if the caller's generator had drawn;
#   an optimizer       {OPTIMIZER: slot}; the steps the checker's code takes (step, zero_grad)
#                      are taken here by the caller's own optimizer, with its own hooks, state
#                      and learning rates;
#   an iterator        the list of its items (a generator, a DataLoader: read once);
#   a dict of TABLE_SIZE entries or more (bpe_merge's ranks) {TABLE: key}: it crosses once
#                      per request, as the bytes of its encoding ("NAME.table" answers with
#                      its key; the checker decodes bytes it has seen before only once), then
#                      as its key.
# A dependency that is a class (a Dataset such as TokenWindows) answers with its items, and
# the proxy gives back a Dataset that holds them.
MODULE = "__module__"
GENERATOR_STATE = "__generator_state__"
OPTIMIZER = "__optimizer__"
TABLE = "__table__"
TABLE_SIZE = 1024
PLAIN = (Tensor, str, bytes, int, float, bool, type(None))


def _model_state(model: nn.Module) -> dict[str, Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


class _Answered(Dataset):
    """A dependency's Dataset, its items computed by the checker."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


class _Crossing:
    """One proxy call: its arguments as plain data, and the caller's objects they stand for."""

    def __init__(self, name: str, ask: Callable[[str, Any], Any], tables: list) -> None:
        self.name, self.ask, self.tables = name, ask, tables
        self.modules: list[nn.Module] = []
        self.generators: list[torch.Generator] = []
        self.optimizers: list[torch.optim.Optimizer] = []

    def plain(self, value: Any) -> Any:
        if isinstance(value, PLAIN):
            return value
        if isinstance(value, nn.Module):
            self.modules.append(value)
            return {MODULE: [len(self.modules) - 1, _model_state(value), value.training]}
        if isinstance(value, torch.Generator):
            self.generators.append(value)
            return {GENERATOR_STATE: [len(self.generators) - 1, value.get_state()]}
        if isinstance(value, torch.optim.Optimizer):
            self.optimizers.append(value)
            return {OPTIMIZER: len(self.optimizers) - 1}
        if isinstance(value, dict):
            if len(value) >= TABLE_SIZE:
                return {TABLE: self.table(value)}
            return {key: self.plain(item) for key, item in value.items()}
        if isinstance(value, tuple):
            return tuple(self.plain(item) for item in value)
        if isinstance(value, list) or hasattr(value, "__iter__"):
            return [self.plain(item) for item in value]
        return value  # not plain data: the question cannot be sent, and says so

    def table(self, mapping: dict) -> int:
        key = next((key for known, key in self.tables if known is mapping), None)
        if key is None:
            # as its own encoded bytes: the checker decodes a table it has seen once by
            # their digest, not again for every request (the GPT-2 ranks take a second)
            key = self.ask(f"{self.name}.table", encode(dict(mapping)))
            self.tables.append((mapping, key))
        return key

    def settle(self, effects: list) -> None:
        """What the checker's code did to the objects it was given, done to the caller's."""
        for kind, slot, detail in effects:
            if kind == "grads":
                params = list(self.modules[slot].parameters())
                for param, grad in zip(params, detail, strict=True):
                    param.grad = grad
            elif kind == "train":
                self.modules[slot].train(detail)
            elif kind == "generator":
                self.generators[slot].set_state(detail)
            elif kind == "step":
                self.optimizers[slot].step()
            elif kind == "zero_grad":
                self.optimizers[slot].zero_grad(set_to_none=detail)


def make_proxies(ask: Callable[[str, Any], Any]) -> _Proxies:
    """The stand-ins the worker plugs in; ``ask(name, question)`` is the checker's answer."""
    tables: list[tuple[dict, int]] = []  # tables sent in this request, kept alive

    def proxy_of(name: str) -> Callable:
        def proxy(*args: Any, **kwargs: Any) -> Any:
            crossing = _Crossing(name, ask, tables)
            question = [crossing.plain(list(args)), crossing.plain(kwargs)]
            value, effects, dataset = ask(name, question)
            crossing.settle(effects)
            return _Answered(value) if dataset else value

        proxy.__name__ = proxy.__qualname__ = name
        return proxy

    return _Proxies(proxy_of, tables)


class _Proxies(dict):
    """The proxies by name, each made on first use."""

    def __init__(self, proxy_of: Callable[[str], Callable], tables: list) -> None:
        super().__init__()
        self.proxy_of = proxy_of
        self.tables = tables  # the checker forgets its tables after every request

    def __missing__(self, name: str) -> Callable:
        self[name] = proxy = self.proxy_of(name)
        return proxy


# --------------------------------------------------------------------------------------------
# "By hand" rules. Some exercises are about computing a thing by hand (cross_entropy: no library
# cross-entropy, log-softmax or log-sum-exp). The rule comes from the manifest
# (course/lessons.toml, ``[[lesson.rule]]``) with the request. While the student's version of
# that very function runs (not another function that uses it: lm_loss may call F.cross_entropy
# freely), a dispatch mode watches every tensor operation that reaches torch's kernels, however
# the function got hold of it: an alias, a default argument, a closure, a Tensor method, an
# nn module. The checker also reads the function's source (graders/rules.py) for those names
# and for anything that would switch this watch off.


class ForbiddenCall(RuntimeError):
    """The student's code called a library function that its exercise asks to write by hand."""


class _Watch(TorchDispatchMode):
    """Refuses the rule's operations and, when the rule lists the allowed ones, every other.

    The mode sees only the operations of its own thread (the lesson process can start no
    other: see ``refuse_syscalls``), and code that switches it off for a while (torch's
    dispatch internals) computes out of its sight. So it also keeps the provenance of every
    tensor: an operation may only use the call's inputs and what earlier watched operations
    made (or their storage), unchanged since; anything else was computed where the watch could
    not see it. Two more eyes keep that provenance whole (see ``_Sight`` and ``_look``): every
    torch function the code calls gets only tensors the watch knows (``tolist``, ``numpy`` and
    storage reads turn no unseen tensor into Python data), and the student's code calls nothing
    while a watch is off. Tensors that torch makes from Python data (``torch.tensor(0.5)``,
    ``x[range(n), targets]``) come to the mode as ``aten::lift_fresh`` of a tensor it never saw:
    known from then on when the torch function that makes them is one of ``FROM_DATA``.
    """

    def __init__(self, rule: dict, inputs: Any, student: str = "") -> None:
        super().__init__()
        self.ops = set(rule["ops"])
        self.allow = set(rule.get("allow", ()))
        self.message = rule["message"]
        self.storages: set[int] = set()
        self.seen: dict[int, tuple[Tensor, int]] = {}  # id -> (tensor kept alive, its version)
        self.sight = _Sight(self)
        self.calls: list[Any] = []  # the torch functions running now, innermost last
        self.student = student  # the folder of the student's files ("": no profile hook)
        self.breach: str | None = None  # the first thing the student's code did unwatched
        self.know(inputs)

    def refuse(self, why: str) -> ForbiddenCall:
        return ForbiddenCall(f"{self.message} ({why})")

    def know(self, obj: Any) -> None:
        for tensor in _tensors(obj):
            self.storages.add(_storage(tensor))
            self.seen[id(tensor)] = (tensor, tensor._version)

    def verify(self, obj: Any) -> None:
        """Every tensor in ``obj`` is known, and as the watch last saw it."""
        for tensor in _tensors(obj):
            entry = self.seen.get(id(tensor))
            if entry is not None and entry[1] != tensor._version:
                raise self.refuse("a tensor was changed where the grader's watch could not see")
            if entry is None and _storage(tensor) not in self.storages:
                raise self.refuse("a tensor was computed where the grader's watch could not see")

    def unwatched(self) -> str | None:
        """Why the watch cannot see what runs now (None: it can)."""
        modes = _get_current_dispatch_mode_stack()
        if not modes or modes[-1] is not self:
            return "the grader's watch was switched off"
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
            return "torch's dispatch was switched off"
        functions = torch.overrides._get_current_function_mode_stack()
        if not functions or functions[-1] is not self.sight:
            return "the grader's watch was switched off"
        if not torch._C._is_torch_function_mode_enabled():
            return "torch functions were switched off"
        return None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._schema.name
        if name in self.ops:
            raise self.refuse(f"called {name}")
        # An allowed op's in-place form computes the same (a changed input is the checks'
        # to tell, as a change in place, not as a library call).
        if self.allow and name not in self.allow and name.removesuffix("_") not in self.allow:
            raise self.refuse(f"called {name}, which is not among the operations it may use")
        kwargs = kwargs or {}
        if name in FRESH and self.calls and self.calls[-1] in FROM_DATA:
            self.know((args, kwargs))  # torch's own tensor of Python data, made a moment ago
        self.verify((args, kwargs))
        out = func(*args, **kwargs)
        touched = (args, kwargs, out)
        self.know(touched)
        # An in-place op changes the version of every view of the storage it wrote, and the
        # count goes up only after this returns (autograd's in-place kernel runs above this
        # mode): what it wrote is seen one version on.
        storages = {_storage(tensor) for tensor in _tensors(touched)}
        written = _written(func, args, kwargs)
        for key, (tensor, _) in self.seen.items():
            storage = _storage(tensor)
            if storage in storages:
                self.seen[key] = (tensor, tensor._version + (storage in written))
        return out


class _Sight(TorchFunctionMode):
    """The watch's eye on torch's Python functions and Tensor methods, with their arguments:
    each gets only tensors the watch knows, and the innermost one running is kept (for
    ``aten::lift_fresh``)."""

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        self.watch.verify((args, kwargs))
        self.watch.calls.append(func)
        try:
            return func(*args, **kwargs)
        finally:
            self.watch.calls.pop()


# Where torch makes a tensor of Python data (numbers, lists, ranges, numpy arrays) and hands it
# to the dispatcher as aten::lift_fresh: a tensor the watch could not have seen made.
FRESH = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
FROM_DATA = frozenset(
    {
        torch.tensor,
        torch.as_tensor,
        torch.asarray,
        Tensor.new_tensor,
        Tensor.__getitem__,
        Tensor.__setitem__,
    }
)
# What would stop the profile hook that looks for unwatched code (``_look``).
UNHOOKS = frozenset({sys.setprofile, sys.settrace})


def _tensors(obj: Any) -> list[Tensor]:
    from torch.utils._pytree import tree_leaves

    return [leaf for leaf in tree_leaves(obj) if isinstance(leaf, Tensor)]


def _written(func: Any, args: Any, kwargs: dict) -> set[int]:
    """The storages of the tensors an operation writes (its schema's mutable arguments)."""
    found: set[int] = set()
    for index, spec in enumerate(func._schema.arguments):
        if spec.alias_info is None or not spec.alias_info.is_write:
            continue
        value = args[index] if index < len(args) else kwargs.get(spec.name)
        found.update(_storage(tensor) for tensor in _tensors(value))
    return found


def _storage(tensor: Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage of its own (a wrapper)
        return -1


@contextmanager
def watched(
    rule: dict | None, inputs: Any = (), result: list | None = None, student: str = ""
) -> Iterator[None]:
    """Raise ForbiddenCall when an operation the rule refuses runs inside the block, the code
    in ``student`` (a folder) calls anything while the watch is off, or the block's tensors
    (``result``'s first item, once set) come from outside the watch."""
    if not rule:
        yield
        return
    if _threads() > LESSON_THREADS[0]:
        raise ForbiddenCall(f"{rule['message']} (another thread runs, out of the grader's watch)")
    watch = _Watch(rule, inputs, student)
    profile = sys.getprofile()
    look = _look(watch)
    watch.__enter__()
    watch.sight.__enter__()
    sys.setprofile(look)
    try:
        yield
    finally:
        hooked = sys.getprofile() is look
        sys.setprofile(profile)
        why = watch.unwatched()
        if why is not None:  # popped, or buried under a mode of its own
            raise ForbiddenCall(f"{rule['message']} ({why})")
        watch.sight.__exit__(None, None, None)
        watch.__exit__(None, None, None)
        if not hooked:
            raise watch.refuse("the grader's watch was switched off")
    if watch.breach is not None:
        raise watch.refuse(watch.breach)
    if _threads() > LESSON_THREADS[0]:
        raise watch.refuse("another thread runs, out of the grader's watch")
    watch.verify(result or ())


def _look(watch: _Watch) -> Callable:
    """A profile hook: every call the student's own code makes (its frames are files in
    ``watch.student``) finds the watch on, and none unhooks this hook. What runs in a moment
    the watch is off, even one line (``with no_dispatch(): x = f(y).tolist()``), is a call the
    student's code makes in that moment. Python code that torch runs on the student's behalf
    (an operator, a C function calling back, the watch's own handlers) is no such call: only a
    call instruction of the student's frame, with no C function of its own running, of
    something that is not one of the watch's handlers counts."""
    folder = watch.student
    running: set[int] = set()  # the student's frames in a C function call

    def look(frame: Any, event: str, arg: Any) -> None:
        if not folder or watch.breach is not None:
            return
        caller = frame.f_back if event == "call" else frame
        if caller is None or not caller.f_code.co_filename.startswith(folder):
            return
        if event in ("c_return", "c_exception"):
            running.discard(id(caller))
            return
        if event == "c_call":
            running.add(id(caller))
            if arg in UNHOOKS:
                watch.breach = "the grader's watch was switched off"
                return
        elif event != "call" or id(caller) in running or frame.f_code in HANDLERS:
            return
        elif _instruction(caller) not in CALLS:
            return
        watch.breach = watch.unwatched()

    return look


CALLS = frozenset(
    dis.opmap[name] for name in ("CALL", "CALL_KW", "CALL_FUNCTION_EX") if name in dis.opmap
)
# The watch's own handlers, which torch calls from the student's frame (float(x), int(x)).
HANDLERS = frozenset({_Watch.__torch_dispatch__.__code__, _Sight.__torch_function__.__code__})
CACHE = dis.opmap.get("CACHE")  # a call's inline caches, where the frame may stand meanwhile


def _instruction(frame: Any) -> int:
    """The opcode that ``frame`` is running."""
    code, at = frame.f_code.co_code, frame.f_lasti
    while at > 0 and code[at] == CACHE:
        at -= 2
    return code[at]


# The threads of the lesson process before the student's code: no more may run while a by-hand
# function is watched. Where the seccomp filter holds, no thread or process can even start.
LESSON_THREADS = [1 << 30]
SECCOMP = [False]  # whether the lesson process's seccomp filter is in place


def _threads() -> int:
    """The threads of this process, as the kernel and as Python count them."""
    import threading

    try:
        return len(os.listdir("/proc/self/task")) + threading.active_count()
    except OSError:
        return threading.active_count()


# --------------------------------------------------------------------------------------------
# The toy model and the scenarios. Each scenario takes the function under test first, so the
# checker runs the very same scenario with a trusted function to get the expected answer.


class ToyLM(nn.Module):
    """A tiny next-token model that records, for every forward, its mode, grad mode and shape.

    Position t's logits depend on tokens 0..t (a running mean of token + position vectors), so
    generation results depend on which tokens are in the context. Longer inputs than
    ``context_length`` raise, like a GPT with a learned position table.
    """

    def __init__(self, vocab: int = 11, dim: int = 8, context_length: int = 16, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.wte = nn.Parameter(torch.randn(vocab, dim, generator=g))
        self.wpe = nn.Parameter(0.3 * torch.randn(context_length, dim, generator=g))
        self.head = nn.Parameter(torch.randn(dim, vocab, generator=g))
        self.bias = nn.Parameter(0.1 * torch.randn(vocab, generator=g))
        self.records: list[dict] = []

    def forward(self, ids: Tensor) -> Tensor:
        T = ids.shape[-1]
        L = self.wpe.shape[0]  # the context length
        if T > L:
            raise ValueError(TOO_LONG.format(T=T, L=L))
        self.records.append(
            {"training": self.training, "grad": torch.is_grad_enabled(), "shape": list(ids.shape)}
        )
        h = self.wte[ids] + self.wpe[:T]
        h = h.cumsum(dim=-2) / torch.arange(1, T + 1, dtype=h.dtype).unsqueeze(-1)
        return torch.tanh(h) @ self.head + self.bias


def make_optimizer(model: nn.Module, kind: str = "sgd", lr: float = 0.1) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    if kind == "sgd-groups":  # the embeddings in a group of their own, as weight decay splits
        params = list(model.parameters())
        return torch.optim.SGD([{"params": params[:2]}, {"params": params[2:]}], lr=lr)
    raise ValueError(f"unknown optimizer {kind!r}")


def _params(model: nn.Module) -> list[Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _batches(batches: list) -> list[tuple[Tensor, Tensor]]:
    return [(x, y) for x, y in batches]


def scenario_token_windows(
    cls: Any, ids: Any, context_length: int, stride: int, limit: int = 64
) -> dict:
    dataset = cls(ids, context_length, stride)
    n = len(dataset)
    return {
        "len": n,
        "items": [dataset[i] for i in range(min(n, limit))],
        "is_dataset": isinstance(dataset, Dataset),
    }


def scenario_make_loader(
    fn: Callable,
    ids: Any,
    batch_size: int,
    context_length: int,
    stride: int,
    epochs: int = 1,
    **options: Any,
) -> dict:
    torch.manual_seed(0)  # the global random state, to see whether the loader draws from it
    loader = fn(ids, batch_size, context_length, stride, **options)
    global_before = torch.random.get_rng_state()
    batches = [[list(batch) for batch in loader] for _ in range(epochs)]
    generator = getattr(loader, "generator", None)
    seed = generator.initial_seed() if isinstance(generator, torch.Generator) else None
    return {
        "is_loader": isinstance(loader, DataLoader),
        "epochs": batches,
        "generator_seed": seed,
        "global_drawn": not torch.equal(global_before, torch.random.get_rng_state()),
    }


def scenario_train_step(
    fn: Callable, model: dict, optimizer: dict, steps: list[dict], start_training: bool = False
) -> dict:
    net = ToyLM(**model)
    opt = make_optimizer(net, **optimizer)
    net.train(start_training)
    losses, params, lists = [], [], []
    for step in steps:
        options = {k: v for k, v in step.items() if k != "micro_batches"}
        lists.append(_batches(step["micro_batches"]))
        losses.append(fn(net, lists[-1], opt, **options))
        params.append(_params(net))
    return {
        "losses": losses,
        "params": params,
        "micro_batches_after": lists,  # the caller's lists, as the function left them
        "grads": [None if p.grad is None else p.grad.detach().clone() for p in net.parameters()],
        "records": net.records,
    }


def scenario_evaluate(
    fn: Callable, model: dict, batches: list, start_training: bool = True, one_shot: bool = False
) -> dict:
    net = ToyLM(**model)
    net.train(start_training)
    before = _params(net)
    data = (batch for batch in _batches(batches)) if one_shot else _batches(batches)
    loss = fn(net, data)
    return {
        "loss": loss,
        "batches_after": None if one_shot else data,  # the caller's list, as evaluate left it
        "training_after": net.training,
        "records": net.records,
        "changed": any(not torch.equal(a, b) for a, b in zip(before, _params(net), strict=True)),
        "grads": [p.grad is not None for p in net.parameters()],
    }


def scenario_fit(
    fn: Callable,
    model: dict,
    optimizer: dict,
    train: dict,
    steps: int,
    grad_accum: int,
    lr_base: float,
    lr_decay: float,
    eval_batches: list | None = None,
    eval_every: int | None = None,
) -> dict:
    net = ToyLM(**model)
    opt = make_optimizer(net, **optimizer)
    seen: list[list[float]] = []
    opt.register_step_pre_hook(lambda o, a, k: seen.append([g["lr"] for g in o.param_groups]))
    if "seed" in train:  # a shuffling DataLoader: a fresh iter() reshuffles
        x, y = train["tensors"]
        train_batches: Iterable = DataLoader(
            torch.utils.data.TensorDataset(x, y),
            batch_size=train["batch_size"],
            shuffle=True,
            generator=torch.Generator().manual_seed(train["seed"]),
        )
    else:
        train_batches = _batches(train["batches"])

    def schedule(step: int) -> float:
        return lr_base * lr_decay**step

    history = fn(
        net,
        opt,
        train_batches,
        steps=steps,
        grad_accum=grad_accum,
        lr_schedule=schedule,
        eval_batches=None if eval_batches is None else _batches(eval_batches),
        eval_every=eval_every,
    )
    after = train_batches if isinstance(train_batches, list) else None  # as fit left it
    return {"history": history, "step_lrs": seen, "params": _params(net), "train_after": after}


def scenario_generate(
    fn: Callable,
    model: dict,
    ids: Tensor,
    max_new_tokens: int,
    context_length: int,
    seed: int | None = None,
    **options: Any,
) -> dict:
    net = ToyLM(**model)
    net.eval()
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    prompt = ids.clone()
    out = fn(net, prompt, max_new_tokens, context_length, generator=generator, **options)
    return {"ids": out, "records": net.records, "prompt_after": prompt}


def scenario_grad(
    fn: Callable,
    args: list,
    wrt: list[int],
    kwargs: dict | None = None,
    weights: Tensor | None = None,
) -> dict:
    """The gradients of ``out`` (or of ``(out * weights).sum()``) with respect to ``args[wrt]``;
    None for each where the output is not connected to the inputs at all."""
    args = [a.clone().requires_grad_(True) if i in wrt else a for i, a in enumerate(args)]
    out = fn(*args, **(kwargs or {}))
    if not isinstance(out, Tensor):
        raise TypeError(f"expected a tensor to differentiate, got {type(out).__name__}")
    if not out.requires_grad:  # detached: no gradient can reach the inputs
        return {"value": out.detach(), "grads": [None for _ in wrt]}
    out.backward(weights)
    return {"value": out.detach(), "grads": [args[i].grad for i in wrt]}


def scenario_sample(
    fn: Callable,
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    draws: int = 1,
) -> dict:
    """``draws`` calls with one seeded generator, then what that generator gives next: a
    function that draws with the caller's generator advances it exactly as PyTorch's draw does."""
    generator = torch.Generator().manual_seed(seed)
    samples = [fn(logits, temperature, top_k, generator) for _ in range(draws)]
    return {"samples": samples, "next": torch.randint(0, 2**30, (4,), generator=generator)}


# The scenarios that make an optimizer (which imports torch._dynamo: see serve_lessons).
OPTIMIZING_SCENARIOS = frozenset({"train_step", "evaluate", "fit"})
SCENARIOS: dict[str, Callable[..., dict]] = {
    "token_windows": scenario_token_windows,
    "make_loader": scenario_make_loader,
    "train_step": scenario_train_step,
    "evaluate": scenario_evaluate,
    "fit": scenario_fit,
    "generate": scenario_generate,
    "grad": scenario_grad,
    "sample": scenario_sample,
}


# --------------------------------------------------------------------------------------------
# The worker process


class Worker:
    def __init__(self, target: str, requests: int, answers: int) -> None:
        self.target = os.path.abspath(target)
        self.student = self.target + os.sep  # where the student's frames come from
        self.package: types.ModuleType | None = None
        self.requests, self.answers = requests, answers
        self.proxies = make_proxies(self.ask)

    def ask(self, name: str, question: Any) -> Any:
        """A proxy's question to the checker, answered while the request is still running."""
        write_frame(self.answers, encode({"ask": name, "question": question}))
        frame = read_frame(self.requests)
        if frame is None:
            raise SystemExit(3)
        reply = decode(frame)
        if not reply.get("ok"):
            raise DependencyRefused(str(reply.get("error", "refused")))
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
        names = [n for n in names if isinstance(n, str) and n.isidentifier()]
        if fresh:
            self.proxies.tables.clear()
        module = self.import_module(function.partition(".")[0]) if names else None
        missing = object()
        saved = {name: getattr(module, name, missing) for name in names}
        for name in names:
            setattr(module, name, self.proxies[name])
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is missing:
                    delattr(module, name)
                else:
                    setattr(module, name, value)

    def watched_call(
        self, fn: Callable, request: dict, proxied: Any, args: Iterable, kwargs: dict
    ) -> Any:
        result: list = []
        with proxied, watched(request.get("rule"), (args, kwargs), result, self.student):
            value = fn(*args, **kwargs)
            result.append(value)
        return value

    def handle(self, request: dict) -> dict:
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
            # The inputs are held in tuples, which the student's code cannot refill.
            args = tuple(revive(request["args"]))
            kwargs = tuple(revive(request["kwargs"]).items())
            randomness = _random_state()
            value = self.watched_call(fn, request, proxied, args, dict(kwargs))
            answer = {"ok": True, "value": pack(value)}
            if request.get("return_inputs"):
                # What the call left its inputs as, and its answer when called again on the
                # very same objects (the random state and seeded generators as before): the
                # checker compares both with its own, so a function that changed its inputs
                # must also undo what that does to its next answer, not just to this report.
                # Inputs that nothing can change (a text, numbers) need no second call.
                answer["inputs"] = pack([strip(list(args)), strip(dict(kwargs))])
                if _unchangeable((args, kwargs)):
                    answer["again"] = answer["value"]
                    return answer
                # The first run is over: the checker starts the second one's clock.
                write_frame(self.answers, encode({"ran": 1}))
                again = [reseed(a, sent) for a, sent in zip(args, request["args"], strict=True)]
                again_kwargs = {k: reseed(v, request["kwargs"][k]) for k, v in kwargs}
                _set_random_state(randomness)
                names = list(request.get("proxies", ()))
                proxied = self.proxied(function, names, fresh=False)
                answer["again"] = pack(self.watched_call(fn, request, proxied, again, again_kwargs))
            return answer
        config = revive(request["config"])
        with proxied, watched(request.get("rule"), config, student=self.student):
            value = SCENARIOS[request["name"]](fn, **config)
        return {"ok": True, "value": pack(value)}

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


def revive(obj: Any) -> Any:
    """Requests are plain data; ``{GENERATOR: seed}`` stands for a seeded torch.Generator."""
    if isinstance(obj, dict):
        if set(obj) == {GENERATOR}:
            return torch.Generator().manual_seed(obj[GENERATOR])
        return {k: revive(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [revive(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(revive(v) for v in obj)
    return obj


def _unchangeable(obj: Any) -> bool:
    """Whether no call can change ``obj`` in place (a generator's draws aside)."""
    if isinstance(obj, tuple):
        return all(_unchangeable(item) for item in obj)
    return obj is None or isinstance(obj, str | bytes | int | float | complex | torch.Generator)


def reseed(obj: Any, sent: Any) -> Any:
    """``obj`` again, or a fresh generator where the request had a seeded one."""
    if isinstance(sent, dict) and set(sent) == {GENERATOR}:
        return revive(sent)
    return obj


def _random_state() -> tuple:
    import random

    return torch.random.get_rng_state(), random.getstate()


def _set_random_state(state: tuple) -> None:
    import random

    torch.random.set_rng_state(state[0])
    random.setstate(state[1])


def strip(obj: Any) -> Any:
    """The inputs as plain data again (generators dropped), to see what a call changed."""
    if isinstance(obj, torch.Generator):
        return None
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(strip(v) for v in obj)
    return obj


def limits_report() -> dict:
    import resource

    names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")
    report: dict[str, Any] = {n: list(resource.getrlimit(getattr(resource, n))) for n in names}
    try:
        with open("/proc/self/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        report["CapEff"] = int(status["CapEff"].strip(), 16)
        report["CapBnd"] = int(status["CapBnd"].strip(), 16)
        report["NoNewPrivs"] = int(status.get("NoNewPrivs", "0").strip())
    except (OSError, KeyError, ValueError):
        pass
    report["cwd"] = os.getcwd()
    report["sys_path"] = list(sys.path)
    report["threads"] = torch.get_num_threads()
    report["seccomp"] = SECCOMP[0]
    return report


def _set_limit(name: str, value: int | None) -> None:
    import resource

    if value is None:
        return
    which = getattr(resource, name)
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def harden(memory: int, cpu: int, fsize: int, nproc: int) -> None:
    """Limits and lost privileges for this process and its children, before any student code.

    Address space, CPU time, file size, no core dumps, a process cap (not enforced for root by
    the kernel); then, on Linux: die with the parent, not dumpable, no new privileges, and no
    capabilities at all (so even root cannot raise the limits back).
    """
    _set_limit("RLIMIT_AS", memory)
    _set_limit("RLIMIT_CPU", cpu)
    _set_limit("RLIMIT_FSIZE", fsize)
    _set_limit("RLIMIT_CORE", 0)
    if os.geteuid() != 0:
        _set_limit("RLIMIT_NPROC", nproc)
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    _die_with_parent()
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no core dumps, no ptrace by others
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (fails harmlessly when not allowed)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    libc.capset(ctypes.byref(header), (Data * 2)())


# What graded code never needs: new threads and processes (the by-hand watch sees one thread),
# and the kernel's doors out of a sandbox or into other processes.
REFUSED_SYSCALLS = (
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv",
    "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "swapon", "swapoff", "reboot",
)  # fmt: skip


def refuse_syscalls() -> bool:
    """A seccomp filter (built with libseccomp, through ctypes: this file imports only the
    standard library and torch) that fails REFUSED_SYSCALLS with EPERM in this process and
    anything it could start, for good. False where libseccomp is not there (not Linux)."""
    import ctypes
    import errno

    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return False
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW: everything else is allowed
    if not context:
        return False
    try:
        for name in REFUSED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number >= 0:  # __NR_SCMP_ERROR (-1): not a system call on this architecture
                lib.seccomp_rule_add(context, 0x00050000 | errno.EPERM, number, 0)
        return lib.seccomp_load(context) == 0
    finally:
        lib.seccomp_release(context)


def read_frame(fd: int) -> bytes | None:
    def read(n: int) -> bytes | None:
        chunks, got = [], 0  # joined once: adding each chunk to the rest copies it all again
        while got < n:
            chunk = os.read(fd, n - got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    header = read(FRAME.size)
    if header is None:
        return None
    return read(FRAME.unpack(header)[0])


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(FRAME.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


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
    parser.add_argument("--memory", type=int, default=4 << 30)
    parser.add_argument("--cpu", type=int, default=3600)
    parser.add_argument("--fsize", type=int, default=64 << 20)
    parser.add_argument("--nproc", type=int, default=1024)
    parser.add_argument("--provided", default=None, metavar="DIR")
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
    if args.provided:
        provide(args.provided)
    write_frame(control, encode({"ok": True, "pid": os.getpid()}))
    serve_lessons(control, args.target)


def serve_lessons(control: int, target: str) -> None:
    """Fork a fresh lesson process for every ``{"op": "fork"}`` on the control channel.

    This process has imported torch but never runs the student's code, so every lesson starts
    from the same clean state in milliseconds. A lesson process gets a socket of its own
    (passed to the checker over the control channel) and no access to the control channel;
    the next fork, an ``{"op": "end"}``, or the end of the control channel kills it and
    everything it started. A fork may name another target (an unsandboxed checker keeps an
    idle worker for its next grading run, whatever that run grades), and may ask for
    torch._dynamo to be imported first (``"dynamo": True``).
    """
    import socket

    channel = socket.socket(fileno=os.dup(control))
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
            write_frame(control, encode({"ok": True}))
            continue
        graded = str(request.get("target", target))
        if request.get("dynamo"):
            # torch imports torch._dynamo (seconds) the first time a dispatch mode runs (a
            # by-hand rule's watch) or an optimizer is made: here, before the fork, it is on
            # no check's clock, and every later lesson process has it.
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


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: this process ends with its parent (Linux). This file runs standalone,
    so it keeps its own copy of core.cli.die_with_parent."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


def serve(fd: int, target: str) -> None:
    """One lesson: import the student's code and answer requests on ``fd`` until it closes."""
    os.setpgid(0, 0)  # its own group: the next fork kills whatever this one started
    _die_with_parent()  # fork clears it
    # Threads torch starts for itself start now, before the filter and any student code.
    torch.ones(1, requires_grad=True).sum().backward()
    LESSON_THREADS[0] = _threads()
    SECCOMP[0] = refuse_syscalls()
    worker = Worker(target, fd, fd)
    write_frame(fd, encode({"ok": True, "pid": os.getpid()}))
    while True:
        frame = read_frame(fd)
        if frame is None:
            return
        try:
            answer = worker.handle(decode(frame))
        except BaseException as error:  # noqa: BLE001 - SystemExit, KeyboardInterrupt too
            answer = {"ok": False, "error": worker.describe(error)}
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - the student may have closed or replaced it
            pass
        write_frame(fd, encode(answer))


if __name__ == "__main__":  # pragma: no cover - started through BOOTSTRAP instead
    main(sys.argv[1:])
