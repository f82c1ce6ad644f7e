"""Planted variants of lesson 4, attention (solutions/attention.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant

WRONG: list[Variant] = [
    V(
        "attention",
        "causal_mask",
        "inverted",
        "inverted",
        """
        def causal_mask(T):
            return torch.ones(T, T, dtype=torch.bool).triu(1)
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "no-diagonal",
        "no-diagonal",
        """
        def causal_mask(T):
            return torch.ones(T, T, dtype=torch.bool).tril(-1)
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "float",
        "not-bool",
        """
        def causal_mask(T):
            return torch.ones(T, T).tril()
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "upper",
        "upper",
        """
        def causal_mask(T):
            return torch.ones(T, T, dtype=torch.bool).triu()
    """,
    ),
    V(
        "attention",
        "attention",
        "no-sqrt-d",
        "no-scale",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-inverted",
        "mask-inverted",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-inverted-finite-fill",
        "mask-inverted",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, -1e9)  # no NaN: a fully masked row averages
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-ignored",
        "mask-ignored",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "overflow",
        "overflow",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            weights = scores.exp()
            if mask is not None:
                weights = weights * mask
            return weights / weights.sum(dim=-1, keepdim=True) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "softmax-dim",
        "softmax-dim",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, dim=-2) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-after-softmax",
        "mask-after-softmax",
        """
        def attention(q, k, v, mask=None):
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            if mask is not None:
                weights = weights.masked_fill(~mask, 0.0)
            return weights @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-zero",
        "mask-zero",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, 0.0)
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "scale-by-d",
        "scale-by-d",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / q.shape[-1]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "attention",
        "causal_mask",
        "compare-aranges",
        None,
        """
        def causal_mask(T):
            positions = torch.arange(T)
            return positions.unsqueeze(0) <= positions.unsqueeze(1)
    """,
    ),
    V(
        "attention",
        "attention",
        "manual-softmax",
        None,
        """
        def attention(q, k, v, mask=None):
            scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
            if mask is not None:
                scores = torch.where(mask, scores, torch.tensor(float("-inf")))
            scores = scores - scores.amax(dim=-1, keepdim=True)
            weights = scores.exp()
            return (weights / weights.sum(dim=-1, keepdim=True)) @ v
    """,
    ),
]
