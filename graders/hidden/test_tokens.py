"""Lesson 1, Text becomes tokens: hidden checks (random text, random merge tables)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from graders.answers import oracle
from graders.checking import expect_equal, hidden_settings
from graders.gpt2 import gpt2
from graders.public.test_tokens import (
    SINGLE,
    check_decode,
    check_encode,
    check_merge,
    check_pieces,
    check_train,
)

# Text that exercises the pattern: letters and digits of several scripts, punctuation,
# apostrophes, runs of spaces, tabs and newlines, emoji. Characters are long-assigned ones, so
# the regex package and tiktoken's own engine agree on their Unicode categories.
ALPHABET = st.sampled_from(list("aZzQé東京Жжλ٣٤७7½ '\"  \n\t\r.,!?-_sdmtlvre🦖€\u00a0"))
texts = st.lists(ALPHABET, max_size=40).map("".join)


@pytest.mark.check("split-pieces-random")
@hidden_settings
@given(text=texts)
def test_split_pieces_random(student, text):
    check_pieces(student, text, "split_pieces")


@st.composite
def merge_tables(draw):
    """A piece over a small alphabet and a random table of its substrings."""
    piece = draw(st.binary(min_size=1, max_size=12).map(lambda b: bytes(97 + x % 4 for x in b)))
    subs = sorted({piece[i:j] for i in range(len(piece)) for j in range(i + 2, len(piece) + 1)})
    chosen = draw(st.lists(st.sampled_from(subs), unique=True, max_size=10)) if subs else []
    order = draw(st.permutations(chosen))
    return piece, SINGLE | {m: 256 + i for i, m in enumerate(order)}


@pytest.mark.check("bpe-merge-random")
@hidden_settings
@given(case=merge_tables())
def test_bpe_merge_random(student, case):
    piece, ranks = case
    check_merge(student, piece, ranks, "bpe_merge")


@pytest.mark.check("encode-random")
@hidden_settings
@given(text=texts)
def test_encode_random(student, text):
    check_encode(student, text, "encode")


@pytest.mark.check("decode-random")
@hidden_settings
@given(ids=st.lists(st.integers(0, 50256), max_size=20), text=texts)
def test_decode_random(student, ids, text):
    check_decode(student, ids, "decode")
    expect_equal(student.call("decode", gpt2().encode_ordinary(text)), text, "decode(encode(text))")


@st.composite
def training_texts(draw):
    """A short text over a few letters, spaces and punctuation, and a vocabulary size."""
    text = "".join(draw(st.lists(st.sampled_from(list("abcab  .,é\n'")), max_size=60)))
    return text, draw(st.integers(256, 280))


@pytest.mark.check("train-bpe-random")
@hidden_settings
@given(case=training_texts())
def test_train_bpe_random(student, case):
    text, size = case
    assume(oracle.bpe_ranks_distinct(text, size))
    check_train(student, text, size, f"train_bpe({text!r}, {size})")
