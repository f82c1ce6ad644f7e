"""Lesson 3, Training pairs: public checks."""

from __future__ import annotations

import pytest
import torch

from graders.answers import later, oracle
from graders.checking import (
    as_bool,
    as_int,
    as_list,
    as_pair,
    as_tensor,
    describe,
    diagnose,
    expect_equal,
    fail,
    relabel,
    same,
    seed_for,
)
from graders.client import StudentError


def check_shift(student, ids: torch.Tensor, what: str) -> None:
    expected = oracle.shift(ids)
    mistakes = {
        key: later.shift_mistakes(ids, key)
        for key in ("not-shifted", "swapped", "first-dim", "by-two")
    }
    result = as_pair(student.call("shift", ids), what)
    x, y = (as_tensor(v, f"{what}[{i}]") for i, v in enumerate(result))
    if same((x, y), expected, rtol=0, atol=0):
        if x.dtype != ids.dtype or y.dtype != ids.dtype:
            fail(f"{what} changed the dtype to {x.dtype}")
        return
    for key, answers in mistakes.items():
        if any(same((x, y), answer, rtol=0, atol=0) for answer in answers.get()):
            fail(f"{what} gave inputs {x.tolist()} and targets {y.tolist()}", key)
    fail(
        f"{what} gave inputs of shape {list(x.shape)} and targets of shape {list(y.shape)}; "
        f"expected {list(expected[0].shape)} each"
    )


@pytest.mark.check("shift-pairs")
def test_shift_pairs(student):
    check_shift(student, torch.tensor([5, 6, 7, 8]), "shift(tensor([5, 6, 7, 8]))")
    ids = relabel(31, torch.arange(12).reshape(3, 4) * 7 % 11, 0, 50257)
    check_shift(student, ids, "shift(ids [3, 4])")


@pytest.mark.check("shift-any-shape")
def test_shift_any_shape(student):
    check_shift(
        student, relabel(32, torch.arange(24).reshape(2, 3, 4), 0, 50257), "shift(ids [2, 3, 4])"
    )
    check_shift(student, torch.tensor([1, 2]), "shift(tensor([1, 2]))")


def check_starts(student, n: int, c: int, s: int) -> None:
    what = f"window_starts({n}, {c}, {s})"
    expected = oracle.window_starts(n, c, s)
    mistakes = {
        key: later.window_starts(n, c, s, mistake=key)
        for key in ("no-target-room", "misses-last", "ignores-stride")
    }
    result = as_list(student.call("window_starts", n, c, s), what, as_int)
    expect_equal(result, expected, what, mistakes=mistakes)


@pytest.mark.check("window-starts-examples")
@pytest.mark.parametrize("args", [(16, 4, 4), (16, 4, 2), (9, 4, 4), (20, 5, 3), (10, 3, 5)])
def test_window_starts_examples(student, args):
    n, c, s = args
    check_starts(student, n, c, s)
    check_starts(student, relabel(33, n, c + 1, 64), c, s)  # one like it that no release holds


@pytest.mark.check("window-starts-short")
@pytest.mark.parametrize("args", [(4, 4, 1), (3, 8, 2), (0, 2, 1)])
def test_window_starts_short(student, args):
    n, c, s = args
    check_starts(student, n, c, s)
    check_starts(student, relabel(34, n, 0, c + 1), relabel(35, c, c, 40), s)  # as short


