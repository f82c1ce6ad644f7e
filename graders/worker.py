"""The grading worker: the one process that runs the student's code.

The checker (pytest, in another process) sends requests as plain data; the worker imports the
student's package, calls one function (or runs a small trusted *scenario* around it, such as
"build a toy model, run the student's train_step, return the new parameters"), and answers
with plain data. Both directions are ``torch.save`` bytes; the checker reads answers with
``torch.load(weights_only=True)``, so nothing the student returns can run code in the checker.

This file runs standalone. ``graders.client`` starts ``python -I -c BOOTSTRAP --target DIR ...``
and sends this file's source on standard input, then graders/trusted.py's (the trusted
implementations plugged in for a function's dependencies; an empty frame where that file is
absent, as in the student release), so the worker needs no file of the grader tree (a sandbox
need not show it any) and imports only the standard library, torch and regex. The checker
imports this module as well, for the pieces both sides share: the framing, the toy model and
the scenarios. This file holds no solution of any exercise: it ships to students.

Requests (a dict each):
    {"op": "import", "module": "embeddings"}
    {"op": "call", "function": "embeddings.lookup", "args": [...], "kwargs": {...},
     "return_inputs": True}
    {"op": "scenario", "name": "train_step", "function": "training.train_step", "config": {...}}
    {"op": "limits"}
Answers: {"ok": True, "value": PACKED, "inputs": PACKED} or {"ok": False, "error": {...}}, where
PACKED is {"type": name, "payload": torch.save bytes or None, "error": why not}: the value is
packed apart so that an answer that is not plain data still arrives as a readable failure.
"""

from __future__ import annotations

import argparse
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


def pack(value: Any) -> dict:
    """A value as a separately decodable payload, or why it could not be saved."""
    try:
        kind = type(value).__qualname__
    except Exception:  # a hostile metaclass
        kind = "?"
    try:
        return {"type": kind, "payload": encode(value), "error": None}
    except BaseException as error:  # noqa: BLE001 - anything the student's object raises
        return {"type": kind, "payload": None, "error": _safe_str(error)}


def _safe_str(obj: object) -> str:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


# --------------------------------------------------------------------------------------------
# Trusted dependencies. While one function is graded, the names of its own module that it builds
# on are replaced by trusted implementations (lm_loss gets a correct cross_entropy, fit a
# correct train_step, ...), so that every check grades one function. Those implementations are
# reference solutions, so they live in graders/trusted.py, which the student release leaves
# out: the checker sends its source as the second frame on standard input (an empty frame
# where the file is absent), and main() runs it before any student code. Without it (a
# student's released copy of the graders) TRUSTED stays empty and a function runs with the
# submission's own versions of its dependencies: locally, a check of ``fit`` uses your own
# ``train_step``; at the instructor's autograde, which grades with the full grader tree, the
# trusted one.

TRUSTED: dict[str, Any] = {}
# While a function runs, these names of its own module are the trusted ones.
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "tokens.encode": ("split_pieces", "bpe_merge"),
    "objective.lm_loss": ("cross_entropy",),
    "windows.TokenWindows": ("shift", "window_starts"),
    "windows.make_loader": ("TokenWindows",),
    "training.fit": ("train_step", "evaluate"),
    "generation.generate": ("sample_next",),
}


# --------------------------------------------------------------------------------------------
# Forbidden library calls. Some exercises are about computing a thing by hand: while the
# student's version of such a function runs (a call or a scenario of that very function, not
# of another one that uses it: lm_loss may call F.cross_entropy or its own cross_entropy
# freely), the library functions that would do the work for it are replaced by a stand-in that
# raises ForbiddenCall, and restored afterwards; names the student's module imported from
# them are replaced as well. The checker turns a ForbiddenCall into a failed check whose hint
# is its message. Softmax stays allowed: it is not log-sum-exp, and the mean of
# -log(softmax(z)[y]) is a (less stable) way to compute cross-entropy by hand.

