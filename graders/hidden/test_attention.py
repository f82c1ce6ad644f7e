"""Lesson 4, Attention: hidden checks (random shapes and masks)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import hidden_settings
from graders.public.test_attention import check_attention, check_mask


@pytest.mark.check("causal-mask-random")
@hidden_settings
@given(T=st.integers(1, 64))
def test_causal_mask_random(student, T):
    check_mask(student, T)


@pytest.mark.check("attention-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    lead=st.lists(st.integers(1, 3), max_size=2),
    T=st.integers(1, 7),
    Tk=st.integers(1, 7),
    D=st.integers(1, 9),
    Dv=st.integers(1, 5),
    masked=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_attention_random(student, seed, lead, T, Tk, D, Dv, masked, dtype):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, T, D, generator=g, dtype=dtype)
    k = torch.randn(*lead, Tk, D, generator=g, dtype=dtype)
    v = torch.randn(*lead, Tk, Dv, generator=g, dtype=dtype)
    mask = None
    if masked:
        mask = torch.rand(*lead, T, Tk, generator=g) < 0.6
        mask[..., 0] = True  # every query sees at least one key
    check_attention(student, q, k, v, mask, "attention", rtol=1e-4, atol=1e-5)
