"""The checker's answers to the worker's proxies: a graded function's dependencies, computed here.

While the worker grades ``lm_loss``, the student's module sees a proxy for ``cross_entropy``
(graders/worker/proxies.py, ``make_proxies``): each call sends its inputs here, and the trusted
implementation (graders/secret/trusted.py, else the lesson's oracle of that name) answers in
the checker's process. Only plain data crosses: no trusted code, expected value or rule ever
enters the student's process. The proxies know no lesson: a model, a generator or an optimizer
crosses as a marker of its type, and the answer says what the trusted code did to it (its
gradients, its training mode, its draws, its optimizer's steps), for the worker to do to the
caller's own objects.

An ``Answers`` object belongs to one worker. It answers a question only for a dependency of
the function being graded at that moment (``allow``), only for inputs of a bounded size, and
only until the call that asks must end, so a proxy that the student's code kept, fed a huge
input, or asked a question that takes long to answer, gets a refusal instead of an answer.
Instructors' graders only: the student release leaves this file out, and its worker then
grades with the submission's own dependencies.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from core.manifest import load_manifest
from graders import answers
from graders.replayed import RAISED, Raised, Refused
from graders.worker.protocol import (
    GENERATOR_STATE,
    MODULE,
    OPTIMIZER,
    TABLE,
    TooLarge,
    decode,
    parts_of,
    too_many_operations,
)
from graders.worker.scenarios import ToyLM

from . import oracles, trusted

MAX_ELEMENTS = 1 << 22  # tensor elements in one question
MAX_INTEGER = 1 << 20  # e.g. window_starts(n_tokens, ...): the answer's size follows from it
MAX_ITEMS = 1 << 17  # list, tuple and dict entries in one question (a vocabulary fits)
MAX_PARTS = 1 << 19  # parts visited in one question, counted per visit (shared parts too)
MAX_TEXT = 4 << 20  # characters and bytes in one question, all strings and bytes together
MAX_DEPTH = 16  # nesting of lists, tuples and dicts
MAX_PIECE = 1 << 12  # bytes of one bpe_merge piece (the merge is quadratic in its length)
MAX_TABLES = 8  # ranks tables kept during one request (a call sends one or two)
DECODED_TABLES = 2  # decoded tables kept across requests and runs (by digest), the newest ones
SECRET = str(Path(__file__).resolve().parent)  # the trusted code's folder


# Tables decoded before, by their bytes' SHA-256, for every grading run of this process (the
# variants' rounds, a notebook's check cells): equal bytes decode to an equal table.
_DECODED: dict[bytes, dict] = {}
_DECODED_LOCK = threading.Lock()


TABLE_SUFFIX = ".table"


class Answers:
    """Answers one worker's proxies, for the dependencies of the function graded now."""

    def __init__(self) -> None:
        # read now, before any student code runs (which could rewrite the manifest's file)
        self.manifest = load_manifest()
        self.allowed: frozenset[str] = frozenset()
        self.vocabularies: dict[int, dict] = {}  # this request's tables (bpe_merge's ranks)
        self.tables = 0  # tables received so far: each gets a number never used before

    def names(self, function: str) -> list[str]:
        """The dependencies of ``module.function`` that this checker answers for (its
        ``builds_on`` in the manifest: this lesson's by name, an earlier one's as
        ``module.function``). While the release's answers are recorded, only the earlier
        lessons', those it calls through its own lesson's functions too: the reference then
        calls its own lesson's functions, as a released grading does, so the questions
        recorded are those a released grading asks (graders/replayed.py)."""
        if answers.is_recording():
            return list(self.manifest.earlier_dependencies(function))
        return list(self.manifest.dependencies(function))

    def allow(self, function: str | None) -> None:
        """From now on answer for ``function``'s dependencies only (None: for nothing). The
        ranks tables of the last request go: nothing the checker keeps grows across calls."""
        self.allowed = frozenset(self.names(function)) if function else frozenset()
        self.vocabularies.clear()

    def answer(self, name: Any, question: Any, deadline: float | None = None) -> Any:
        """The answer to a proxy's question, or Refused; ``deadline`` (time.monotonic) is when
        the call that asks it must end."""
        if not isinstance(name, str):
            raise Refused(f"{name!r} is not a dependency of the function being graded")
        table = name.endswith(TABLE_SUFFIX)
        dependency = name.removesuffix(TABLE_SUFFIX) if table else name
        if dependency not in self.allowed:
            raise Refused(f"{name!r} is not a dependency of the function being graded")
        _bounded(question, dependency)
        try:
            if table:
                # Bounded by its size before it is read (operations, parts, items), not by the
                # clock: under the clock's profile hook the GPT-2 ranks took 8 s to decode
                # instead of 2, and a loaded machine refused a correct submission's question.
                return self._table(question)
            with _until(deadline):
                value = self._pure(dependency, question)
        except Refused:
            raise
        except Exception as error:  # noqa: BLE001 - malformed questions from the student's code
            kind, why = type(error).__name__, f"{type(error).__name__}: {error}"
            if kind in RAISED and type(error).__module__ == "builtins":
                answers.record_dependency(dependency, question, raised=[kind, str(error)])
                raise Raised(kind, str(error)) from None
            raise Refused(f"{name} could not be answered: {why}") from None
        answers.record_dependency(dependency, question, value)
        return value

    def _pure(self, name: str, question: Any) -> list:
        """A dependency's trusted implementation, else its lesson's oracle, on the question's
        arguments: [its value, what it did to the objects it was given, whether the value is a
        Dataset's items]."""
        args, kwargs = question
        module, _, function = name.rpartition(".")  # an earlier lesson's: module.function
        check = _CHECKS.get(function)
        if check is not None:
            check(args, dict(kwargs))
        revived = _Revived(self.vocabularies)
        args, kwargs = revived.value(list(args)), revived.value(dict(kwargs))
        implementation = getattr(trusted, function, None) or oracles.named(function, module)
        if isinstance(implementation, type):  # a Dataset (TokenWindows): its items cross
            made = implementation(*args, **kwargs)
            if len(made) > MAX_ITEMS:
                raise Refused("too many items to send")
            return [[made[i] for i in range(len(made))], revived.effects(), True]
        return [implementation(*args, **kwargs), revived.effects(), False]

    def _table(self, encoded: Any) -> int:
        """A large table (bpe_merge's ranks) that the worker sends once per request, as the
        bytes of its encoding. A table whose bytes were decoded before is taken from
        ``_DECODED`` by their SHA-256: equal bytes decode to an equal table, and the GPT-2
        ranks take a second to decode and check, for every request that merges."""
        if not isinstance(encoded, bytes):
            raise Refused("a table must cross as its encoded bytes")
        if len(self.vocabularies) >= MAX_TABLES:
            raise Refused(f"more than {MAX_TABLES} tables: pass the same table again")
        digest = hashlib.sha256(encoded).digest()
        with _DECODED_LOCK:
            table = _DECODED.pop(digest, None)
        if table is None:
            table = _decoded_table(encoded)
        with _DECODED_LOCK:
            _DECODED[digest] = table  # the newest last; the oldest goes past DECODED_TABLES
            while len(_DECODED) > DECODED_TABLES:
                del _DECODED[next(iter(_DECODED))]
        self.tables += 1
        self.vocabularies[self.tables] = table
        return self.tables


