"""Lesson 3, Training pairs: hidden checks (random sizes, strides, seeds)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import hidden_settings
from graders.public.test_windows import check_loader, check_shift, check_starts, check_windows

seeds = st.integers(0, 2**31)


@pytest.mark.check("shift-random")
@hidden_settings
@given(
    seed=seeds,
    shape=st.lists(st.integers(1, 4), max_size=3),
    T=st.integers(2, 9),
    dtype=st.sampled_from([torch.long, torch.int32, torch.float32]),
)
def test_shift_random(student, seed, shape, T, dtype):
    ids = torch.randint(0, 1000, (*shape, T), generator=torch.Generator().manual_seed(seed))
    check_shift(student, ids.to(dtype), "shift")


@pytest.mark.check("window-starts-random")
@hidden_settings
@given(n=st.integers(0, 200), c=st.integers(1, 40), s=st.integers(1, 40))
def test_window_starts_random(student, n, c, s):
    check_starts(student, n, c, s)


@pytest.mark.check("token-windows-random")
@hidden_settings
@given(
    seed=seeds,
    n=st.integers(0, 60),
    c=st.integers(1, 12),
    s=st.integers(1, 12),
    as_list=st.booleans(),
)
def test_token_windows_random(student, seed, n, c, s, as_list):
    ids = torch.randint(0, 50257, (n,), generator=torch.Generator().manual_seed(seed))
    check_windows(student, ids.tolist() if as_list else ids, c, s, "TokenWindows")


@pytest.mark.check("make-loader-random")
@hidden_settings
@given(
    seed=seeds,
    n=st.integers(10, 80),
    c=st.integers(1, 8),
    s=st.integers(1, 8),
    batch_size=st.integers(1, 5),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    loader_seed=st.one_of(st.none(), seeds),
)
def test_make_loader_random(student, seed, n, c, s, batch_size, shuffle, drop_last, loader_seed):
    ids = torch.randint(0, 50257, (n,), generator=torch.Generator().manual_seed(seed))
    options = {"shuffle": shuffle, "drop_last": drop_last}
    if shuffle and loader_seed is None:
        options["shuffle"] = False  # an unseeded shuffle has no single right order
    if loader_seed is not None:
        options["seed"] = loader_seed
    check_loader(
        student,
        "make_loader",
        ids=ids,
        batch_size=batch_size,
        context_length=c,
        stride=s,
        epochs=2,
        **options,
    )
