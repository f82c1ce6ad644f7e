"""Trusted implementations of exercises: instructors' graders only, never released.

They run in the checker's process only, never in the worker that runs the student's code: the
oracles (graders/secret/oracles/) compute expected answers with them, and
graders/secret/dependencies.py answers the worker's proxies with them (``fit`` is graded with
a correct ``train_step`` and ``evaluate``, ``lm_loss`` with a correct ``cross_entropy``, ...),
so that every check grades one function and a mistake in one function costs only its own
checks.

These are reference implementations of exercises, so this file is as secret as solutions/:
the student release leaves it out (instructor/release.py), and a released copy of the
graders, which lacks it, grades a function with the submission's own versions of the
functions it builds on.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from gpt.vocab import GPT2_PATTERN


def next_token_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    logits = model(x)
    return F.cross_entropy(logits.flatten(0, -2).float(), y.flatten(), ignore_index=-100)


def split_pieces(text: str) -> list[str]:
    import regex

    return regex.findall(GPT2_PATTERN, text)


def bpe_merge(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    parts = [bytes([b]) for b in piece]
    while True:
        pairs = [
            (ranks.get(a + b), i) for i, (a, b) in enumerate(zip(parts, parts[1:], strict=False))
        ]
        ranked = [(rank, i) for rank, i in pairs if rank is not None]
        if not ranked:
            return [ranks[part] for part in parts]
        _, i = min(ranked)  # lowest rank; the smallest index among equal ranks
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    return F.cross_entropy(logits, targets, ignore_index=ignore_index)


def add_positions(vectors: Tensor, pos_table: Tensor) -> Tensor:
    T, L = vectors.shape[1], pos_table.shape[0]
    if T > L:  # as the lesson asks: gpt_logits' check of a sequence too long rests on it
        raise ValueError(f"sequence length T={T} exceeds the position table's L={L} rows")
    return vectors + pos_table[:T]


def shift(ids: Tensor) -> tuple[Tensor, Tensor]:
    return ids[..., :-1], ids[..., 1:]


def window_starts(n_tokens: int, context_length: int, stride: int) -> list[int]:
    return [s for s in range(0, n_tokens, stride) if s + context_length + 1 <= n_tokens]


class TokenWindows(Dataset):
    def __init__(self, ids: Tensor | list[int], context_length: int, stride: int) -> None:
        self.ids = torch.as_tensor(ids, dtype=torch.long)
        self.span = context_length + 1  # inputs and the one target after them
        self.starts = window_starts(len(self.ids), context_length, stride)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        window = self.ids[self.starts[i] : self.starts[i] + self.span]
        return window[:-1], window[1:]


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        k = min(top_k, scaled.shape[-1])
        kth = scaled.sort(dim=-1, descending=True).values[..., k - 1 : k]
        scaled = torch.where(scaled >= kth, scaled, float("-inf"))
    return torch.multinomial(scaled.softmax(dim=-1), 1, generator=generator).squeeze(-1)


def accumulate(
    model: nn.Module,
    micro_batches: list,
    max_grad_norm: float = 1.0,
    *,
    scale: bool = True,
    clip: bool = True,
) -> float:
    """A step's gradients (accumulated, clipped) and its mean loss, without the update."""
    model.train()
    losses = []
    for x, y in micro_batches:
        loss = next_token_loss(model, x, y)
        (loss / len(micro_batches) if scale else loss).backward()
        losses.append(loss.item())
    if clip:
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    return sum(losses) / len(losses)


def train_step(
    model: nn.Module,
    micro_batches: list,
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float = 1.0,
    *,
    scale: bool = True,
    clip: bool = True,
) -> float:
    """The reference step; ``scale``/``clip`` False give the classic mistakes, for diagnosis."""
    loss = accumulate(model, micro_batches, max_grad_norm, scale=scale, clip=clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def evaluate(model: nn.Module, batches: Iterable) -> float:
    mode = model.training
    model.eval()
    with torch.no_grad():
        losses = [next_token_loss(model, x, y).item() for x, y in batches]
    model.train(mode)
    return sum(losses) / len(losses)