def _decoded_table(encoded: bytes) -> dict:
    """A table's bytes as the dict they encode, within the bounds of any question."""
    if too_many_operations(encoded):
        raise Refused("a table too large to read")
    try:
        table = decode(encoded)
    except Exception:  # noqa: BLE001 - not plain data
        raise Refused("a table that is not plain data") from None
    if not isinstance(table, dict):
        raise Refused("a table must be a dict")
    _bounded(table)
    return table


class _Revived:
    """A question's markers (graders/worker/protocol.py) as the objects they stand for, and what the
    trusted code does to them, as the effects the worker repeats on the caller's objects."""

    def __init__(self, tables: dict[int, dict]) -> None:
        self.tables = tables
        self.modules: dict[int, ToyLM] = {}
        self.generators: dict[int, torch.Generator] = {}
        self.events: list[list] = []  # the optimizers' steps, in order

    def value(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self.value(item) for item in value)
        if not isinstance(value, dict):
            return value
        if set(value) == {MODULE}:
            slot, state, training = value[MODULE]
            self.modules[int(slot)] = model = _toy(state)
            model.train(bool(training))
            return model
        if set(value) == {GENERATOR_STATE}:
            slot, state = value[GENERATOR_STATE]
            self.generators[int(slot)] = generator = torch.Generator()
            generator.set_state(state)
            return generator
        if set(value) == {OPTIMIZER}:
            return _Steps(self, int(value[OPTIMIZER]))
        if set(value) == {TABLE}:
            if value[TABLE] not in self.tables:
                raise Refused("a table that was not sent in this request")
            return self.tables[value[TABLE]]
        return {key: self.value(item) for key, item in value.items()}

    def effects(self) -> list[list]:
        modes = [["train", slot, model.training] for slot, model in self.modules.items()]
        draws = [["generator", slot, g.get_state()] for slot, g in self.generators.items()]
        return self.events + modes + draws


