"""Lesson 3 — Training pairs: shifted targets, sliding windows, batches.

A language model learns from pairs (x, y) where y is x moved one token to the left: at every
position t, the target is the token that comes next. Long texts are cut into windows of
``context_length`` tokens, with a stride that controls how much neighbouring windows overlap.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset


def shift(ids: Tensor) -> tuple[Tensor, Tensor]:
    """Split a run of ids into model inputs and next-token targets.

    Along the last dimension, the inputs are every token but the last and the targets every
    token but the first, so ``targets[..., t]`` is the token that follows ``inputs[..., t]``.

    Shapes:
        ids: [*S, T]. returns: (inputs [*S, T-1], targets [*S, T-1]).

    Example:
        >>> shift(torch.tensor([5, 6, 7, 8]))
        (tensor([5, 6, 7]), tensor([6, 7, 8]))
    """
    raise NotImplementedError('shift in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#shifted-targets)')


def window_starts(n_tokens: int, context_length: int, stride: int) -> list[int]:
    """Every start of a training window over ``n_tokens`` tokens.

    A window needs ``context_length`` inputs plus one more token for the last target, so a
    start s is valid when ``s + context_length + 1 <= n_tokens``. Starts are 0, stride,
    2*stride, ... A stride equal to the context length gives windows that do not overlap;
    a smaller stride gives more (overlapping) windows from the same text.

    Example:
        >>> window_starts(16, 4, 4)
        [0, 4, 8]
        >>> window_starts(16, 4, 2)
        [0, 2, 4, 6, 8, 10]
    """
    raise NotImplementedError('window_starts in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#stride-and-overlap)')


class TokenWindows(Dataset):
    """A ``Dataset`` of (inputs, targets) windows over one long run of token ids.

    Item i covers the tokens from ``starts[i]`` to ``starts[i] + context_length`` inclusive:
    x is the first ``context_length`` of them and y the last ``context_length`` (x shifted
    by one). ``len(dataset)`` is the number of window starts.

    Args:
        ids: a 1-D integer tensor (or list) of token ids.
        context_length: tokens per input window. stride: distance between window starts.

    Example:
        >>> ds = TokenWindows(torch.arange(10), context_length=4, stride=4)
        >>> len(ds), ds[1]
        (2, (tensor([4, 5, 6, 7]), tensor([5, 6, 7, 8])))
    """

    def __init__(self, ids: Tensor | list[int], context_length: int, stride: int) -> None:
        raise NotImplementedError('TokenWindows.__init__ in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#a-dataset-of-windows)')

    def __len__(self) -> int:
        raise NotImplementedError('TokenWindows.__len__ in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#a-dataset-of-windows)')

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        raise NotImplementedError('TokenWindows.__getitem__ in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#a-dataset-of-windows)')


def make_loader(
    ids: Tensor | list[int],
    batch_size: int,
    context_length: int,
    stride: int,
    shuffle: bool = True,
    drop_last: bool = True,
    seed: int | None = None,
) -> DataLoader:
    """A ``DataLoader`` of batches of windows.

    Wrap ``TokenWindows(ids, context_length, stride)`` in a ``DataLoader``. When ``seed`` is
    given, pass ``generator=torch.Generator().manual_seed(seed)`` so the shuffled order is
    reproducible (and exactly PyTorch's order for that seed).

    Each batch is (x [batch_size, context_length], y [batch_size, context_length]).
    """
    raise NotImplementedError('make_loader in exercises/windows.py is not implemented yet (lesson 3, Training pairs: see course/chapters/03-windows.md#batches)')
