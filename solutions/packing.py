"""Lesson 7 — Masking and packing: many documents in one fixed-length row.

Padding short documents wastes compute. Packing concatenates documents (each ended by an
end-of-text token) and cuts the stream into rows of equal length. Then three things must
respect document boundaries: attention (a block-diagonal causal mask), positions (restart at
0 for every document) and targets (never predict the first token of the next document).
"""

from __future__ import annotations

import torch
from torch import Tensor


def pack(docs: list[list[int]], seq_len: int, eos_id: int) -> tuple[Tensor, Tensor]:
    """Concatenate documents with end-of-text tokens and cut the stream into rows.

    The stream is doc0 + [eos] + doc1 + [eos] + ...; each eos belongs to the document it
    ends. Cut the stream into rows of ``seq_len`` tokens and drop the incomplete last row.
    A document may continue from one row into the next. Alongside the ids, return for every
    token the index of the document it belongs to.

    Returns:
        (ids [N, seq_len] long, doc_ids [N, seq_len] long), N = len(stream) // seq_len.

    Example:
        >>> pack([[1, 2], [3, 4, 5]], seq_len=3, eos_id=0)
        (tensor([[1, 2, 0],
                [3, 4, 5]]), tensor([[0, 0, 0],
                [1, 1, 1]]))
    """
    # BEGIN SOLUTION
    stream: list[int] = []
    owners: list[int] = []
    for index, doc in enumerate(docs):
        stream.extend(doc)
        stream.append(eos_id)
        owners.extend([index] * (len(doc) + 1))
    n_rows = len(stream) // seq_len
    keep = n_rows * seq_len
    ids = torch.tensor(stream[:keep], dtype=torch.long).reshape(n_rows, seq_len)
    doc_ids = torch.tensor(owners[:keep], dtype=torch.long).reshape(n_rows, seq_len)
    return ids, doc_ids
    # END SOLUTION


def document_mask(doc_ids: Tensor) -> Tensor:
    """A causal, block-diagonal attention mask for packed rows.

    Position i may attend to position j when j <= i and both belong to the same document.
    Without the document condition, a token would attend into an unrelated previous document.

    Shapes:
        doc_ids: [B, T]. returns: bool [B, T, T], mask[b, i, j].

    Example:
        >>> document_mask(torch.tensor([[0, 0, 1]])).int()
        tensor([[[1, 0, 0],
                 [1, 1, 0],
                 [0, 0, 1]]], dtype=torch.int32)
    """
    # BEGIN SOLUTION
    T = doc_ids.shape[-1]
    same_doc = doc_ids.unsqueeze(-1) == doc_ids.unsqueeze(-2)
    causal = torch.ones(T, T, dtype=torch.bool, device=doc_ids.device).tril()
    return same_doc & causal
    # END SOLUTION


def position_ids(doc_ids: Tensor) -> Tensor:
    """Per-document positions: 0, 1, 2, ... restarting at every new document in a row.

    A row's first token starts a run, even if its document began in the previous row.

    Shapes:
        doc_ids: [B, T] (non-decreasing along each row). returns: [B, T] long.

    Example:
        >>> position_ids(torch.tensor([[3, 3, 4, 4, 4]]))
        tensor([[0, 1, 0, 1, 2]])
    """
    # BEGIN SOLUTION
    B, T = doc_ids.shape
    index = torch.arange(T, device=doc_ids.device).expand(B, T)
    starts = torch.ones_like(doc_ids, dtype=torch.bool)
    starts[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    run_start = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values
    return index - run_start
    # END SOLUTION


def packed_targets(input_ids: Tensor, doc_ids: Tensor, ignore_index: int = -100) -> Tensor:
    """Next-token targets that never cross a document boundary.

    Position t's target is ``input_ids[:, t+1]`` when that token belongs to the same document,
    otherwise ``ignore_index``; the last position has no next token and is ignored too.

    Shapes:
        input_ids, doc_ids: [B, T]. returns: [B, T] long.

    Example:
        >>> packed_targets(torch.tensor([[7, 8, 0, 9]]), torch.tensor([[0, 0, 0, 1]]))
        tensor([[   8,    0, -100, -100]])
    """
    # BEGIN SOLUTION
    targets = torch.full_like(input_ids, ignore_index)
    same_doc = doc_ids[:, 1:] == doc_ids[:, :-1]
    targets[:, :-1] = input_ids[:, 1:].masked_fill(~same_doc, ignore_index)
    return targets
    # END SOLUTION