class _Steps:
    """The caller's optimizer as the trusted code sees it: each step it takes is recorded
    with the gradients it would apply, for the caller's own optimizer to take in the worker."""

    def __init__(self, revived: _Revived, slot: int) -> None:
        self.revived, self.slot = revived, slot

    def step(self) -> None:
        for slot, model in self.revived.modules.items():
            grads = [None if p.grad is None else p.grad.detach() for p in model.parameters()]
            self.revived.events.append(["grads", slot, grads])
        self.revived.events.append(["step", self.slot, None])

    def zero_grad(self, set_to_none: bool = True) -> None:
        for model in self.revived.modules.values():
            model.zero_grad(set_to_none=set_to_none)
        self.revived.events.append(["zero_grad", self.slot, set_to_none])


def _short_piece(args: list, kwargs: dict) -> None:
    piece = args[0] if args else kwargs.get("piece")
    if isinstance(piece, bytes) and len(piece) > MAX_PIECE:
        raise Refused(f"a piece of more than {MAX_PIECE} bytes is too long to merge")


# What a question must be, beyond its size, for the dependencies whose cost its values set.
_CHECKS = {"bpe_merge": _short_piece}


def _toy(state: Any) -> ToyLM:
    """The grader's toy model (the only model its scenarios give a dependency), from its state."""
    if not isinstance(state, dict) or not {"wte", "wpe", "head", "bias"} <= set(state):
        raise Refused("the model is not the grader's toy model")
    vocab, dim = state["wte"].shape
    model = ToyLM(vocab=vocab, dim=dim, context_length=state["wpe"].shape[0])
    model.load_state_dict(state)
    return model


# Dependencies whose cost does not grow with a table they are given, only with the ids they
# read from it: lookup(GPT-2's token table, ids) is a gather, and that table alone holds 4.8
# million numbers in the check that gives gpt_logits GPT-2's shapes.
MAX_ELEMENTS_OF = {"embeddings.lookup": 1 << 24}


def _bounded(question: Any, name: str = "") -> None:
    """Refuse questions too big to answer quickly: every part is counted each time it is
    reached (a list that repeats its own rows costs its full size), and strings, bytes, dict
    keys and nesting have bounds of their own."""
    elements = text = 0
    most = MAX_ELEMENTS_OF.get(name, MAX_ELEMENTS)
    try:
        for item in parts_of(question, MAX_PARTS, MAX_DEPTH):
            if isinstance(item, Tensor):
                elements += item.numel()
                if elements > most:
                    raise Refused("tensors too large for the grader to answer")
            elif isinstance(item, str | bytes):
                text += len(item)
                if text > MAX_TEXT:
                    raise Refused("text too long for the grader to answer")
            elif isinstance(item, bool | float) or item is None:
                continue
            elif isinstance(item, int):
                if abs(item) > MAX_INTEGER:
                    raise Refused(f"an integer of {item} is too large for the grader to answer")
            elif isinstance(item, list | tuple | dict):
                if len(item) > MAX_ITEMS:
                    raise Refused("a list or table too long for the grader to answer")
            else:
                raise Refused(f"a {type(item).__name__} is not plain data")
    except TooLarge:
        why = "a question too large or too deeply nested for the grader to answer"
        raise Refused(why) from None


@contextmanager
def _until(deadline: float | None) -> Iterator[None]:
    """Refuse the question if answering it is still running at ``deadline`` (time.monotonic):
    a profile hook looks at the clock on every call the trusted code makes (each of its loops
    calls something), so no question outlives the call that asked it."""
    if deadline is None:
        yield
        return
    before = sys.getprofile()

    def hook(frame: Any, event: str, arg: Any) -> None:
        # Only in the trusted code's own frames: the hook is gone once it raises, and the
        # error must end the answer, not a callback that the collector runs meanwhile.
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(SECRET):
            if time.monotonic() > deadline:
                raise Refused("the question took longer than the call may take")

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(before)
