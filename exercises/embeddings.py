"""Lesson 2 — Tokens become vectors: embedding tables and position vectors.

A token id is just a row number. An embedding table of shape [V, C] holds one learned vector
of C numbers per token; "embedding" a sequence of ids means reading those rows. A second
table adds one learned vector per position, so the model can tell "dog bites man" from
"man bites dog".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def lookup(table: Tensor, ids: Tensor) -> Tensor:
    """Read the rows of ``table`` named by ``ids``.

    This is all ``nn.Embedding`` does in its forward pass. Because it is plain indexing,
    gradient flows back only into the rows that were read.

    Shapes:
        table: [V, C] float; ids: [*S] integer, every id in [0, V).
        returns: [*S, C], where out[..., :] == table[ids[...]].

    Example:
        >>> table = torch.tensor([[0., 0.], [1., 10.], [2., 20.]])
        >>> lookup(table, torch.tensor([[2, 1], [0, 2]]))
        tensor([[[ 2., 20.],
                 [ 1., 10.]],
                [[ 0.,  0.],
                 [ 2., 20.]]])
    """
    raise NotImplementedError('lookup in exercises/embeddings.py is not implemented yet (lesson 2, Tokens become vectors: see course/chapters/02-embeddings.md#embedding-lookup)')


def one_hot_lookup(table: Tensor, ids: Tensor) -> Tensor:
    """The same lookup, written as a one-hot matrix multiply.

    A one-hot vector for id i has V entries, all 0 except a 1 at position i. Multiplying it by
    the [V, C] table picks out row i. This is slower than indexing (it does V times more work)
    but it shows that an embedding is a linear layer applied to one-hot inputs.

    Shapes:
        table: [V, C]; ids: [*S] integer. returns: [*S, C] with table's dtype.

    Example:
        >>> table = torch.tensor([[0., 0.], [1., 10.], [2., 20.]])
        >>> one_hot_lookup(table, torch.tensor([1]))
        tensor([[ 1., 10.]])
    """
    raise NotImplementedError('one_hot_lookup in exercises/embeddings.py is not implemented yet (lesson 2, Tokens become vectors: see course/chapters/02-embeddings.md#one-hot-view)')


def add_positions(vectors: Tensor, pos_table: Tensor) -> Tensor:
    """Add a learned position vector to every token vector.

    Row t of ``pos_table`` is added to the vector at position t, the same for every sequence
    in the batch. A learned table has L rows and so a hard limit: there is no row for
    position L. Raise ``ValueError`` (naming both T and L) instead of failing inside PyTorch.

    Shapes:
        vectors: [B, T, C]; pos_table: [L, C]. returns: [B, T, C] (a new tensor).

    Example:
        >>> add_positions(torch.zeros(1, 2, 2), torch.tensor([[1., 1.], [2., 2.], [3., 3.]]))
        tensor([[[1., 1.],
                 [2., 2.]]])
    """
    raise NotImplementedError('add_positions in exercises/embeddings.py is not implemented yet (lesson 2, Tokens become vectors: see course/chapters/02-embeddings.md#position-vectors)')


def nearest(table: Tensor, index: int, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to row ``index``, by cosine similarity.

    Cosine similarity is the dot product of two vectors divided by the product of their
    lengths: 1 for the same direction, 0 for orthogonal, -1 for opposite. Row ``index`` itself
    is excluded.

    Args:
        table: [V, C] float. index: the query row. k: how many neighbours (k <= V - 1).

    Returns:
        ``k`` pairs ``(row, similarity)`` with similarity as a Python float, highest first.

    Example:
        >>> table = torch.tensor([[1., 0.], [0.9, 0.1], [0., 1.], [-1., 0.]])
        >>> [row for row, _ in nearest(table, 0, 2)]
        [1, 2]
    """
    raise NotImplementedError('nearest in exercises/embeddings.py is not implemented yet (lesson 2, Tokens become vectors: see course/chapters/02-embeddings.md#nearest-rows)')
