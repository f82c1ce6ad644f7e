"""The embeddings lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from . import unknown


def lookup(table: Tensor, ids: Tensor, mistake: str | None = None) -> Tensor:
    if mistake is None:
        return F.embedding(ids, table)
    if mistake == "off-by-one":
        return table[ids - 1]
    if mistake == "flattened":
        return F.embedding(ids, table).reshape(-1, table.shape[-1])
    if mistake == "squeezed":
        return F.embedding(ids, table).squeeze()
    raise unknown(mistake)


def lookup_grad(table: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
    """The gradient that reaches the table when ``(lookup(table, ids) * weights).sum()`` is
    differentiated: each looked-up row collects the weights of every place it went to."""
    grad = torch.zeros_like(table)
    return grad.index_add_(0, ids.reshape(-1), weights.reshape(-1, table.shape[-1]))


def add_positions_grads(pos_table: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """The gradients that reach (vectors, pos_table) when ``(add_positions(...) * weights).sum()``
    is differentiated: the weights themselves, and for row t of the table the sum over the
    batch of position t's weights (rows past T get none)."""
    T = weights.shape[1]
    grad_pos = torch.zeros_like(pos_table)
    grad_pos[:T] = weights.sum(dim=0)
    return weights.clone(), grad_pos


def add_positions(vectors: Tensor, pos_table: Tensor, mistake: str | None = None) -> Tensor:
    T = vectors.shape[1]
    if mistake is None:
        return vectors + pos_table[:T]
    if mistake == "wrong-rows":
        return vectors + pos_table[-T:]
    raise unknown(mistake)


def nearest(
    table: Tensor, index: int, k: int, mistake: str | None = None
) -> list[tuple[int, float]]:
    """The contract's answer, or that of a mistake ("includes-self", "dot-product",
    "ascending")."""
    if mistake not in (None, "includes-self", "dot-product", "ascending"):
        raise unknown(mistake)
    if mistake == "dot-product":
        sims = table @ table[index]
    else:
        sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
    order = sorted(range(len(table)), key=lambda r: float(sims[r]), reverse=mistake != "ascending")
    rows = [r for r in order if not (mistake != "includes-self" and r == index)][:k]
    return [(r, float(sims[r])) for r in rows]
