"""The attention lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from . import unknown


def causal_mask(T: int, mistake: str | None = None) -> Tensor:
    ones = torch.ones(T, T, dtype=torch.bool)
    answers = {
        None: lambda: torch.tril(ones),
        "inverted": lambda: ~torch.tril(ones),
        "no-diagonal": lambda: torch.tril(ones, -1),
        "upper": lambda: torch.triu(ones),
    }
    if mistake not in answers:
        raise unknown(mistake)
    return answers[mistake]()


def _naive(q, k, v, mask=None, *, scale=None, fill=-math.inf, dim=-1, invert=False, after=False):
    """Attention written out, with the knobs of the classic mistakes."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and after:
        weights = weights * mask
    return weights @ v


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, mistake: str | None = None
) -> Tensor:
    """F.scaled_dot_product_attention, or a mistake's answer."""
    if mistake is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    D = q.shape[-1]
    knobs: dict[str, dict[str, Any]] = {
        "no-scale": {"scale": 1.0},
        "scale-by-d": {"scale": 1 / D},
        "softmax-dim": {"dim": -2},
        "mask-inverted": {"invert": True},
        "mask-zero": {"fill": 0.0},
        "mask-after-softmax": {"after": True},
    }
    if mistake == "mask-ignored":
        return _naive(q, k, v)
    if mistake not in knobs:
        raise unknown(mistake)
    return _naive(q, k, v, mask, **knobs[mistake])
