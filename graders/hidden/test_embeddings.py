"""Lesson 2, Tokens become vectors: hidden checks (random inputs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import expect_close, fail, hidden_settings, randn
from graders.public.test_embeddings import check_add, check_nearest

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
dtypes = st.sampled_from([torch.float32, torch.float64, torch.bfloat16])


@pytest.mark.check("lookup-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    V=st.integers(1, 30),
    C=st.integers(1, 6),
    shape=shapes,
    dtype=dtypes,
)
def test_lookuprandn(student, seed, V, C, shape, dtype):
    table = randn(seed, V, C, dtype=dtype)
    ids = torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed + 1))
    expect_close(student.call("lookup", table, ids), table[ids], "lookup", atol=0, rtol=0)


@pytest.mark.check("one-hot-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    V=st.integers(1, 30),
    C=st.integers(1, 6),
    shape=shapes,
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_one_hotrandn(student, seed, V, C, shape, dtype):
    table = randn(seed, V, C, dtype=dtype)
    ids = torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed + 1))
    expect_close(
        student.call("one_hot_lookup", table, ids), F.embedding(ids, table), "one_hot_lookup"
    )


@pytest.mark.check("add-positions-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    B=st.integers(1, 3),
    T=st.integers(1, 9),
    L=st.integers(1, 9),
    C=st.integers(1, 5),
)
def test_add_positionsrandn(student, seed, B, T, L, C):
    vectors, pos = randn(seed, B, T, C), randn(seed + 1, L, C)
    if T > L:
        error = student.error("add_positions", vectors, pos)
        if (
            not error.is_a("ValueError")
            or str(T) not in error.message
            or str(L) not in error.message
        ):
            fail("add_positions with T > L must raise ValueError naming T and L")
        return
    check_add(student, vectors, pos, "add_positions")


@pytest.mark.check("nearest-random")
@hidden_settings
@given(seed=st.integers(0, 2**31), V=st.integers(2, 40), C=st.integers(2, 6), data=st.data())
def test_nearestrandn(student, seed, V, C, data):
    table = randn(seed, V, C, dtype=torch.float64)
    index = data.draw(st.integers(0, V - 1))
    k = data.draw(st.integers(1, V - 1))
    check_nearest(student, table, index, k, "nearest")
