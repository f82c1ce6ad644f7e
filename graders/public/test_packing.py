"""Lesson 6, Masking and packing: public checks, against plain Python loops."""

from __future__ import annotations

import pytest
import torch

from graders.checking import as_pair, expect_close

EOS = 0


def pack_oracle(
    docs, seq_len, eos, *, eos_first=False, with_eos=True, pad=False, per_doc=False, eos_next=False
):
    """Rows of the packed stream (and its doc ids); the flags give classic mistakes."""
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


def check_pack(student, docs, seq_len, what, *, part: int | None = None) -> None:
    """``part`` 0 checks the ids, 1 the doc ids, None both."""
    result = as_pair(student.call("pack", docs, seq_len, EOS), what)
    expected = pack_oracle(docs, seq_len, EOS)
    parts = (0, 1) if part is None else (part,)
    names = ("ids", "doc_ids")
    for p in parts:
        if p == 0:
            mistakes = {
                "no-eos": pack_oracle(docs, seq_len, EOS, with_eos=False)[0],
                "eos-first": pack_oracle(docs, seq_len, EOS, eos_first=True)[0],
                "padded-last-row": pack_oracle(docs, seq_len, EOS, pad=True)[0],
                "row-per-doc": pack_oracle(docs, seq_len, EOS, per_doc=True)[0],
            }
        else:
            mistakes = {"eos-next-doc": pack_oracle(docs, seq_len, EOS, eos_next=True)[1]}
        expect_close(result[p], expected[p], f"{what}: the {names[p]}", mistakes=mistakes)


DOCS = [[11, 12, 13], [21, 22], [31, 32, 33, 34, 35], [41]]


@pytest.mark.check("pack-rows")
def test_pack_rows(student):
    check_pack(student, [[1, 2], [3, 4, 5]], 3, "pack([[1, 2], [3, 4, 5]], 3, eos=0)", part=0)
    check_pack(student, DOCS, 4, f"pack({DOCS}, 4, eos=0)", part=0)


@pytest.mark.check("pack-doc-ids")
def test_pack_doc_ids(student):
    check_pack(student, DOCS, 5, f"pack({DOCS}, 5, eos=0)", part=1)


def mask_oracle(doc_ids: torch.Tensor) -> torch.Tensor:
    B, T = doc_ids.shape
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(i + 1):
                mask[b, i, j] = bool(doc_ids[b, i] == doc_ids[b, j])
    return mask


def check_mask(student, doc_ids, what):
    T = doc_ids.shape[-1]
    causal = torch.ones(T, T, dtype=torch.bool).tril().expand(doc_ids.shape[0], T, T)
    same_doc = doc_ids[:, :, None] == doc_ids[:, None, :]
    expected = mask_oracle(doc_ids)
    expect_close(
        student.call("document_mask", doc_ids),
        expected,
        what,
        mistakes={"causal-only": causal, "not-causal": same_doc, "inverted": ~expected},
    )


@pytest.mark.check("document-mask-example")
def test_document_mask_example(student):
    check_mask(student, torch.tensor([[0, 0, 1]]), "document_mask([[0, 0, 1]])")
    doc_ids = torch.tensor([[4, 4, 4, 5, 5, 6, 6, 6]])
    check_mask(student, doc_ids, f"document_mask({doc_ids.tolist()})")


@pytest.mark.check("document-mask-batch")
def test_document_mask_batch(student):
    doc_ids = torch.tensor([[0, 0, 1, 1, 1], [1, 2, 2, 2, 3], [3, 3, 3, 3, 3]])
    check_mask(student, doc_ids, "document_mask(doc_ids [3, 5])")


def positions_oracle(
    doc_ids: torch.Tensor, *, reset: bool = True, rows: bool = True, start: int = 0
) -> torch.Tensor:
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


def check_positions(student, doc_ids, what):
    expect_close(
        student.call("position_ids", doc_ids),
        positions_oracle(doc_ids),
        what,
        mistakes={
            "not-reset": positions_oracle(doc_ids, reset=False),
            "row-continues": positions_oracle(doc_ids, rows=False),
            "starts-at-one": positions_oracle(doc_ids, start=1),
        },
    )


@pytest.mark.check("position-ids-example")
def test_position_ids_example(student):
    check_positions(student, torch.tensor([[3, 3, 4, 4, 4]]), "position_ids([[3, 3, 4, 4, 4]])")
    check_positions(
        student, torch.tensor([[0, 1, 1, 2, 2, 2, 3]]), "position_ids([[0, 1, 1, 2, 2, 2, 3]])"
    )


@pytest.mark.check("position-ids-batch")
def test_position_ids_batch(student):
    # Row 1 continues document 1 from row 0: its positions still start at 0.
    doc_ids = torch.tensor([[0, 0, 0, 1, 1], [1, 1, 2, 2, 2], [2, 3, 3, 3, 3]])
    check_positions(student, doc_ids, "position_ids(doc_ids [3, 5])")


def targets_oracle(
    input_ids, doc_ids, ignore_index=-100, *, check_docs=True, shift=True, wrap=False
):
    B, T = input_ids.shape
    out = torch.full_like(input_ids, ignore_index)
    for b in range(B):
        for t in range(T):
            nxt = t + 1 if shift else t
            if nxt == T:
                if not wrap:
                    continue
                nxt = 0
            if not check_docs or doc_ids[b, nxt] == doc_ids[b, t]:
                out[b, t] = input_ids[b, nxt]
    return out


def check_targets(student, input_ids, doc_ids, what, ignore_index=None):
    args = (input_ids, doc_ids) if ignore_index is None else (input_ids, doc_ids, ignore_index)
    index = -100 if ignore_index is None else ignore_index
    expect_close(
        student.call("packed_targets", *args),
        targets_oracle(input_ids, doc_ids, index),
        what,
        mistakes={
            "crosses-documents": targets_oracle(input_ids, doc_ids, index, check_docs=False),
            "not-shifted": targets_oracle(input_ids, doc_ids, index, shift=False),
            "wraps": targets_oracle(input_ids, doc_ids, index, wrap=True),
        },
    )


@pytest.mark.check("packed-targets-example")
def test_packed_targets_example(student):
    check_targets(
        student,
        torch.tensor([[7, 8, 0, 9]]),
        torch.tensor([[0, 0, 0, 1]]),
        "packed_targets([[7, 8, 0, 9]], [[0, 0, 0, 1]])",
    )
    ids, docs = pack_oracle(DOCS, 5, EOS)
    check_targets(student, ids, docs, f"packed_targets of pack({DOCS}, 5)")
    check_targets(
        student,
        torch.tensor([[1, 2, 3, 4]]),
        torch.tensor([[5, 5, 5, 5]]),
        "packed_targets([[1, 2, 3, 4]], [[5, 5, 5, 5]]) (one document)",
    )


@pytest.mark.check("packed-targets-ignore-index")
def test_packed_targets_ignore_index(student):
    check_targets(
        student,
        torch.tensor([[5, 6, 0, 7, 0]]),
        torch.tensor([[0, 0, 0, 1, 1]]),
        "packed_targets(..., ignore_index=-1)",
        ignore_index=-1,
    )
