"""From corpus text to training batches: tokenize, split, window, batch.

Training reads windows of the training split in a shuffled order that depends only on the
seed and the epoch, so the batch at any step can be recomputed: that is what makes a resumed
run identical to an uninterrupted one. Windows and loaders are the lessons' own
(``windows``), from the ``lessons`` passed in (default: the reference).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from .lessons import Lessons, load
from .tokenizer import Encoding
from .vocab import gpt2_encoding

Batch = tuple[Tensor, Tensor]


def tokenize(text: str, encoding: Encoding | None = None) -> Tensor:
    """The ids of ``text``: GPT-2's by default (tiktoken's fast encoder; ``tokens.encode``
    gives the same ids), or those of another ``encoding`` (a ``gpt.tokenizer`` one)."""
    encoding = gpt2_encoding() if encoding is None else encoding
    return torch.tensor(encoding.encode_ordinary(text), dtype=torch.long)


def split(ids: Tensor, val_fraction: float) -> tuple[Tensor, Tensor]:
    """The first (1 - val_fraction) of the tokens for training, the rest for validation.

    A contiguous tail, not random windows: neighbouring windows overlap, so a random split
    would leak validation text into training.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    cut = int(len(ids) * (1.0 - val_fraction))
    return ids[:cut], ids[cut:]


def unigram_entropy(ids: Tensor) -> float:
    """Entropy, in nats, of the token frequencies of ``ids``.

    The loss of the best model that ignores context altogether: a GPT that has learned
    anything from context must beat it.
    """
    counts = torch.bincount(ids).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


class BatchStream:
    """Endless training batches whose order is a pure function of (seed, position).

    Epoch e shuffles the windows with seed ``seed + e``; position p is the p-th batch
    overall. ``batches_from(p)`` starts anywhere, so resuming at step s with grad_accum a
    reads exactly the batches an uninterrupted run would have read from p = s * a.
    """

    def __init__(
        self,
        ids: Tensor,
        batch_size: int,
        context_length: int,
        stride: int,
        seed: int,
        lessons: Lessons | str | None = None,
    ) -> None:
        self.ids, self.batch_size = ids, batch_size
        self.context_length, self.stride, self.seed = context_length, stride, seed
        self.windows = load(lessons).windows
        n_windows = len(self.windows.window_starts(len(ids), context_length, stride))
        self.batches_per_epoch = n_windows // batch_size
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"the training split has {len(ids)} tokens: too few for one batch of "
                f"{batch_size} windows of {context_length} tokens; use a smaller "
                "--batch-size or --context-length, or a larger corpus"
            )

    def _epoch(self, epoch: int) -> Iterator[Batch]:
        return iter(
            self.windows.make_loader(
                self.ids,
                self.batch_size,
                self.context_length,
                self.stride,
                shuffle=True,
                drop_last=True,
                seed=self.seed + epoch,
            )
        )

    def batches_from(self, position: int) -> Iterator[Batch]:
        epoch, offset = divmod(position, self.batches_per_epoch)
        while True:
            batches = self._epoch(epoch)
            for _ in range(offset):
                next(batches)
            yield from batches
            epoch, offset = epoch + 1, 0


def eval_batches(
    ids: Tensor,
    batch_size: int,
    context_length: int,
    max_batches: int,
    lessons: Lessons | str | None = None,
) -> list[Batch]:
    """Up to ``max_batches`` fixed, non-overlapping validation batches (the same every time)."""
    loader = load(lessons).windows.make_loader(
        ids, batch_size, context_length, stride=context_length, shuffle=False, drop_last=False
    )
    batches: list[Batch] = []
    for batch in loader:
        if len(batches) == max_batches:
            break
        batches.append(batch)
    if not batches:
        raise ValueError(
            f"the validation split has {len(ids)} tokens: too few for one window of "
            f"{context_length}; use a smaller --context-length or a larger --val-fraction"
        )
    return batches
