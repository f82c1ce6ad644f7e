"""Lesson 7, Masking and packing: public checks, against plain Python loops."""

from __future__ import annotations

import pytest
import torch

from graders.answers import later, oracle
from graders.checking import as_pair, expect_close, relabel

EOS = 0
PACK_MISTAKES = (
    ("no-eos", "no-last-eos", "eos-first", "padded-last-row", "row-per-doc"),
    ("eos-next-doc",),
)


def check_pack(student, docs, seq_len, what, *, part: int | None = None) -> None:
    """``part`` 0 checks the ids, 1 the doc ids, None both."""
    expected = oracle.pack(docs, seq_len, EOS)
    mistakes = [
        {key: later.pack(docs, seq_len, EOS, mistake=key).then(lambda r, p=p: r[p]) for key in keys}
        for p, keys in enumerate(PACK_MISTAKES)
    ]
    result = as_pair(student.call("pack", docs, seq_len, EOS), what)
    parts = (0, 1) if part is None else (part,)
    names = ("ids", "doc_ids")
    for p in parts:
        expect_close(result[p], expected[p], f"{what}: the {names[p]}", mistakes=mistakes[p])


DOCS = [[11, 12, 13], [21, 22], [31, 32, 33, 34, 35], [41]]


@pytest.mark.check("pack-rows")
def test_pack_rows(student):
    check_pack(student, [[1, 2], [3, 4, 5]], 3, "pack([[1, 2], [3, 4, 5]], 3, eos=0)", part=0)
    docs = relabel(1, DOCS, 1, 50257)  # never the end-of-text id, 0
    check_pack(student, docs, 4, f"pack({docs}, 4, eos=0)", part=0)
    # The last eos completes the last row: without it that row is dropped.
    short = relabel(11, [[1, 2], [3, 4]], 1, 50257)
    check_pack(student, short, 3, f"pack({short}, 3, eos=0)", part=0)


@pytest.mark.check("pack-doc-ids")
def test_pack_doc_ids(student):
    docs = relabel(2, DOCS, 1, 50257)
    check_pack(student, docs, 5, f"pack({docs}, 5, eos=0)", part=1)


def check_mask(student, doc_ids, what):
    expect_close(
        student.call("document_mask", doc_ids),
        oracle.document_mask(doc_ids),
        what,
        mistakes={
            key: later.document_mask(doc_ids, mistake=key)
            for key in ("causal-only", "not-causal", "inverted")
        },
    )


@pytest.mark.check("document-mask-example")
def test_document_mask_example(student):
    check_mask(student, torch.tensor([[0, 0, 1]]), "document_mask([[0, 0, 1]])")
    doc_ids = relabel(3, torch.tensor([[4, 4, 4, 5, 5, 6, 6, 6]]), 0, 1000)  # in order still
    check_mask(student, doc_ids, f"document_mask({doc_ids.tolist()})")


@pytest.mark.check("document-mask-batch")
def test_document_mask_batch(student):
    doc_ids = relabel(4, torch.tensor([[0, 0, 1, 1, 1], [1, 2, 2, 2, 3], [3, 3, 3, 3, 3]]), 0, 1000)
    check_mask(student, doc_ids, "document_mask(doc_ids [3, 5])")


def check_positions(student, doc_ids, what):
    expect_close(
        student.call("position_ids", doc_ids),
        oracle.position_ids(doc_ids),
        what,
        mistakes={
            key: later.position_ids(doc_ids, mistake=key)
            for key in ("not-reset", "row-continues", "starts-at-one")
        },
    )


@pytest.mark.check("position-ids-example")
def test_position_ids_example(student):
    check_positions(student, torch.tensor([[3, 3, 4, 4, 4]]), "position_ids([[3, 3, 4, 4, 4]])")
    doc_ids = relabel(5, torch.tensor([[0, 1, 1, 2, 2, 2, 3]]), 0, 1000)
    check_positions(student, doc_ids, f"position_ids({doc_ids.tolist()})")


@pytest.mark.check("position-ids-batch")
def test_position_ids_batch(student):
    # Row 1 continues document 1 from row 0: its positions still start at 0.
    doc_ids = relabel(6, torch.tensor([[0, 0, 0, 1, 1], [1, 1, 2, 2, 2], [2, 3, 3, 3, 3]]), 0, 1000)
    check_positions(student, doc_ids, "position_ids(doc_ids [3, 5])")


def check_targets(student, input_ids, doc_ids, what, ignore_index=None):
    args = (input_ids, doc_ids) if ignore_index is None else (input_ids, doc_ids, ignore_index)
    index = -100 if ignore_index is None else ignore_index
    expect_close(
        student.call("packed_targets", *args),
        oracle.packed_targets(input_ids, doc_ids, index),
        what,
        mistakes={
            **{
                key: later.packed_targets(input_ids, doc_ids, index, mistake=key)
                for key in ("crosses-documents", "not-shifted", "wraps")
            },
            **(
                {"hard-coded-ignore": later.packed_targets(input_ids, doc_ids)}
                if index != -100
                else {}
            ),
        },
    )


@pytest.mark.check("packed-targets-example")
def test_packed_targets_example(student):
    ids = relabel(7, torch.tensor([[7, 8, 0, 9]]), 0, 50257, keep=(EOS,))
    docs = relabel(8, torch.tensor([[0, 0, 0, 1]]), 0, 1000)
    check_targets(student, ids, docs, f"packed_targets({ids.tolist()}, {docs.tolist()})")
    ids, docs = oracle.pack(DOCS, 5, EOS)
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
        relabel(9, torch.tensor([[5, 6, 0, 7, 0]]), 0, 50257, keep=(EOS,)),
        relabel(10, torch.tensor([[0, 0, 0, 1, 1]]), 0, 1000),
        "packed_targets(..., ignore_index=-1)",
        ignore_index=-1,
    )