def check_windows(student, ids, context_length: int, stride: int, what: str) -> None:
    expected = oracle.token_windows(ids, context_length, stride)
    starts = later.window_starts(len(torch.as_tensor(ids)), context_length, stride)
    try:
        got = student.scenario(
            "token_windows", ids=ids, context_length=context_length, stride=stride
        )
    except StudentError as error:
        # A len() too large is asked first: reading past the end of a list of ids raises
        # "list index out of range", which is not a list kept as it came.
        if error.is_a("IndexError"):  # the items were read up to a len() too large?
            sized = student.scenario(
                "token_windows", ids=ids, context_length=context_length, stride=stride, limit=0
            )
            n = sized.get("len") if isinstance(sized, dict) else None
            if type(n) is int and n > expected["len"]:
                fail(
                    f"{what} raised {error.type_name} reading its items: len() is {n}, "
                    f"expected {expected['len']}",
                    "len-too-long",
                )
        if isinstance(ids, list) and "list" in error.message:  # a list kept as it came
            fail(f"{what} raised {error.type_name}: {error.message}", "list-kept")
        raise
    if not as_bool(got.get("is_dataset") if isinstance(got, dict) else None, "is a Dataset"):
        fail(f"{what} is not a torch.utils.data.Dataset")
    n = as_int(got["len"], f"len({what})")
    if n != expected["len"]:
        fail(f"len({what}) is {n}, expected {expected['len']}")
    items = as_list(got["items"], f"the items of {what}", as_pair)
    for i, (item, want) in enumerate(zip(items, expected["items"], strict=True)):
        if isinstance(ids, list) and not isinstance(item[0], torch.Tensor):
            fail(f"{what}[{i}][0] is {describe(item[0])}, not a tensor of ids", "list-kept")
        x = as_tensor(item[0], f"{what}[{i}][0]", kind="int")
        y = as_tensor(item[1], f"{what}[{i}][1]", kind="int")
        if same((x, y), want, rtol=0, atol=0):
            continue
        start = starts.get()[i]
        window = torch.as_tensor(ids)[start : start + context_length + 1]
        if same(x, want[0]) and same(y, want[0]):
            key = "y-not-shifted"
        elif x.shape != want[0].shape or y.shape != want[1].shape:
            key = "wrong-length"
        elif i and same(x, torch.as_tensor(ids)[i * context_length :][:context_length]):
            key = "ignores-stride"
        else:
            key = None
        fail(
            f"{what}[{i}] is (x={x.tolist()}, y={y.tolist()}); the window from start {start} "
            f"is {window.tolist()}",
            key,
        )


@pytest.mark.check("token-windows-items")
def test_token_windows_items(student):
    ids = relabel(36, torch.arange(100, 120), 0, 50257)  # increasing, as arange(100, 120)
    check_windows(student, ids, 4, 3, "TokenWindows(arange(100, 120), 4, 3)")


@pytest.mark.check("token-windows-len")
@pytest.mark.parametrize("args", [(10, 4, 4), (16, 4, 2), (5, 5, 1)])
def test_token_windows_len(student, args):
    n, c, s = args
    n = relabel(37, n, c + 1, 64) if n > c else n  # as long, or as short, as the case
    what = f"TokenWindows(arange({n}), {c}, {s})"
    expected = oracle.token_windows(torch.arange(n), c, s)
    got = student.scenario(
        "token_windows", ids=torch.arange(n), context_length=c, stride=s, limit=0
    )
    if not as_bool(got.get("is_dataset") if isinstance(got, dict) else None, "is a Dataset"):
        fail(f"{what} is not a torch.utils.data.Dataset")
    length = as_int(got["len"], f"len({what})")
    if length != expected["len"]:
        fail(f"len({what}) is {length}, expected {expected['len']}")  # only len() is graded here


@pytest.mark.check("token-windows-list-ids")
def test_token_windows_list_ids(student):
    ids = relabel(38, [7, 3, 9, 1, 4, 4, 8, 2, 6], 0, 50257)
    check_windows(student, ids, 3, 2, f"TokenWindows({ids}, 3, 2)")


def check_loader(student, what: str, mistakes: dict | None = None, **config) -> None:
    expected = oracle.make_loader(**config)
    answers = {
        key: later.make_loader(**(config | change)) for key, change in (mistakes or {}).items()
    }
    got = student.scenario("make_loader", **config)
    if not as_bool(got.get("is_loader") if isinstance(got, dict) else None, "is a DataLoader"):
        fail(f"{what} did not return a torch.utils.data.DataLoader")
    epochs = as_list(got["epochs"], what, lambda v, w: as_list(v, w, as_pair))
    for epoch, (batches, want) in enumerate(zip(epochs, expected, strict=True)):
        if same(batches, want, rtol=0, atol=0):
            continue
        for i, batch in enumerate(batches):
            for part in batch:
                as_tensor(part, f"{what}: batch {i}", kind="int")
        shapes = [list(b[0].shape) for b in batches]
        first = _first_difference(batches, want)
        if config.get("shuffle") is False and _windows(batches) == _windows(want):
            fail(f"{what}: the right windows, in another order", "shuffle-ignored")
        if config.get("seed") is not None and got.get("generator_seed") is None:
            fail(
                f"{what}: the DataLoader has no generator of its own, so its order comes from "
                "the global random state" + first,
                "global-seed",
            )
        diagnose(
            batches,
            {key: answer.then(lambda e, n=epoch: e[n]) for key, answer in answers.items()},
            rtol=0,
            atol=0,
            detail=f"{what}: epoch {epoch + 1} gave {len(batches)} batches of shapes "
            f"{shapes[:4]}{'...' if len(shapes) > 4 else ''}; expected {len(want)} batches"
            f" in PyTorch's order"
            + (" for that seed" if config.get("seed") is not None else "")
            + first,
        )


