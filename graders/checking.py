"""What grader tests use to judge a student's answer: validation, comparison, diagnosis.

Everything a student's function returns reaches the checker as plain data (see
graders/worker/protocol.py). A test validates it here, in the checker's own torch, and fails with
``CheckFailed``: a ``detail`` (what was wrong, shown for public checks only) and optionally
the key of a diagnosed ``mistake`` from the check's ``[lesson.check.mistakes]`` table in
course/lessons.toml, whose text becomes the hint. Name a mistake only when the answer shows it
(it equals what that mistake gives, or the error is the one it raises). Without a diagnosis
the hint is the check's default one, which says what behaviour the check expects; the detail
then carries the got and expected values.

    out = student.call("lookup", table, ids)
    expect_close(out, oracle.lookup(table, ids), "lookup(table, ids)",
                 mistakes={"off-by-one": later.lookup(table, ids, mistake="off-by-one")})

The expected answers come from graders/answers.py (``oracle``, ``later``): the checks compute
none themselves, so that the released ones hold no solution code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any, NoReturn

import torch
from hypothesis import HealthCheck, Phase, Verbosity, settings
from torch import Tensor

from .answers import drawn, is_secret, recorded, resolve

DETAIL_LIMIT = 300


class CheckFailed(AssertionError):
    """A check failed: ``detail`` says how, ``mistake`` names a diagnosed mistake (a key of the
    check's mistakes table), ``hint`` overrides the manifest's hint (harness-level failures)."""

    def __init__(self, detail: str, mistake: str | None = None, *, hint: str | None = None):
        if len(detail) > DETAIL_LIMIT:  # a report line, not a tensor dump
            detail = detail[: DETAIL_LIMIT - 3] + "..."
        super().__init__(detail)
        self.detail = detail
        self.mistake = mistake
        self.hint = hint


class GraderUnavailable(RuntimeError):
    """The graders cannot judge at all (no worker, no GPT-2 vocabulary): not the student's fault."""


def fail(detail: str, mistake: str | None = None) -> NoReturn:
    raise CheckFailed(detail, mistake)


# Hidden checks: property-based, a fixed seed (the same inputs on every run, so a grade can be
# reproduced), no shrinking (every failing call costs time), no files (no example database).
hidden_settings = settings(
    max_examples=20,
    deadline=None,
    database=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
    report_multiple_bugs=False,
    print_blob=False,
)


# -- inputs -------------------------------------------------------------------------------------
# Every input a check builds comes from here, seeded by a number of the check's own: with the
# public seed these are the release's inputs (recorded and replayed), with a grading run's
# secret seed (instructor autograde) inputs the release never held (graders/answers.py).


def generator(seed: int) -> torch.Generator:
    """A generator of its own for a check's inputs (the secret seed mixed in where it is set)."""
    return torch.Generator().manual_seed(drawn(seed))


@recorded
def randn(seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Standard normal numbers from their own seeded generator (inputs for checks; recorded,
    see graders/answers.py)."""
    return torch.randn(*shape, generator=generator(seed)).to(dtype)


@recorded
def randint(seed: int, low: int, high: int, *shape: int) -> Tensor:
    """Integers in [low, high) from their own seeded generator (inputs for checks; recorded)."""
    return torch.randint(low, high, shape, generator=generator(seed))


def seed_for(seed: int) -> int:
    """A seed handed to the student's function (a loader's, a sampler's): ``seed`` itself with
    the public seed, else one drawn from the secret seed (below 2**31, as every library takes)."""
    return drawn(seed) % 2**31 if is_secret() else seed


def permutation(seed: int, n: int) -> Tensor:
    """An order of ``n`` rows for a check: as they are with the public seed, else drawn."""
    if not is_secret():
        return torch.arange(n)
    return torch.randperm(n, generator=generator(seed))


def uniform(seed: int, value: float, low: float, high: float) -> float:
    """A number for a check: ``value`` with the public seed, else one drawn in [low, high)."""
    if not is_secret():
        return value
    fraction = torch.rand((), generator=generator(seed), dtype=torch.float64)
    return low + (high - low) * float(fraction)


def relabel(seed: int, values: Any, low: int, high: int, keep: tuple[int, ...] = ()) -> Any:
    """Integers (a tensor or nested lists) for a check: ``values`` with the public seed, else
    their distinct values (but ``keep``) mapped in order onto others drawn from [low, high):
    which entries are equal, and which is greater, stays what the literal was written to show
    (documents in order, a pad id, ignored targets), while the numbers are new."""
    if not is_secret():
        return values
    flat = values.flatten().tolist() if isinstance(values, Tensor) else _flatten(values)
    distinct = sorted(set(flat) - set(keep))
    pool = torch.tensor([v for v in range(low, high) if v not in keep])
    if len(pool) < len(distinct):
        raise ValueError(f"relabel: [{low}, {high}) has no room for {len(distinct)} values")
    order = torch.randperm(len(pool), generator=generator(seed))[: len(distinct)]
    mapping = dict(zip(distinct, sorted(pool[order].tolist()), strict=True))
    if isinstance(values, Tensor):
        out = torch.tensor([mapping.get(v, v) for v in flat], dtype=values.dtype)
        return out.reshape(values.shape)
    return _mapped(values, mapping)


def _flatten(values: Any) -> list[int]:
    return [v for item in values for v in _flatten(item)] if isinstance(values, list) else [values]


def _mapped(values: Any, mapping: dict[int, int]) -> Any:
    if isinstance(values, list):
        return [_mapped(item, mapping) for item in values]
    return mapping.get(values, values)


LOWER = "abcdefghijklmnopqrstuvwxyz"


def letters(seed: int, text: Any) -> Any:
    """A text (str or bytes) for a check: ``text`` with the public seed, else its ASCII letters
    replaced in alphabetical order by others (an upper-case letter by its lower-case one's,
    upper-cased): the pieces, the repeats, the ties and which pair is greater stay those the
    literal was written for; everything but ASCII letters is kept."""
    if not is_secret():
        return text
    as_bytes = isinstance(text, bytes)
    chars = text.decode("latin-1") if as_bytes else text
    used = sorted({c.lower() for c in chars if c.isascii() and c.isalpha()})
    order = torch.randperm(len(LOWER), generator=generator(seed))[: len(used)]
    new = sorted(LOWER[i] for i in order.tolist())
    table = {ord(a): b for a, b in zip(used, new, strict=True)}
    table |= {ord(a.upper()): b.upper() for a, b in zip(used, new, strict=True)}
    out = chars.translate(table)
    return out.encode("latin-1") if as_bytes else out


def alphabet(seed: int) -> Callable[[Any], Any]:
    """A translation of texts (str or bytes) for a check: none with the public seed, else the
    ASCII letters swapped for others by one permutation of the alphabet, the same for every
    text it is given (a piece and the merge ranks it is merged with)."""
    if not is_secret():
        return lambda text: text
    order = torch.randperm(len(LOWER), generator=generator(seed)).tolist()
    table = {ord(a): LOWER[i] for a, i in zip(LOWER, order, strict=True)}
    table |= {ord(a.upper()): LOWER[i].upper() for a, i in zip(LOWER, order, strict=True)}

    def swap(text: Any) -> Any:
        if isinstance(text, bytes):
            return text.decode("latin-1").translate(table).encode("latin-1")
        return text.translate(table)

    return swap


def shuffle_words(seed: int, text: str) -> str:
    """A text for a check: ``text`` with the public seed, else the same words (runs without
    whitespace) in another order, each whitespace run kept where it was."""
    if not is_secret():
        return text
    parts = re.split(r"(\s+)", text)
    words = [p for p in parts if p and not p.isspace()]
    order = torch.randperm(len(words), generator=generator(seed)).tolist()
    shuffled = iter([words[i] for i in order])
    return "".join(next(shuffled) if p and not p.isspace() else p for p in parts)


def describe(value: Any) -> str:
    """A short description of a value for a detail message."""
    if isinstance(value, Tensor):
        return f"a {dtype_name(value.dtype)} tensor of shape {list(value.shape)}"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, int | float):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def summary(value: Any, limit: int = 200) -> str:
    """A bounded picture of a value for a detail message, never its full repr: type, shape,
    dtype and the first elements. It visits at most a few dozen parts, so a value that shares
    its parts (a list of a million references to one long string) costs what its start costs.
    """
    out: list[str] = []
    room = [limit, 64]  # characters, parts visited

    def put(text: str) -> None:
        out.append(text[: max(room[0], 0)])
        room[0] -= len(text)

    def walk(item: Any, depth: int) -> None:
        room[1] -= 1
        if room[0] <= 0 or room[1] <= 0:
            return
        if isinstance(item, Tensor):
            first = item.detach().flatten()[:4].tolist() if item.numel() else []
            put(f"tensor({dtype_name(item.dtype)}, shape {list(item.shape)}, first {first})")
        elif isinstance(item, str | bytes):
            put(repr(item[:40]) + ("..." if len(item) > 40 else ""))
        elif isinstance(item, bool | int | float | complex) or item is None:
            put(repr(item) if not isinstance(item, int) or abs(item) < 10**30 else "a huge int")
        elif isinstance(item, list | tuple | dict) and depth < 4:
            brackets = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}")}
            opening, closing = brackets.get(type(item), ("<", ">"))
            put(f"{type(item).__name__} of {len(item)} {opening}")
            entries = list(islice(item.items(), 8)) if isinstance(item, dict) else item[:8]
            for index, entry in enumerate(entries):
                if index:
                    put(", ")
                if isinstance(item, dict):
                    walk(entry[0], depth + 1)
                    put(": ")
                    walk(entry[1], depth + 1)
                else:
                    walk(entry, depth + 1)
            put((", ..." if len(item) > 8 else "") + closing)
        else:
            put(f"a {type(item).__name__}")

    walk(value, 0)
    text = "".join(out)
    return text if room[0] > 0 and room[1] > 0 else text + "..."


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def as_tensor(value: Any, what: str, *, kind: str | None = None) -> Tensor:
    """``value`` if it is a real, dense CPU tensor (``kind``: "float", "int" or "bool"), else fail.

    Only the checker's own ``torch.Tensor`` (or ``nn.Parameter``) comes out of a weights-only
    load, so subclasses and look-alikes never get here; this also rejects sparse, meta and
    quantized tensors. Returns a detached tensor.
    """
    if not isinstance(value, Tensor) or type(value) not in (Tensor, torch.nn.Parameter):
        fail(f"{what} should be a torch.Tensor, got {describe(value)}")
    if value.layout != torch.strided or value.device.type != "cpu" or value.is_quantized:
        fail(f"{what} should be a dense CPU tensor, got layout {value.layout} on {value.device}")
    value = value.detach()
    if kind == "float" and not value.dtype.is_floating_point:
        fail(f"{what} should be a floating-point tensor, got {dtype_name(value.dtype)}")
    if kind == "int" and (
        value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool
    ):
        fail(f"{what} should be an integer tensor, got {dtype_name(value.dtype)}")
    if kind == "bool" and value.dtype != torch.bool:
        fail(f"{what} should be a bool tensor, got {dtype_name(value.dtype)}")
    return value.resolve_conj().resolve_neg()


def as_float(value: Any, what: str, *, allow_int: bool = True, mistake: str | None = None) -> float:
    """A Python float (or int, when allowed); tensors and numpy scalars are rejected (naming
    ``mistake``, when the check diagnoses the wrong type as one)."""
    if isinstance(value, bool) or not isinstance(value, float | int):
        fail(f"{what} should be a Python float, got {describe(value)}", mistake)
    if isinstance(value, int) and not allow_int:
        fail(f"{what} should be a Python float, got {describe(value)}", mistake)
    return float(value)


def as_int(value: Any, what: str, *, mistake: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"{what} should be a Python int, got {describe(value)}", mistake)
    return value


def as_list(value: Any, what: str, item: Callable[[Any, str], Any]) -> list:
    """A list (a tuple is not accepted) whose items pass ``item``."""
    if type(value) is not list:
        fail(f"{what} should be a list, got {describe(value)}")
    return [item(v, f"{what}[{i}]") for i, v in enumerate(value)]


def as_str(value: Any, what: str) -> str:
    if type(value) is not str:
        fail(f"{what} should be a str, got {describe(value)}")
    return value


def as_pair(value: Any, what: str) -> tuple:
    if type(value) not in (tuple, list) or len(value) != 2:
        fail(f"{what} should be a pair (a tuple of two), got {describe(value)}")
    return tuple(value)


def as_bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        fail(f"{what} should be True or False, got {describe(value)}")
    return value


def close(actual: Tensor, expected: Tensor, *, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Same shape, same dtype kind, values within tolerance (NaN matches NaN, inf matches inf)."""
    if not isinstance(actual, Tensor) or actual.shape != expected.shape:
        return False
    if actual.dtype == torch.bool or expected.dtype == torch.bool:
        return actual.dtype == expected.dtype and torch.equal(actual, expected)
    if not actual.dtype.is_floating_point and not expected.dtype.is_floating_point:
        return torch.equal(actual.long(), expected.long())
    if actual.dtype == expected.dtype and torch.equal(actual, expected):
        return True  # equal everywhere, no NaN: close at any tolerance, without the float64 copies
    a, e = actual.double(), expected.double()
    nan = a.isnan() | e.isnan()
    same_nan = torch.equal(a.isnan(), e.isnan())
    inf = a.isinf() | e.isinf()
    same_inf = torch.equal(a.masked_fill(~inf, 0), e.masked_fill(~inf, 0))
    finite = ~(nan | inf)
    near = ((a - e).abs() <= atol + rtol * e.abs()) | ~finite
    return same_nan and same_inf and bool(near.all())


def summarise_logits(logits: Tensor, columns: list[int]) -> dict[str, Tensor]:
    """What a check compares of logits too large to record whole ([*S, V]): the logits of some
    vocabulary ``columns``, every row's log-sum-exp (which every logit enters, in float64) and
    its most likely token."""
    return {
        "columns": logits[..., columns],
        "logsumexp": logits.double().logsumexp(dim=-1),
        "argmax": logits.argmax(dim=-1),
    }


def difference(actual: Tensor, expected: Tensor) -> str:
    """Where two same-shaped tensors differ most, for a detail message."""
    if actual.numel() == 0:
        return "they differ"
    a, e = actual.double(), expected.double()
    gap = (a - e).abs().nan_to_num(nan=math.inf)
    gap = torch.where(a.isnan() & e.isnan(), torch.zeros_like(gap), gap)
    gap = torch.where((a == e), torch.zeros_like(gap), gap)
    flat = int(gap.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), actual.shape))
    where = f" at index {list(index)}" if index else ""
    return f"got {a[index].item():.6g}, expected {e[index].item():.6g}{where}"


