"""Lesson 5, The transformer block: hidden checks (random shapes, weights and masks)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import hidden_settings
from graders.public.test_block import (
    ATTENTION_MISTAKES,
    BLOCK_MISTAKES,
    GELU_MISTAKES,
    GPT_MISTAKES,
    LN_MISTAKES,
    MLP_MISTAKES,
    check,
)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _params(g: torch.Generator, C: int, bias: bool, prefix: str = "") -> dict[str, torch.Tensor]:
    """One block's weights (GPT-2's names), each drawn from ``g``."""
    shapes = {"attn.c_attn": (3 * C, C), "attn.c_proj": (C, C)}
    shapes |= {"mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C)}
    params = {}
    for name in ("ln_1", "ln_2"):
        params[f"{prefix}{name}.weight"] = 1 + 0.2 * torch.randn(C, generator=g)
        if bias:
            params[f"{prefix}{name}.bias"] = 0.2 * torch.randn(C, generator=g)
    for name, (out, inp) in shapes.items():
        params[f"{prefix}{name}.weight"] = torch.randn(out, inp, generator=g) / inp**0.5
        if bias:
            params[f"{prefix}{name}.bias"] = 0.1 * torch.randn(out, generator=g)
    return params


def _part(params: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}


def _mask(g: torch.Generator, B: int, T: int, kind: str) -> torch.Tensor | None:
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    if kind == "none":
        return None
    if kind == "causal":
        return causal
    starts = torch.rand(B, T, generator=g) < 0.3
    starts[:, 0] = True
    docs = starts.long().cumsum(dim=1)
    return ((docs[:, :, None] == docs[:, None, :]) & causal)[:, None]


@pytest.mark.check("layer-norm-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    lead=st.lists(st.integers(1, 4), max_size=3),
    C=st.integers(2, 40),
    scale=st.sampled_from([0.01, 1.0, 30.0]),
    bias=st.booleans(),
    eps=st.sampled_from([1e-5, 1e-3, 0.1]),
)
def test_layer_norm_random(student, seed, lead, C, scale, bias, eps):
    g = _gen(seed)
    x = scale * torch.randn(*lead, C, generator=g)
    w = 1 + 0.3 * torch.randn(C, generator=g)
    b = 0.3 * torch.randn(C, generator=g) if bias else None
    check(student, "layer_norm", (x, w, b, eps), "layer_norm", LN_MISTAKES, **TOLERANCE)


@pytest.mark.check("gelu-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3),
    scale=st.sampled_from([0.1, 3.0, 30.0]),
)
def test_gelu_random(student, seed, shape, scale):
    x = scale * torch.randn(tuple(shape), generator=_gen(seed))
    check(student, "gelu", (x,), "gelu", GELU_MISTAKES, rtol=1e-5, atol=1e-6)


@pytest.mark.check("split-heads-random")
@hidden_settings
@given(B=st.integers(1, 3), T=st.integers(1, 6), H=st.integers(1, 5), D=st.integers(1, 5))
def test_split_heads_random(student, B, T, H, D):
    x = torch.arange(B * T * H * D, dtype=torch.float32).reshape(B, T, H * D)
    keys = ("interleaved", "no-transpose", "reshape-not-transpose")
    check(student, "split_heads", (x, H), f"split_heads(x [{B}, {T}, {H * D}], {H})", keys)


@pytest.mark.check("merge-heads-random")
@hidden_settings
@given(B=st.integers(1, 3), H=st.integers(1, 5), T=st.integers(1, 6), D=st.integers(1, 5))
def test_merge_heads_random(student, B, H, T, D):
    y = torch.arange(B * H * T * D, dtype=torch.float32).reshape(B, H, T, D)
    keys = ("interleaved", "reshape-not-transpose")
    check(student, "merge_heads", (y,), f"merge_heads(y [{B}, {H}, {T}, {D}])", keys)


# A block's or its attention's inputs: x [B, T, H·D], weights, and no mask, the causal one or
# documents'.
ATTENTION_INPUTS = dict(
    seed=st.integers(0, 2**31),
    B=st.integers(1, 3),
    T=st.integers(1, 7),
    H=st.integers(1, 4),
    D=st.integers(1, 6),
    bias=st.booleans(),
    kind=st.sampled_from(["none", "causal", "documents"]),
)


def _attention_args(seed, B, T, H, D, bias, kind, prefix: str | None = None) -> tuple:
    """(x, params, H[, mask]): a block's weights, or those under ``prefix`` only."""
    g = _gen(seed)
    params = _params(g, H * D, bias)
    if prefix is not None:
        params = _part(params, prefix)
    x = torch.randn(B, T, H * D, generator=g)
    return (x, params, H) if kind == "none" else (x, params, H, _mask(g, B, T, kind))


@pytest.mark.check("self-attention-random")
@hidden_settings
@given(**ATTENTION_INPUTS)
def test_self_attention_random(student, **inputs):
    args = _attention_args(**inputs, prefix="attn.")
    check(student, "self_attention", args, "self_attention", ATTENTION_MISTAKES, **TOLERANCE)


@pytest.mark.check("mlp-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    lead=st.lists(st.integers(1, 4), max_size=3),
    C=st.integers(1, 12),
    bias=st.booleans(),
)
def test_mlp_random(student, seed, lead, C, bias):
    g = _gen(seed)
    params = _part(_params(g, C, bias), "mlp.")
    x = torch.randn(*lead, C, generator=g)
    check(student, "mlp", (x, params), "mlp", MLP_MISTAKES, **TOLERANCE)


@pytest.mark.check("block-random")
@hidden_settings
@given(**ATTENTION_INPUTS)
def test_block_random(student, **inputs):
    args = _attention_args(**inputs)
    check(student, "transformer_block", args, "transformer_block", BLOCK_MISTAKES, **TOLERANCE)


@pytest.mark.check("gpt-logits-random")
@hidden_settings
@given(
    seed=st.integers(0, 2**31),
    B=st.integers(1, 3),
    T=st.integers(1, 8),
    n_layer=st.integers(0, 12),
    H=st.integers(1, 3),
    D=st.integers(1, 4),
    V=st.integers(2, 30),
    tied=st.booleans(),
    bias=st.booleans(),
)
def test_gpt_logits_random(student, seed, B, T, n_layer, H, D, V, tied, bias):
    g = _gen(seed)
    C = H * D
    params = {
        "transformer.wte.weight": torch.randn(V, C, generator=g),
        "transformer.wpe.weight": 0.5 * torch.randn(T + 2, C, generator=g),
        "transformer.ln_f.weight": 1 + 0.2 * torch.randn(C, generator=g),
    }
    if bias:
        params["transformer.ln_f.bias"] = 0.2 * torch.randn(C, generator=g)
    for n in range(n_layer):
        params |= _params(g, C, bias, prefix=f"transformer.h.{n}.")
    if not tied:
        params["lm_head.weight"] = torch.randn(V, C, generator=g)
    ids = torch.randint(0, V, (B, T), generator=g)
    keys = GPT_MISTAKES + (() if tied else ("head-ignored",))
    check(student, "gpt_logits", (ids, params, H), "gpt_logits", keys, rtol=1e-4, atol=1e-4)
