"""Lesson 4 — Attention: every position mixes in the positions it may see.

Each position asks a question (its query q), every position offers a key k and a value v.
The answer at a position is an average of values, weighted by how well its query matches each
key. In a GPT a position may only look at itself and the past: the causal mask.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def causal_mask(T: int) -> Tensor:
    """The causal mask for T positions: True where attention is allowed.

    Query position i may attend to key position j when j <= i, so the mask is lower
    triangular, diagonal included.

    Returns:
        bool [T, T], mask[i, j] = (j <= i).

    Example:
        >>> causal_mask(3)
        tensor([[ True, False, False],
                [ True,  True, False],
                [ True,  True,  True]])
    """
    raise NotImplementedError('causal_mask in exercises/attention.py is not implemented yet (lesson 4, Attention: see course/chapters/04-attention.md#causal-mask)')


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """Scaled dot-product attention with an optional boolean mask.

    scores = q kᵀ / √D compares every query with every key; dividing by √D keeps the scores'
    spread independent of the head size D, so the softmax does not saturate. Where ``mask`` is
    False the score becomes −inf, so that key gets exactly zero weight. A softmax over the keys
    turns each row of scores into weights that sum to 1, and the weights average the values.

    Shapes:
        q: [*S, T, D]; k: [*S, Tk, D]; v: [*S, Tk, Dv]; mask: bool broadcastable to [*S, T, Tk].
        returns: [*S, T, Dv].

    Example:
        >>> q = k = torch.zeros(1, 2, 4); v = torch.tensor([[[1.], [3.]]])
        >>> attention(q, k, v, causal_mask(2))   # equal scores: plain average of the past
        tensor([[[1.],
                 [2.]]])
    """
    raise NotImplementedError('attention in exercises/attention.py is not implemented yet (lesson 4, Attention: see course/chapters/04-attention.md#scaled-dot-product)')