def expect_close(
    actual: Any,
    expected: Tensor,
    what: str,
    *,
    mistakes: Mapping[str, Tensor] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    check_dtype: bool = True,
) -> Tensor:
    """Fail unless ``actual`` is a tensor equal to ``expected`` (shape, dtype, values).

    On a mismatch, each of ``mistakes`` (key -> the answer that mistake would give) is tried;
    a match names the mistake.
    """
    kind = "bool" if expected.dtype == torch.bool else None
    value = as_tensor(actual, what, kind=kind)
    if value.shape == expected.shape and close(value, expected, rtol=rtol, atol=atol):
        if check_dtype and value.dtype != expected.dtype:
            fail(
                f"{what} has dtype {dtype_name(value.dtype)}, expected {dtype_name(expected.dtype)}"
            )
        return value
    diagnose(value, mistakes, rtol=rtol, atol=atol, detail=_mismatch(value, expected, what))
    raise AssertionError("unreachable")


def _mismatch(value: Tensor, expected: Tensor, what: str) -> str:
    if value.shape != expected.shape:
        return f"{what} has shape {list(value.shape)}, expected {list(expected.shape)}"
    return f"{what} is wrong: {difference(value, expected)}"


class AnyOf:
    """The answers one mistake gives as it is written in different ways (a wrong constant:
    2/π, π/2, no leading 0.5): ``diagnose`` names the mistake when the value matches any."""

    def __init__(self, *answers: Any) -> None:
        self.answers = answers


