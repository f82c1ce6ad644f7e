"""Lesson 7, Masking and packing: hidden checks (random documents)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.answers import oracle
from graders.checking import hidden_settings
from graders.public.test_packing import check_mask, check_pack, check_positions, check_targets

documents = st.lists(st.lists(st.integers(1, 50256), max_size=9), min_size=1, max_size=8)


@pytest.mark.check("pack-random")
@hidden_settings
@given(docs=documents, seq_len=st.integers(1, 9))
def test_pack_random(student, docs, seq_len):
    check_pack(student, docs, seq_len, "pack")


def doc_rows(docs, seq_len):
    ids, doc_ids = oracle.pack(docs, seq_len, 0)
    return ids, doc_ids


@pytest.mark.check("document-mask-random")
@hidden_settings
@given(docs=documents, seq_len=st.integers(1, 9))
def test_document_mask_random(student, docs, seq_len):
    _, doc_ids = doc_rows(docs, seq_len)
    if len(doc_ids):
        check_mask(student, doc_ids, "document_mask")


@pytest.mark.check("position-ids-random")
@hidden_settings
@given(docs=documents, seq_len=st.integers(1, 9), offset=st.integers(0, 1000))
def test_position_ids_random(student, docs, seq_len, offset):
    _, doc_ids = doc_rows(docs, seq_len)
    if len(doc_ids):
        check_positions(student, doc_ids + offset, "position_ids")


@pytest.mark.check("packed-targets-random")
@hidden_settings
@given(docs=documents, seq_len=st.integers(1, 9), ignore_index=st.sampled_from([-100, -7]))
def test_packed_targets_random(student, docs, seq_len, ignore_index):
    ids, doc_ids = doc_rows(docs, seq_len)
    if len(ids):
        check_targets(student, ids, doc_ids, "packed_targets", ignore_index=ignore_index)