BY_HAND = (
    "cross_entropy must compute log-sum-exp by hand (lesson 5): don't call F.cross_entropy / "
    "logsumexp / log_softmax"
)
FORBIDDEN: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "objective.cross_entropy": (
        BY_HAND,
        (
            ("torch.nn.functional", "cross_entropy"),
            ("torch.nn.functional", "log_softmax"),
            ("torch", "logsumexp"),
            ("torch", "log_softmax"),
            ("torch.special", "logsumexp"),
            ("torch.special", "log_softmax"),
            ("torch.Tensor", "logsumexp"),
            ("torch.Tensor", "log_softmax"),
        ),
    ),
}


class ForbiddenCall(RuntimeError):
    """The student's code called a library function that its exercise asks to write by hand."""


def _owner(path: str) -> Any:
    if path == "torch.Tensor":
        return torch.Tensor
    return importlib.import_module(path)


def _stand_in(message: str, name: str) -> Callable:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenCall(f"{message} (called {name})")

    return forbidden


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
    loader = fn(ids, batch_size, context_length, stride, **options)
    return {
        "is_loader": isinstance(loader, DataLoader),
        "epochs": [[list(batch) for batch in loader] for _ in range(epochs)],
    }


def scenario_train_step(
    fn: Callable, model: dict, optimizer: dict, steps: list[dict], start_training: bool = False
) -> dict:
    net = ToyLM(**model)
    opt = make_optimizer(net, **optimizer)
    net.train(start_training)
    losses, params = [], []
    for step in steps:
        options = {k: v for k, v in step.items() if k != "micro_batches"}
        losses.append(fn(net, _batches(step["micro_batches"]), opt, **options))
        params.append(_params(net))
    return {
        "losses": losses,
        "params": params,
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
    return {"history": history, "step_lrs": seen, "params": _params(net)}


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
    out = fn(net, ids, max_new_tokens, context_length, generator=generator, **options)
    return {"ids": out, "records": net.records}


def scenario_grad(fn: Callable, args: list, wrt: list[int], kwargs: dict | None = None) -> dict:
    args = [a.clone().requires_grad_(True) if i in wrt else a for i, a in enumerate(args)]
    out = fn(*args, **(kwargs or {}))
    if not isinstance(out, Tensor):
        raise TypeError(f"expected a tensor to differentiate, got {type(out).__name__}")
    out.backward()
    return {"value": out.detach(), "grads": [args[i].grad for i in wrt]}


SCENARIOS: dict[str, Callable[..., dict]] = {
    "token_windows": scenario_token_windows,
    "make_loader": scenario_make_loader,
    "train_step": scenario_train_step,
    "evaluate": scenario_evaluate,
    "fit": scenario_fit,
    "generate": scenario_generate,
    "grad": scenario_grad,
}


# --------------------------------------------------------------------------------------------
# The worker process


class Worker:
    def __init__(self, target: str) -> None:
        self.target = os.path.abspath(target)
        self.package: types.ModuleType | None = None

    def import_module(self, module: str) -> types.ModuleType:
        if self.package is None:
            init = os.path.join(self.target, "__init__.py")
            if os.path.exists(init):
                spec = importlib.util.spec_from_file_location(
                    ALIAS, init, submodule_search_locations=[self.target]
                )
                package = importlib.util.module_from_spec(spec)
                sys.modules[ALIAS] = package
                spec.loader.exec_module(package)
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
    def trusted(self, function: str) -> Iterator[None]:
        """Plug the trusted implementations of ``function``'s dependencies into its module
        (those that this worker received: none in a student's release)."""
        names = [name for name in DEPENDENCIES.get(function, ()) if name in TRUSTED]
        module = self.import_module(function.partition(".")[0]) if names else None
        missing = object()
        saved = {name: getattr(module, name, missing) for name in names}
        for name in names:
            setattr(module, name, TRUSTED[name])
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is missing:
                    delattr(module, name)
                else:
                    setattr(module, name, value)

    @contextmanager
    def forbidden(self, function: str) -> Iterator[None]:
        """Replace the library functions ``function`` must not call (FORBIDDEN) while it runs."""
        if function not in FORBIDDEN:
            yield
            return
        message, targets = FORBIDDEN[function]
        missing = object()
        saved: list[tuple[Any, str, Any]] = []
        originals: dict[int, Callable] = {}
        for path, name in targets:
            owner = _owner(path)
            original = getattr(owner, name, missing)
            if original is missing:
                continue
            stand_in = _stand_in(message, f"{path}.{name}")
            originals[id(original)] = stand_in
            saved.append((owner, name, owner.__dict__.get(name, missing)))
        module = self.import_module(function.partition(".")[0])
        for key, value in list(vars(module).items()):  # from torch import logsumexp as lse
            if id(value) in originals:
                saved.append((module, key, value))
        try:
            for owner, name, _ in saved:
                if owner is module:
                    setattr(owner, name, originals[id(getattr(owner, name))])
                else:
                    path = "torch.Tensor" if owner is torch.Tensor else owner.__name__
                    setattr(owner, name, _stand_in(message, f"{path}.{name}"))
            yield
        finally:
            for owner, name, value in reversed(saved):
                if value is missing:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)

    def handle(self, request: dict) -> dict:
        op = request["op"]
        if op == "import":
            self.import_module(request["module"])
            return {"ok": True}
        if op == "limits":
            return {"ok": True, "value": pack(limits_report())}
        if op == "call":
            fn = self.resolve(request["function"])
            args, kwargs = revive(request["args"]), revive(request["kwargs"])
            with self.trusted(request["function"]), self.forbidden(request["function"]):
                value = fn(*args, **kwargs)
            answer = {"ok": True, "value": pack(value)}
            if request.get("return_inputs"):
                answer["inputs"] = pack([strip(args), strip(kwargs)])
            return answer
        if op == "scenario":
            fn = self.resolve(request["function"])
            config = revive(request["config"])
            with self.trusted(request["function"]), self.forbidden(request["function"]):
                value = SCENARIOS[request["name"]](fn, **config)
            return {"ok": True, "value": pack(value)}
        raise ValueError(f"unknown request {op!r}")

    def describe(self, error: BaseException) -> dict:
        kind = type(error)
        where = None
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if frame.filename.startswith(self.target + os.sep):
                where = f"{os.path.relpath(frame.filename, self.target)}, line {frame.lineno}"
                break
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
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
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


