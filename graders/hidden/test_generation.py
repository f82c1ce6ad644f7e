"""Lesson 9, Generation and GPT-2 weights: hidden checks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import expect_close, hidden_settings
from graders.gpt2 import gpt2_state
from graders.public.test_generation import (
    check_generate,
    check_keys,
    check_sample,
    check_values,
    gen_config,
    load,
)

seeds = st.integers(0, 2**31)


@pytest.mark.check("sample-random")
@hidden_settings
@given(
    seed=seeds,
    B=st.integers(1, 40),
    V=st.integers(1, 30),
    temperature=st.sampled_from([0.0, 0.3, 1.0, 1.7]),
    top_k=st.one_of(st.none(), st.integers(1, 40)),
)
def test_sample_random(student, seed, B, V, temperature, top_k):
    logits = 3 * torch.randn(B, V, generator=torch.Generator().manual_seed(seed))
    if temperature == 0:
        expect_close(
            student.call("sample_next", logits, temperature, top_k),
            logits.argmax(dim=-1),
            "sample_next",
        )
    else:
        check_sample(
            student, logits, "sample_next", temperature=temperature, top_k=top_k, seed=seed + 1
        )


@pytest.mark.check("generate-random")
@hidden_settings
@given(
    seed=st.integers(0, 10_000),
    B=st.integers(1, 3),
    T=st.integers(1, 6),
    n=st.integers(0, 6),
    L=st.integers(1, 7),
    temperature=st.sampled_from([0.0, 0.7, 1.0]),
    top_k=st.one_of(st.none(), st.integers(1, 12)),
)
def test_generate_random(student, seed, B, T, n, L, temperature, top_k):
    T = min(T, L)
    config = gen_config(seed, B, T, n, L, temperature=temperature, top_k=top_k, seed=seed)
    check_generate(student, config, "generate")


@pytest.mark.check("load-gpt2-random")
@hidden_settings
@given(
    n_layer=st.integers(1, 12),
    dim=st.integers(1, 4),
    vocab=st.integers(1, 9),
    n_ctx=st.integers(1, 4),
    seed=seeds,
    prefix=st.booleans(),
    lm_head=st.booleans(),
    masked_bias=st.booleans(),
)
def test_load_gpt2_random(student, n_layer, dim, vocab, n_ctx, seed, prefix, lm_head, masked_bias):
    hf = gpt2_state(
        n_layer, dim, vocab, n_ctx, seed, prefix=prefix, lm_head=lm_head, masked_bias=masked_bias
    )
    got = load(student, hf, "load_gpt2_state_dict")
    check_keys(got, hf, "load_gpt2_state_dict")
    check_values(got, hf, "load_gpt2_state_dict")
