"""Lesson 6, The training objective: hidden checks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import hidden_settings
from graders.public.test_objective import check_ce, check_lm_loss, check_pad, check_perplexity

seeds = st.integers(0, 2**31)


def _case(seed: int, N: int, V: int, ignored: float, scale: float):
    g = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(N, V, generator=g)
    targets = torch.randint(0, V, (N,), generator=g)
    targets[torch.rand(N, generator=g) < ignored] = -100
    return logits, targets


@pytest.mark.check("ce-random")
@hidden_settings
@given(
    seed=seeds,
    N=st.integers(1, 12),
    V=st.integers(1, 12),
    ignored=st.floats(0, 0.7),
    scale=st.sampled_from([1.0, 30.0, 1e4]),
)
def test_ce_random(student, seed, N, V, ignored, scale):
    logits, targets = _case(seed, N, V, ignored, scale)
    targets[0] = 0  # at least one target counts
    check_ce(student, logits, targets, "cross_entropy", rtol=1e-4, atol=1e-3 * scale)


@pytest.mark.check("lm-loss-random")
@hidden_settings
@given(
    seed=seeds, B=st.integers(1, 3), T=st.integers(2, 8), V=st.integers(2, 10), pad=st.booleans()
)
def test_lm_loss_random(student, seed, B, T, V, pad):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g)
    ids = torch.randint(1, V, (B, T), generator=g)
    if pad:
        ids[:, T // 2 + 1 :] = 0
        check_lm_loss(student, logits, ids, "lm_loss", ignore_index=0)
    else:
        check_lm_loss(student, logits, ids, "lm_loss")


@pytest.mark.check("perplexity-random")
@hidden_settings
@given(loss=st.floats(0, 20), tensor=st.booleans())
def test_perplexity_random(student, loss, tensor):
    check_perplexity(
        student, torch.tensor(loss, dtype=torch.float64) if tensor else loss, "perplexity"
    )


@pytest.mark.check("pad-targets-random")
@hidden_settings
@given(
    seed=seeds,
    B=st.integers(1, 3),
    T=st.integers(1, 9),
    pad_id=st.integers(0, 5),
    ignore_index=st.sampled_from([-100, -1]),
)
def test_pad_targets_random(student, seed, B, T, pad_id, ignore_index):
    targets = torch.randint(0, 6, (B, T), generator=torch.Generator().manual_seed(seed))
    check_pad(student, targets, pad_id, "pad_targets", ignore_index=ignore_index)
