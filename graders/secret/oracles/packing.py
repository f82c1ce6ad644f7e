"""The packing lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from . import unknown

_PACK_MISTAKES = {
    "no-eos": {"with_eos": False},
    "eos-first": {"eos_first": True},
    "padded-last-row": {"pad": True},
    "row-per-doc": {"per_doc": True},
    "eos-next-doc": {"eos_next": True},
}


def pack(
    docs: list[list[int]], seq_len: int, eos: int, mistake: str | None = None
) -> tuple[Tensor, Tensor]:
    """Rows of the packed stream and its doc ids (plain Python), or a mistake's."""
    if mistake is not None and mistake not in _PACK_MISTAKES:
        raise unknown(mistake)
    flags = {} if mistake is None else _PACK_MISTAKES[mistake]
    eos_first = flags.get("eos_first", False)
    with_eos = flags.get("with_eos", True)
    pad = flags.get("pad", False)
    per_doc = flags.get("per_doc", False)
    eos_next = flags.get("eos_next", False)
    stream, owner = [], []
    for i, doc in enumerate(docs):
        tokens = ([eos] + doc if eos_first else doc + [eos]) if with_eos else list(doc)
        owners = [i] * len(tokens)
        if eos_next and with_eos and not eos_first:
            owners[-1] = i + 1
        if per_doc:  # one row per document, cut or padded
            tokens = (tokens + [eos] * seq_len)[:seq_len]
            owners = (owners + [i] * seq_len)[:seq_len]
        stream += tokens
        owner += owners
    n = len(stream) // seq_len
    if pad and len(stream) % seq_len:
        extra = seq_len - len(stream) % seq_len
        stream, owner, n = stream + [eos] * extra, owner + [owner[-1]] * extra, n + 1
    ids = torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    doc_ids = torch.tensor(owner[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    return ids, doc_ids


def document_mask(doc_ids: Tensor, mistake: str | None = None) -> Tensor:
    B, T = doc_ids.shape
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(i + 1):
                mask[b, i, j] = bool(doc_ids[b, i] == doc_ids[b, j])
    if mistake is None:
        return mask
    if mistake == "causal-only":
        return torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)
    if mistake == "not-causal":
        return doc_ids[:, :, None] == doc_ids[:, None, :]
    if mistake == "inverted":
        return ~mask
    raise unknown(mistake)


def position_ids(doc_ids: Tensor, mistake: str | None = None) -> Tensor:
    knobs: dict[str | None, dict[str, Any]] = {
        None: {},
        "not-reset": {"reset": False},
        "row-continues": {"rows": False},
        "starts-at-one": {"start": 1},
    }
    if mistake not in knobs:
        raise unknown(mistake)
    reset = knobs[mistake].get("reset", True)
    rows = knobs[mistake].get("rows", True)
    start = knobs[mistake].get("start", 0)
    out = torch.zeros_like(doc_ids)
    count, previous = start - 1, None
    for b in range(doc_ids.shape[0]):
        for t in range(doc_ids.shape[1]):
            doc = int(doc_ids[b, t])
            new_run = (rows and t == 0) or (reset and doc != previous)
            count = start if new_run else count + 1
            out[b, t] = count
            previous = doc
    return out


def packed_targets(
    input_ids: Tensor, doc_ids: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    knobs = {
        None: {},
        "crosses-documents": {"check_docs": False},
        "not-shifted": {"shift": False},
        "wraps": {"wrap": True},
    }
    if mistake not in knobs:
        raise unknown(mistake)
    check_docs = knobs[mistake].get("check_docs", True)
    shift_by_one = knobs[mistake].get("shift", True)
    wrap = knobs[mistake].get("wrap", False)
    B, T = input_ids.shape
    out = torch.full_like(input_ids, ignore_index)
    for b in range(B):
        for t in range(T):
            nxt = t + 1 if shift_by_one else t
            if nxt == T:
                if not wrap:
                    continue
                nxt = 0
            if not check_docs or doc_ids[b, nxt] == doc_ids[b, t]:
                out[b, t] = input_ids[b, nxt]
    return out
