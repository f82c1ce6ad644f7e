"""Lesson 4, Attention: public checks. The oracle is F.scaled_dot_product_attention."""

from __future__ import annotations

import pytest
import torch

from graders.answers import later, oracle
from graders.checking import as_tensor, close, diagnose, expect_close, fail, randn, relabel


def check_mask(student, T: int) -> None:
    mask = student.call("causal_mask", T)
    if isinstance(mask, torch.Tensor) and mask.dtype != torch.bool:
        fail(f"causal_mask({T}) has dtype {mask.dtype}, expected torch.bool", "not-bool")
    expect_close(
        mask,
        oracle.causal_mask(T),
        f"causal_mask({T})",
        mistakes={
            key: later.causal_mask(T, mistake=key) for key in ("inverted", "no-diagonal", "upper")
        },
    )


@pytest.mark.check("causal-mask-values")
@pytest.mark.parametrize("T", [5, 2, 1])  # the first failure is shown: T = 5 tells mistakes apart
def test_causal_mask_values(student, T):
    check_mask(student, T if T < 5 else relabel(40, T, 3, 17))


@pytest.mark.check("causal-mask-bool")
def test_causal_mask_bool(student):
    check_mask(student, relabel(41, 4, 3, 17))


MISTAKES = ("no-scale", "scale-by-d", "softmax-dim")
MASK_MISTAKES = ("mask-ignored", "mask-inverted", "mask-zero", "mask-after-softmax")


def check_attention(student, q, k, v, mask, what, **tolerance):
    args = (q, k, v) if mask is None else (q, k, v, mask)
    expected = oracle.attention(q, k, v, mask)
    mistakes = {
        key: later.attention(q, k, v, mask, mistake=key)
        for key in MISTAKES + (MASK_MISTAKES if mask is not None else ())
    }
    out = student.call("attention", *args)
    value = as_tensor(out, what)
    if mask is not None and not (
        value.shape == expected.shape and close(value, expected, **tolerance)
    ):
        # Right when handed the inverted mask: True read as "masked", whatever it fills in
        # (-1e9 leaves no NaN, so the -inf answer of mask-inverted would not match).
        swapped = student.call("attention", q, k, v, ~mask)
        if isinstance(swapped, torch.Tensor) and close(swapped, expected, **tolerance):
            fail(
                f"{what} is wrong: it gives the right answer for the inverted mask", "mask-inverted"
            )
    if (
        bool(expected.isfinite().all())
        and value.is_floating_point()
        and not bool(value.isfinite().all())
    ):
        detail = f"{what} holds NaN or inf, expected finite values"
        diagnose(value, mistakes, detail=detail, otherwise="overflow", **tolerance)
    expect_close(out, expected, what, mistakes=mistakes, **tolerance)


@pytest.mark.check("attention-matches-sdpa")
def test_attention_matches_sdpa(student):
    q, k, v = randn(1, 2, 3, 5, 8), randn(2, 2, 3, 5, 8), randn(3, 2, 3, 5, 8)
    check_attention(student, q, k, v, None, "attention(q, k, v [2, 3, 5, 8])")


@pytest.mark.check("attention-causal-mask")
def test_attention_causal_mask(student):
    q, k, v = randn(4, 2, 6, 4), randn(5, 2, 6, 4), randn(6, 2, 6, 4)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    check_attention(student, q, k, v, mask, "attention(q, k, v [2, 6, 4], causal mask [6, 6])")


@pytest.mark.check("attention-large-scores")
def test_attention_large_scores(student):
    q, k, v = 30 * randn(7, 1, 4, 16), 30 * randn(8, 1, 4, 16), randn(9, 1, 4, 16)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    check_attention(student, q, k, v, mask, "attention with scores near 1e4")


@pytest.mark.check("attention-broadcast-mask")
def test_attention_broadcast_mask(student):
    q, k, v = randn(10, 2, 3, 5, 4), randn(11, 2, 3, 5, 4), randn(12, 2, 3, 5, 4)
    docs = relabel(42, torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 2, 2]]), 0, 9)
    mask = (docs[:, :, None] == docs[:, None, :]) & torch.ones(5, 5, dtype=torch.bool).tril()
    check_attention(student, q, k, v, mask[:, None], "attention with a mask [2, 1, 5, 5]")