def read_frame(fd: int) -> bytes | None:
    def read(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    header = read(FRAME.size)
    if header is None:
        return None
    return read(FRAME.unpack(header)[0])


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(FRAME.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def load_trusted(source: str) -> None:
    """Run graders/trusted.py's source as a module of its own; its TRUSTED become ours."""
    module = types.ModuleType("grader_trusted")
    sys.modules[module.__name__] = module
    exec(compile(source, "<grader trusted>", "exec"), module.__dict__)
    TRUSTED.update(module.TRUSTED)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="grader worker")
    parser.add_argument("--target", required=True)
    parser.add_argument("--memory", type=int, default=4 << 30)
    parser.add_argument("--cpu", type=int, default=3600)
    parser.add_argument("--fsize", type=int, default=64 << 20)
    parser.add_argument("--nproc", type=int, default=1024)
    parser.add_argument("--preload", action="append", default=[], metavar="MODULE")
    args = parser.parse_args(argv)
    # The protocol moves to private descriptors; the student's prints go to standard error
    # (which the checker drains and caps) and input() reads nothing.
    requests, answers = os.dup(0), os.dup(1)
    trusted = read_frame(requests)  # graders/trusted.py's source, or empty where it is absent
    if trusted is None:
        raise SystemExit(3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    harden(args.memory, args.cpu, args.fsize, args.nproc)
    import faulthandler

    faulthandler.enable(sys.stderr)
    sys.dont_write_bytecode = True
    torch.set_num_threads(1)
    for module in args.preload:  # slow first imports, done before any call is timed
        importlib.import_module(module)
    if trusted:
        load_trusted(trusted.decode("utf-8"))
    worker = Worker(args.target)
    write_frame(answers, encode({"ok": True, "pid": os.getpid()}))
    while True:
        frame = read_frame(requests)
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
        write_frame(answers, encode(answer))


if __name__ == "__main__":  # pragma: no cover - started through BOOTSTRAP instead
    main(sys.argv[1:])
