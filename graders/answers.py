"""Expected answers for the checks: computed live by the instructor's oracles, or replayed from
data recorded at release time, so that the student release holds no solution code.

A public check computes no answer itself; it asks this module, by the name of a function of
graders/secret/oracles/:

    from graders.answers import later, oracle

    expect_close(
        student.call("lookup", table, ids),
        oracle.lookup(table, ids),                                # the right answer
        "lookup(table, ids)",
        mistakes={"off-by-one": later.lookup(table, ids, mistake="off-by-one")},
    )

``oracle.NAME(*args, **kwargs)`` returns ``graders.secret.oracles.NAME(*args, **kwargs)``;
``later.NAME(...)`` is the same answer as a :class:`Deferred`, computed only when a diagnosis
needs it (``checking.diagnose`` resolves it; ``.get()`` elsewhere, ``.then(f)`` for a part of
it). Arguments and answers are plain data: tensors, numbers, strings, bytes, lists, tuples and
dicts of them, None.

Three modes:

* **live** (the instructor's grader tree, which holds graders/secret/):
  the oracle runs. Hidden checks, instructor autograde and the project's tests all grade live.
* **recording** (:func:`recording`; instructor/release.py grades solutions/ with the
  public checks in this mode): live, and every answer is kept, per lesson, under a digest of the
  oracle's name and arguments; ``later`` answers are computed at once, so that the answers of a
  check's failure paths (its diagnoses) are recorded as well.
* **replay** (the student release, which has no graders/secret/oracles/): answers come from
  ``graders/public/answers_<lesson>.pt`` (``torch.save`` of plain data, read with
  ``weights_only=True``), under the same digest. An answer that was not recorded fails its
  check with :class:`AnswerMissing`, never silently.

The digest covers every bit of the arguments, so the inputs a released check builds must be
bit for bit those of the recording. Integer inputs and literals are; but torch's normal samples
differ in their last bits between CPUs (it uses vectorised code where it can), and generators
may change between torch versions. So every function that builds random inputs is decorated
with :func:`recorded`: it is recorded like an answer, and in replay mode it returns the
recorded inputs (computing them only when none were recorded).

**Secret inputs** (:func:`secret_inputs`): the release holds every public check's inputs and
answers, so a submission could look its answers up by the digest of what it is given. Where a
grade is decided (instructor autograde, the Gradescope autograder) the checker therefore draws
every input from a secret seed instead of the public one: :func:`drawn` mixes it into each
input builder's own seed (graders/checking.py), and the answers are computed live. The seed
comes from the environment variable ``COURSE_INPUT_SEED`` of the grading run
(:func:`graders.seed.seed_from_environment`, which removes it before any worker starts); the
student's own grading and the project's tests use :data:`PUBLIC_SEED`, with which every input
is the release's.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .seed import PUBLIC_SEED

FORMAT = 1
HERE = Path(__file__).resolve().parent
FILES = "answers_*.pt"  # in graders/public/: answers_<lesson>.pt
_UNSET = object()
_MISSING = object()

_oracles: Any = _UNSET  # graders.secret.oracles, or None where it is not installed (replay)
_recording: dict[str, dict[str, Any]] | None = None  # lesson -> digest -> value
_lesson: str | None = None  # the lesson of the check running now (set by graders.plugin)
_replay: dict[str, Any] | None = None
_input_seed = PUBLIC_SEED


class AnswerMissing(RuntimeError):
    """Replay mode: no answer was recorded for this question (a bug of the release)."""


def oracles() -> ModuleType | None:
    """graders.secret.oracles where it is installed (the instructor's tree), else None (replay)."""
    global _oracles
    if _oracles is _UNSET:
        from .secret_half import installed_secret

        _oracles = installed_secret("oracles")
    return _oracles


def live() -> bool:
    return oracles() is not None


def prepare() -> None:
    """Import the oracles, or read the recorded answers, now: graders.runner calls this before
    any student code runs (without a sandbox, that code could rewrite the grader tree's files;
    whatever is loaded before stays as it was)."""
    module = oracles()
    if module is None:
        _table()
    else:
        module.lesson_modules()


# -- asking -------------------------------------------------------------------------------------


def answer(name: str, args: tuple, kwargs: dict) -> Any:
    """``graders.secret.oracles.NAME(*args, **kwargs)``, live or replayed (module docstring)."""
    module = oracles()
    if module is None:
        value = _lookup(name, args, kwargs)
        if value is _MISSING:
            raise AnswerMissing(
                f"this release recorded no answer for {name}() with these arguments "
                "(a bug of the course's release: please report it)"
            )
        return value
    value = module.named(name)(*args, **kwargs)  # not getattr: NAME may be a module's name
    _record(name, args, kwargs, value)
    return value


class Deferred:
    """An answer computed on first use: a diagnosis' answers cost nothing while a check passes."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._value: Any = _UNSET

    def get(self) -> Any:
        if self._value is _UNSET:
            self._value = self._compute()
        return self._value

    def then(self, function: Callable[[Any], Any]) -> Deferred:
        """A part of this answer (``function`` of it), also deferred."""
        return Deferred(lambda: function(self.get()))


def resolve(value: Any) -> Any:
    return value.get() if isinstance(value, Deferred) else value


class _Oracles:
    """``oracle.NAME(...)`` (at once) and ``later.NAME(...)`` (a Deferred)."""

    def __init__(self, deferred: bool) -> None:
        self._deferred = deferred

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def ask(*args: Any, **kwargs: Any) -> Any:
            if not self._deferred:
                return answer(name, args, kwargs)
            deferred = Deferred(lambda: answer(name, args, kwargs))
            if _recording is not None or not live():
                deferred.get()  # recording: every diagnosis' answer; replay: a lookup
            return deferred

        ask.__name__ = name
        return ask


oracle = _Oracles(deferred=False)
later = _Oracles(deferred=True)


def recorded(function: Callable[..., Any]) -> Callable[..., Any]:
    """A builder of check inputs whose results are recorded and replayed like answers."""
    name = f"{function.__module__.rpartition('.')[2]}.{function.__qualname__}"

    @functools.wraps(function)
    def build(*args: Any, **kwargs: Any) -> Any:
        if not live():
            value = _lookup(name, args, kwargs)
            if value is not _MISSING:
                return value
            return function(*args, **kwargs)
        value = function(*args, **kwargs)
        _record(name, args, kwargs, value)
        return value

    return build


# -- the inputs' seed ---------------------------------------------------------------------------


@contextmanager
def secret_inputs(seed: int) -> Iterator[None]:
    """Draw every check's inputs from ``seed`` while the block runs (``PUBLIC_SEED``: the
    release's inputs). A secret seed needs the oracles (nothing recorded answers its inputs)
    and is never recorded."""
    global _input_seed
    if seed != PUBLIC_SEED and not live():
        raise RuntimeError(
            "secret inputs need the oracles (graders/secret/), which this tree does not have"
        )
    if seed != PUBLIC_SEED and _recording is not None:
        raise RuntimeError("answers are recorded with the public inputs only")
    saved, _input_seed = _input_seed, int(seed)
    try:
        yield
    finally:
        _input_seed = saved


def is_secret() -> bool:
    """Whether the inputs are drawn from a secret seed now (not the release's)."""
    return _input_seed != PUBLIC_SEED


def drawn(seed: int) -> int:
    """The seed an input builder starts its generator from: ``seed`` itself with the public
    seed (the release's inputs), else a 63-bit mix of it with the secret seed, which nobody can
    tell from the inputs it gives."""
    if _input_seed == PUBLIC_SEED:
        return seed
    mixed = hashlib.sha256(b"course-inputs:%d:%d" % (_input_seed, seed)).digest()
    return int.from_bytes(mixed[:8], "little") >> 1


# -- recording ----------------------------------------------------------------------------------


@contextmanager
def recording() -> Iterator[dict[str, dict[str, Any]]]:
    """Record every answer and recorded input asked for while the block runs, per lesson."""
    global _recording
    if not live():
        raise RuntimeError(
            "answers can be recorded only where graders/secret/oracles/ is installed"
        )
    if _recording is not None:
        raise RuntimeError("already recording")
    if is_secret():
        raise RuntimeError("answers are recorded with the public inputs only")
    _recording = {}
    try:
        yield _recording
    finally:
        _recording = None


@contextmanager
def lesson(slug: str | None) -> Iterator[None]:
    """The lesson whose check runs in the block (answers are recorded under it)."""
    global _lesson
    saved, _lesson = _lesson, slug
    try:
        yield
    finally:
        _lesson = saved


def _record(name: str, args: tuple, kwargs: dict, value: Any) -> None:
    if _recording is None:
        return
    if _lesson is None:
        raise RuntimeError(f"{name}() was asked for outside a check: it cannot be recorded")
    _recording.setdefault(_lesson, {})[digest(name, args, kwargs)] = copy.deepcopy(value)


# -- earlier lessons' functions, as the worker's proxies asked for them ------------------------

DEPENDENCY = "builds-on:"  # the key of a recorded question: DEPENDENCY + name + ":" + digest
DIGESTED = "sha256"  # a tensor too large to record, as its digest (and shape and dtype)
RECORDED_ELEMENTS = 1 << 16  # larger tensors of a question are recorded as their digest
_dependencies: dict[str, list[dict]] | None = None  # replay: name -> recorded entries


def is_recording() -> bool:
    return _recording is not None


def record_dependency(
    name: str, question: Any, value: Any = None, raised: list[str] | None = None
) -> None:
    """Recording: the question a proxy asked of an earlier lesson's function (``name`` is
    ``module.function``) and its answer, or the error it raised (graders/replayed.py replays
    them). Its own lesson's functions are not proxied while recording, so none comes here."""
    if _recording is None or "." not in name:
        return
    if _lesson is None:
        raise RuntimeError(f"{name}() was asked for outside a check: it cannot be recorded")
    entry: dict[str, Any] = {"question": _compact(question)}
    if raised is None:
        entry["value"] = copy.deepcopy(value)
    else:
        entry["raised"] = list(raised)
    key = f"{DEPENDENCY}{name}:{digest(name, tuple(question), {})}"
    _recording.setdefault(_lesson, {})[key] = entry


def recorded_dependency(name: str, question: Any, matches: Callable[[Any, Any], bool]) -> Any:
    """Replay: the entry recorded for ``name`` whose question ``matches`` this one, or None."""
    global _dependencies
    if _dependencies is None:
        _dependencies = {}
        for key, entry in _table().items():
            if key.startswith(DEPENDENCY) and isinstance(entry, dict):
                recorded = key[len(DEPENDENCY) :].rpartition(":")[0]
                _dependencies.setdefault(recorded, []).append(entry)
    for entry in _dependencies.get(name, ()):
        if matches(entry.get("question"), question):
            return copy.deepcopy(entry)
    return None


def digested(tensor: torch.Tensor) -> dict[str, Any]:
    """A tensor as its digest, its dtype and shape."""
    h = hashlib.sha256()
    _feed(h, tensor)
    return {DIGESTED: h.hexdigest(), "dtype": str(tensor.dtype), "shape": list(tensor.shape)}


def _compact(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.numel() > RECORDED_ELEMENTS:
            return digested(value)
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(_compact(item) for item in value)
    if isinstance(value, dict):
        return {key: _compact(item) for key, item in value.items()}
    return value


def save(answers: dict[str, Any], path: Path, lesson: str) -> None:
    """Write one lesson's recorded answers, and check that they read back as plain data."""
    torch.save({"format": FORMAT, "lesson": lesson, "answers": answers}, path)
    data = torch.load(path, weights_only=True)
    if set(data["answers"]) != set(answers):
        raise ValueError(f"{path}: the recorded answers do not read back")


# -- replay -------------------------------------------------------------------------------------


def _table() -> dict[str, Any]:
    global _replay
    if _replay is None:
        table: dict[str, Any] = {}
        for path in sorted((HERE / "public").glob(FILES)):
            data = torch.load(path, weights_only=True)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise AnswerMissing(f"{path.name} is not a file of recorded answers")
            table.update(data["answers"])
        _replay = table
    return _replay


def _lookup(name: str, args: tuple, kwargs: dict) -> Any:
    value = _table().get(digest(name, args, kwargs), _MISSING)
    return value if value is _MISSING else copy.deepcopy(value)


# -- the digest ---------------------------------------------------------------------------------


def digest(name: str, args: tuple, kwargs: dict) -> str:
    """A digest of a question: the oracle's name and every bit of its arguments."""
    h = hashlib.sha256()
    _feed(h, name)
    _feed(h, tuple(args))
    _feed(h, dict(kwargs))
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    if obj is None:
        h.update(b"N;")
    elif isinstance(obj, bool):
        h.update(b"B1;" if obj else b"B0;")
    elif isinstance(obj, int):
        h.update(b"I%d;" % obj)
    elif isinstance(obj, float):
        h.update(b"F" + obj.hex().encode() + b";")
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        h.update(b"S%d:" % len(data) + data)
    elif isinstance(obj, bytes):
        h.update(b"Y%d:" % len(obj) + obj)
    elif isinstance(obj, torch.dtype):
        h.update(b"D" + str(obj).encode() + b";")
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().resolve_conj().resolve_neg().contiguous()
        h.update(b"T" + str(t.dtype).encode() + str(list(t.shape)).encode() + b":")
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, list | tuple):
        h.update(b"L" if isinstance(obj, list) else b"U")
        h.update(b"%d[" % len(obj))
        for item in obj:
            _feed(h, item)
        h.update(b"]")
    elif isinstance(obj, dict):
        entries = []
        for key, value in obj.items():
            k, v = hashlib.sha256(), hashlib.sha256()
            _feed(k, key)
            _feed(v, value)
            entries.append(k.digest() + v.digest())
        h.update(b"M%d{" % len(entries) + b"".join(sorted(entries)) + b"}")
    else:
        raise TypeError(f"an answer's arguments must be plain data, not {type(obj).__name__}")
