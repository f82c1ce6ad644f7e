"""Lesson 2, Tokens become vectors: public checks."""

from __future__ import annotations

import pytest
import torch

from graders.answers import later, oracle
from graders.checking import (
    as_float,
    as_int,
    as_list,
    as_pair,
    as_tensor,
    diagnose,
    expect_close,
    fail,
    permutation,
    randint,
    randn,
    uniform,
)
from graders.client import StudentError


@pytest.mark.check("lookup-matches-indexing")
def test_lookup_matches_indexing(student):
    table = randn(1, 7, 3)
    ids = torch.tensor([[2, 1, 6], [0, 2, 5]])
    expect_close(
        student.call("lookup", table, ids),
        oracle.lookup(table, ids),
        "lookup(table [7, 3], ids [2, 3])",
        mistakes={
            key: later.lookup(table, ids, mistake=key) for key in ("off-by-one", "flattened")
        },
    )


@pytest.mark.check("lookup-any-shape")
@pytest.mark.parametrize(
    "shape", [(), (5,), (1, 3), (2, 3, 4)], ids=["0-dim", "1-dim", "size-1-dim", "3-dim"]
)
def test_lookup_any_shape(student, shape):
    table = randn(2, 9, 4)
    ids = randint(3, 0, 9, *shape)
    expect_close(
        student.call("lookup", table, ids),
        oracle.lookup(table, ids),
        f"lookup(table [9, 4], ids {list(shape)})",
        mistakes={key: later.lookup(table, ids, mistake=key) for key in ("squeezed", "flattened")},
    )


def check_gradient(student, function: str) -> None:
    """The output stays connected to the table: the gradient of a weighted sum of it reaches
    exactly the looked-up rows (a row looked up twice collects both weights)."""
    table, ids, weights = randn(20, 6, 3), torch.tensor([[4, 1, 4], [0, 5, 1]]), randn(21, 2, 3, 3)
    what = f"{function}(table [6, 3], ids [2, 3])"
    got = student.scenario("grad", function=function, args=[table, ids], wrt=[0], weights=weights)
    grads = as_list(got["grads"] if isinstance(got, dict) else None, "the gradients", as_any)
    if grads[0] is None:
        fail(f"{what}: no gradient reached the table (the output is detached from it)", "detached")
    expect_close(
        grads[0], oracle.lookup_grad(table, ids, weights), f"the gradient {what} sends the table"
    )


def as_any(value, what):
    return value


@pytest.mark.check("lookup-gradient")
def test_lookup_gradient(student):
    check_gradient(student, "lookup")


@pytest.mark.check("one-hot-gradient")
def test_one_hot_gradient(student):
    check_gradient(student, "one_hot_lookup")


def check_one_hot(student, table, ids, what: str) -> None:
    """one_hot_lookup against the lookup; a shape error is one-hot vectors of the wrong width,
    a dtype error or result one-hot vectors left in their own dtype."""
    try:
        out = student.call("one_hot_lookup", table, ids)
    except StudentError as error:
        text = error.message
        if "dtype" in text or "scalar type" in text:
            fail(f"{what} raised {error.type_name}: {text}", "float32")
        if "shape" in text or "size" in text:
            fail(f"{what} raised {error.type_name}: {text}", "no-num-classes")
        raise
    value = as_tensor(out, what)
    if value.dtype != table.dtype and value.dtype.is_floating_point:
        fail(f"{what} has dtype {value.dtype}, expected {table.dtype}", "float32")
    expect_close(value, oracle.lookup(table, ids), what)


@pytest.mark.check("one-hot-matches-lookup")
def test_one_hot_matches_lookup(student):
    table = randn(4, 6, 5)
    ids = torch.tensor([[5, 0, 3], [1, 4, 2]])
    check_one_hot(student, table, ids, "one_hot_lookup(table [6, 5], ids [2, 3])")


@pytest.mark.check("one-hot-num-classes")
def test_one_hot_num_classes(student):
    table = randn(5, 10, 3)
    ids = torch.tensor([1, 2, 1])  # the largest id is far below V - 1
    check_one_hot(student, table, ids, "one_hot_lookup(table [10, 3], ids [1, 2, 1])")


@pytest.mark.check("one-hot-keeps-dtype")
def test_one_hot_keeps_dtype(student):
    table = randn(6, 4, 3, dtype=torch.float64)
    ids = torch.tensor([3, 0, 2, 1])
    check_one_hot(student, table, ids, "one_hot_lookup(float64 table [4, 3], ids [4])")


def check_add(student, vectors, pos, what: str, mistakes: tuple[str, ...] = ()) -> None:
    T = vectors.shape[1]
    expected = oracle.add_positions(vectors, pos)
    answers = {key: later.add_positions(vectors, pos, mistake=key) for key in mistakes}
    try:
        out = student.call("add_positions", vectors, pos)
    except StudentError as error:  # a shape error from adding the whole table
        if T < pos.shape[0] and ("size" in error.message or "shape" in error.message):
            fail(f"{what} raised {error.type_name}: {error.message}", "whole-table")
        raise
    expect_close(out, expected, what, mistakes=answers)


