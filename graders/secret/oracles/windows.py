"""The windows lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from graders.worker import scenarios

from .. import trusted
from . import unknown


def shift(ids: Tensor) -> tuple[Tensor, Tensor]:
    return trusted.shift(ids)


def shift_mistakes(ids: Tensor, mistake: str) -> list[tuple[Tensor, Tensor]]:
    """The answers a mistake gives (some mistakes have several forms)."""
    answers = {
        "not-shifted": [(ids, ids), (ids[..., :-1], ids[..., :-1]), (ids[..., 1:], ids[..., 1:])],
        "swapped": [(ids[..., 1:], ids[..., :-1])],
        "first-dim": [(ids[:-1], ids[1:])],
        "by-two": [(ids[..., :-2], ids[..., 2:])],
    }
    if mistake not in answers:
        raise unknown(mistake)
    return answers[mistake]


def window_starts(
    n_tokens: int, context_length: int, stride: int, mistake: str | None = None
) -> list[int]:
    n, c, s = n_tokens, context_length, stride
    if mistake is None:
        return trusted.window_starts(n, c, s)
    if mistake == "no-target-room":
        return list(range(0, max(n - c + 1, 0), s))
    if mistake == "misses-last":
        return list(range(0, max(n - c - 1, 0), s))
    if mistake == "ignores-stride":
        return list(range(0, max(n - c, 0), c))
    raise unknown(mistake)


def token_windows(ids: Any, context_length: int, stride: int) -> dict:
    """What the token_windows scenario gives with the trusted TokenWindows."""
    return scenarios.scenario_token_windows(trusted.TokenWindows, ids, context_length, stride)


def _make_loader(
    ids: Any,
    batch_size: int,
    context_length: int,
    stride: int,
    shuffle: bool = True,
    drop_last: bool = True,
    seed: int | None = None,
) -> DataLoader:
    """PyTorch's DataLoader over the trusted windows."""
    seeded: dict[str, Any] = (
        {} if seed is None else {"generator": torch.Generator().manual_seed(seed)}
    )
    windows = trusted.TokenWindows(ids, context_length, stride)
    return DataLoader(
        windows, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, **seeded
    )


def make_loader(
    ids: Any, batch_size: int, context_length: int, stride: int, epochs: int = 1, **options: Any
) -> list:
    """The batches of each epoch the make_loader scenario gives with the oracle's loader."""
    return scenarios.scenario_make_loader(
        _make_loader, ids, batch_size, context_length, stride, epochs=epochs, **options
    )["epochs"]
