"""The objective lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from . import unknown


def cross_entropy(
    logits: Tensor, targets: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    expected = F.cross_entropy(logits, targets, ignore_index=ignore_index)
    if mistake is None:
        return expected
    per_row = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="none")
    if mistake == "mean-over-all":
        return per_row.sum() / len(targets)
    if mistake == "sum":
        return per_row.sum()
    if mistake == "negated":
        return -expected
    if mistake == "no-max-back":  # log(sum(exp(z - m))) without adding m back
        keep = targets != ignore_index
        z = logits[keep]
        shifted = z - z.max(dim=-1, keepdim=True).values
        picked = z.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
        return (shifted.exp().sum(dim=-1).log() - picked).mean()
    raise unknown(mistake)


def cross_entropy_grad(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    """The gradient of the mean loss with respect to the logits."""
    leaf = logits.clone().requires_grad_(True)
    F.cross_entropy(leaf, targets, ignore_index=ignore_index).backward()
    assert leaf.grad is not None
    return leaf.grad


def lm_loss(
    logits: Tensor, ids: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    V = logits.shape[-1]
    if mistake == "not-shifted":
        return F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1), ignore_index=ignore_index)
    if mistake == "shifted-backwards":
        return F.cross_entropy(
            logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1), ignore_index=ignore_index
        )
    if mistake == "sum":
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, V),
            ids[:, 1:].reshape(-1),
            ignore_index=ignore_index,
            reduction="sum",
        )
    if mistake == "row-means":
        rows = [
            F.cross_entropy(row[:-1], row_ids[1:], ignore_index=ignore_index)
            for row, row_ids in zip(logits, ids, strict=True)
        ]
        return torch.stack(rows).mean()
    if mistake is not None:
        raise unknown(mistake)
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), ignore_index=ignore_index
    )


def perplexity(loss: float | Tensor, mistake: str | None = None) -> float:
    if mistake is None:
        return math.exp(float(loss))
    if mistake == "base-two":
        return 2 ** float(loss)
    raise unknown(mistake)


def pad_targets(
    targets: Tensor, pad_id: int, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    if mistake is None:
        return torch.where(targets == pad_id, ignore_index, targets)
    if mistake == "zero-not-pad":
        return torch.where(targets == 0, ignore_index, targets)
    raise unknown(mistake)