@pytest.mark.check("add-positions-broadcast")
def test_add_positions_broadcast(student):
    vectors = randn(7, 12, 5).reshape(3, 4, 5)
    pos = randn(8, 6, 5)
    check_add(
        student,
        vectors,
        pos,
        "add_positions(vectors [3, 4, 5], pos_table [6, 5])",
        ("wrong-rows",),
    )
    vectors, pos = torch.zeros(2, 3, 4), randn(9, 5, 4)
    check_add(student, vectors, pos, "add_positions(vectors [2, 3, 4], pos_table [5, 4])")


@pytest.mark.check("add-positions-gradient")
def test_add_positions_gradient(student):
    vectors, pos, weights = randn(22, 2, 3, 4), randn(23, 5, 4), randn(24, 2, 3, 4)
    what = "add_positions(vectors [2, 3, 4], pos_table [5, 4])"
    got = student.scenario(
        "grad", function="add_positions", args=[vectors, pos], wrt=[0, 1], weights=weights
    )
    grads = as_list(got["grads"] if isinstance(got, dict) else None, "the gradients", as_any)
    if grads[0] is None or grads[1] is None:
        fail(f"{what}: no gradient reached the vectors or the table (detached output)", "detached")
    expected = oracle.add_positions_grads(pos, weights)
    expect_close(grads[0], expected[0], f"the gradient {what} sends the vectors")
    expect_close(grads[1], expected[1], f"the gradient {what} sends pos_table")


@pytest.mark.check("add-positions-too-long")
def test_add_positions_too_long(student):
    error = student.error("add_positions", torch.zeros(2, 7, 3), randn(10, 5, 3))
    if not error.is_a("ValueError"):
        fail(
            f"with T=7 > L=5, add_positions raised {error.type_name}, expected ValueError",
            "not-value-error",
        )
    if "7" not in error.message or "5" not in error.message:
        fail(f"the ValueError's message {error.message!r} names not both T=7 and L=5", "no-numbers")


@pytest.mark.check("add-positions-full-length")
def test_add_positions_full_length(student):
    vectors, pos = randn(11, 8, 2).reshape(2, 4, 2), randn(12, 4, 2)
    try:
        out = student.call("add_positions", vectors, pos)
    except StudentError as error:
        if error.is_a("ValueError"):
            fail(
                f"with T = L = 4, add_positions raised ValueError: {error.message}",
                "raises-at-equal",
            )
        raise
    expect_close(
        out,
        oracle.add_positions(vectors, pos),
        "add_positions(vectors [2, 4, 2], pos_table [4, 2]) (T == L)",
    )


def _rows(pairs: list) -> list[int]:
    return [r for r, _ in pairs]


def check_nearest(student, table: torch.Tensor, index: int, k: int, what: str) -> None:
    expected = oracle.nearest(table, index, k)
    mistakes = {
        key: later.nearest(table, index, k, mistake=key).then(_rows)
        for key in ("includes-self", "dot-product", "ascending")
    }
    result = student.call("nearest", table, index, k)
    pairs = as_list(result, what, as_pair)
    got = [
        (
            as_int(r, f"{what}: a row", mistake="tensors"),
            as_float(s, f"{what}: a similarity", mistake="tensors"),
        )
        for r, s in pairs
    ]
    rows_ok = _rows(got) == _rows(expected)
    sims_ok = all(abs(a - b) <= 1e-5 for (_, a), (_, b) in zip(got, expected, strict=False))
    if rows_ok and sims_ok:
        return
    rows = _rows(got)
    diagnose(
        rows,
        mistakes,
        detail=f"{what} gave rows {rows} with similarities {[round(s, 4) for _, s in got]}, "
        f"expected rows {_rows(expected)} with {[round(s, 4) for _, s in expected]}",
    )


@pytest.mark.check("nearest-cosine")
def test_nearest_cosine(student):
    # Row lengths differ a lot, so ranking by dot product gives another order.
    table = torch.tensor(
        [
            [1.0, 0.0, 0.0],
            [9.0, 9.0, 0.0],
            [0.9, 0.1, 0.0],
            [0.0, 1.0, 0.0],
            [-2.0, 0.1, 1.0],
            [0.5, 0.0, 0.4],
        ]
    )
    order = permutation(14, 6)  # the rows in another order, each scaled: the same cosines
    scales = torch.tensor([uniform(15 + i, 1.0, 0.5, 2.0) for i in range(6)])
    table, index = table[order] * scales[:, None], int(order.argsort()[0])
    check_nearest(student, table, index, 3, f"nearest(table [6, 3], index={index}, k=3)")


@pytest.mark.check("nearest-pairs")
def test_nearest_pairs(student):
    table = randn(13, 8, 4)
    result = student.call("nearest", table, 5, 2)
    pairs = as_list(result, "nearest(table [8, 4], 5, 2)", as_pair)
    if len(pairs) != 2:
        fail(f"nearest(table, 5, k=2) returned {len(pairs)} pairs, expected 2")
    for row, sim in pairs:
        as_int(row, "the row of a pair", mistake="tensors")
        as_float(sim, "the similarity of a pair", allow_int=False, mistake="tensors")