def diagnose(
    value: Any,
    mistakes: Mapping[str, Any] | None,
    *,
    detail: str,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    otherwise: str | None = None,
) -> NoReturn:
    """Fail with ``detail``, naming the first mistake whose answer ``value`` matches (an answer
    may be a ``Deferred``: it is computed here, only when needed), else ``otherwise`` (a mistake
    that the failure itself shows, told only when no mistake's answer explains it better)."""
    for key, wrong in (mistakes or {}).items():
        forms = wrong.answers if isinstance(wrong, AnyOf) else (wrong,)
        if any(same(value, resolve(form), rtol=rtol, atol=atol) for form in forms):
            fail(detail, key)
    fail(detail, otherwise)


def same(a: Any, b: Any, *, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Structural equality of plain data; tensors compared with ``close``."""
    if isinstance(b, Tensor):
        return isinstance(a, Tensor) and close(a, b, rtol=rtol, atol=atol)
    if isinstance(a, Tensor):
        return False
    if isinstance(b, list | tuple):
        return (
            isinstance(a, list | tuple)
            and len(a) == len(b)
            and all(same(x, y, rtol=rtol, atol=atol) for x, y in zip(a, b, strict=True))
        )
    if isinstance(b, dict):
        return (
            isinstance(a, dict)
            and a.keys() == b.keys()
            and all(same(a[k], b[k], rtol=rtol, atol=atol) for k in b)
        )
    if isinstance(b, float) and isinstance(a, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def expect_equal(
    actual: Any, expected: Any, what: str, *, mistakes: Mapping[str, Any] | None = None
) -> None:
    """Fail unless ``actual`` equals ``expected`` exactly (plain data, types included)."""
    if same(actual, expected, rtol=0.0, atol=0.0):
        return
    shown = summary(actual)
    diagnose(
        actual,
        mistakes,
        rtol=0.0,
        atol=0.0,
        detail=f"{what} returned {shown}, expected {summary(expected)}",
    )
