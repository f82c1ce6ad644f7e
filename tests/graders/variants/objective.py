"""Planted variants of lesson 6, objective (solutions/objective.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant

WRONG: list[Variant] = [
    V(
        "objective",
        "cross_entropy",
        "max-subtracted-in-place",
        "in-place",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits -= logits.max(dim=-1, keepdim=True).values
            log_norm = logits[keep].exp().sum(dim=-1).log()
            picked = logits[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "mean-over-all",
        "mean-over-all",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            kept = logits[keep]
            peak = kept.max(dim=-1, keepdim=True).values
            log_norm = peak.squeeze(-1) + (kept - peak).exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum() / len(targets)
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "overflow",
        "overflow",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            kept = logits[keep]
            log_norm = kept.exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "not-ignored",
        "not-ignored",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            peak = logits.max(dim=-1, keepdim=True).values
            log_probs = logits - peak - (logits - peak).exp().sum(dim=-1, keepdim=True).log()
            return -log_probs[range(len(targets)), targets].mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "hard-coded-ignore",
        "hard-coded-ignore",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != -100
            kept = logits[keep]
            peak = kept.max(dim=-1, keepdim=True).values
            log_norm = peak.squeeze(-1) + (kept - peak).exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "library-cross-entropy",
        "by-hand",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            import torch.nn.functional as F
            return F.cross_entropy(logits, targets, ignore_index=ignore_index)
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "torch-logsumexp",
        "by-hand",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            import torch
            keep = targets != ignore_index
            kept = logits[keep]
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (torch.logsumexp(kept, dim=-1) - picked).mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "no-max-back",
        "no-max-back",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits, targets = logits[keep], targets[keep]
            shifted = logits - logits.max(dim=-1, keepdim=True).values
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (shifted.exp().sum(dim=-1).log() - picked).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "negated",
        "negated",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits, targets = logits[keep], targets[keep]
            peak = logits.max(dim=-1, keepdim=True).values.detach()
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (picked - log_norm).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "sum",
        "sum",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits, targets = logits[keep], targets[keep]
            peak = logits.max(dim=-1, keepdim=True).values.detach()
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "zero-when-all-ignored",
        "zero-when-all-ignored",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            if not keep.any():
                return logits.sum() * 0.0
            logits, targets = logits[keep], targets[keep]
            peak = logits.max(dim=-1, keepdim=True).values.detach()
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "detached",
        "detached",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits, targets = logits[keep].detach(), targets[keep]
            peak = logits.max(dim=-1, keepdim=True).values
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "not-shifted",
        "not-shifted",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits.reshape(-1, V), input_ids.reshape(-1), ignore_index)
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "backwards",
        "shifted-backwards",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits[:, 1:].reshape(-1, V), input_ids[:, :-1].reshape(-1),
                                 ignore_index)
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "ignore-index-dropped",
        "ignore-index-dropped",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1))
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "summed",
        "sum",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            import torch.nn.functional as F
            V = logits.shape[-1]
            return F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1),
                                   ignore_index=ignore_index, reduction="sum")
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "row-means",
        "row-means",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            rows = [
                cross_entropy(logits[b, :-1], input_ids[b, 1:], ignore_index)
                for b in range(logits.shape[0])
            ]
            return torch.stack(rows).mean()
    """,
    ),
    V(
        "objective",
        "perplexity",
        "base-two",
        "base-two",
        """
        def perplexity(loss):
            return 2.0 ** float(loss)
    """,
    ),
    V(
        "objective",
        "perplexity",
        "tensor",
        "tensor",
        """
        def perplexity(loss):
            import torch
            return torch.exp(torch.as_tensor(loss))
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "in-place",
        "in-place",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            targets[targets == pad_id] = ignore_index
            return targets
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "hard-coded-ignore",
        "hard-coded-ignore",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            return targets.masked_fill(targets == pad_id, -100)
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "zero-not-pad",
        "zero-not-pad",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            return targets.masked_fill(targets == 0, ignore_index)
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "objective",
        "cross_entropy",
        "masked-by-hand",
        None,
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            safe = targets.clamp(min=0) * keep
            peak = logits.amax(dim=-1, keepdim=True).detach()
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            losses = log_norm - logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
            return (losses * keep).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "class-dimension",
        None,
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            import torch.nn.functional as F
            return F.cross_entropy(logits[:, :-1].transpose(1, 2), input_ids[:, 1:],
                                   ignore_index=ignore_index)
    """,
    ),
    V(
        "objective",
        "perplexity",
        "float32-exp",
        None,
        """
        def perplexity(loss):
            import torch
            return float(torch.tensor(loss).exp())
    """,
    ),
    V(
        "objective",
        "perplexity",
        "e-power",
        None,
        """
        def perplexity(loss):
            return math.e ** float(loss)
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "where",
        None,
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            import torch
            return torch.where(targets == pad_id, torch.full_like(targets, ignore_index), targets)
    """,
    ),
]