@pytest.mark.check("make-loader-generator")
def test_make_loader_generator(student):
    wanted = seed_for(77)
    what = f"make_loader(arange(40), 2, 4, 4, shuffle=False, seed={wanted})"
    config = dict(
        ids=relabel(39, torch.arange(40), 0, 50257),
        batch_size=2,
        context_length=4,
        stride=4,
        seed=wanted,
    )
    got = student.scenario("make_loader", **config, shuffle=False)
    if not as_bool(got.get("is_loader") if isinstance(got, dict) else None, "is a DataLoader"):
        fail(f"{what} did not return a torch.utils.data.DataLoader")
    seed, drawn = got.get("generator_seed"), as_bool(got.get("global_drawn"), "global state")
    if seed is None and drawn:
        # No generator when shuffling either: the seed went to the global state.
        shuffled = student.scenario("make_loader", **config, shuffle=True)
        never = isinstance(shuffled, dict) and shuffled.get("generator_seed") is None
        fail(
            f"{what}: the DataLoader has no generator, so iterating it drew from the global "
            f"random state; expected a generator seeded with {wanted}",
            "global-seed" if never else "generator-only-when-shuffling",
        )
    if seed != wanted or drawn:
        fail(f"{what}: the DataLoader's generator has seed {seed!r}, expected {wanted}")


def _first_difference(batches: list, want: list) -> str:
    """Where the batches first differ from the expected ones: that batch's first window."""
    for i, (batch, expected) in enumerate(zip(batches, want, strict=False)):
        if same(batch, expected, rtol=0, atol=0):
            continue
        try:
            got_row: list | str = torch.as_tensor(batch[0])[0].tolist()
        except Exception:  # noqa: BLE001 - a malformed batch: the shapes say enough
            got_row = "?"
        return (
            f"; batch {i + 1} first differs: its first window is {got_row}, expected "
            f"{expected[0][0].tolist()}"
        )
    if len(batches) != len(want):
        return f"; the first {min(len(batches), len(want))} batches match"
    return ""


def _windows(batches: list) -> list[list[int]]:
    """Every input window of a list of batches, sorted: the order of the batches left out."""
    return sorted(row for x, _ in batches for row in x.tolist())


@pytest.mark.check("make-loader-batches")
def test_make_loader_batches(student):
    ids = relabel(40, torch.arange(50, 80), 0, 50257)  # increasing, as arange(50, 80)
    check_loader(
        student,
        "make_loader(arange(50, 80), 3, 4, 2, shuffle=False, drop_last=False)",
        ids=ids,
        batch_size=3,
        context_length=4,
        stride=2,
        shuffle=False,
        drop_last=False,
        mistakes={"drop-last-ignored": {"drop_last": True}},
    )
    check_loader(
        student,
        "make_loader(arange(50, 80), 4, 5, 5, shuffle=False)",
        ids=ids,
        batch_size=4,
        context_length=5,
        stride=5,
        shuffle=False,
        mistakes={"drop-last-ignored": {"drop_last": False}},
    )


@pytest.mark.check("make-loader-seeded")
def test_make_loader_seeded(student):
    ids, seed = relabel(41, torch.arange(200, 260), 0, 50257), seed_for(1234)
    check_loader(
        student,
        f"make_loader(arange(200, 260), 2, 4, 3, seed={seed})",
        ids=ids,
        batch_size=2,
        context_length=4,
        stride=3,
        seed=seed,
        mistakes={"not-shuffled": {"shuffle": False}},
    )
