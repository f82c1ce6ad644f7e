"""The reference tokenizer against GPT-2's published ids and tiktoken."""

from __future__ import annotations

import pytest

from gpt.vocab import EOT_ID, VOCAB_SIZE, gpt2_encoding
from solutions import tokens

TIME_TRAVELLER = "The Time Traveller (for so it will be convenient to speak of him)"
TIME_TRAVELLER_IDS = [
    464,
    3862,
    43662,
    6051,
    357,
    1640,
    523,
    340,
    481,
    307,
    11282,
    284,
    2740,
    286,
    683,
    8,
]

SAMPLES = [
    "Hello, world! It's 2024 and we've got 3.14159 reasons.",
    "  leading spaces, trailing spaces   \n\n\tand tabs\t",
    "naïve café — “quotes” and emoji 🙂 and 日本語のテキスト",
    "def f(x):\n    return x ** 2  # code\n",
    "the text <|endoftext|> is plain text here",
    "I'll say they're sure you'd've known",
]


def test_known_gpt2_ids() -> None:
    assert tokens.encode(TIME_TRAVELLER) == TIME_TRAVELLER_IDS
    assert gpt2_encoding().encode_ordinary(TIME_TRAVELLER) == TIME_TRAVELLER_IDS


@pytest.mark.parametrize("text", SAMPLES)
def test_encode_matches_tiktoken_and_round_trips(text: str) -> None:
    ids = tokens.encode(text)
    assert ids == gpt2_encoding().encode_ordinary(text)
    assert tokens.decode(ids) == text


def test_vocabulary_shape() -> None:
    enc = gpt2_encoding()
    assert enc.n_vocab == VOCAB_SIZE
    assert tokens.decode([EOT_ID]) == "<|endoftext|>"


def test_decode_replaces_half_characters() -> None:
    ids = tokens.encode("🙂")
    assert len(ids) > 1  # the emoji's four bytes span several tokens
    assert tokens.decode(ids[:1]) == "\N{REPLACEMENT CHARACTER}"


def test_bpe_merge_prefers_lowest_rank_then_leftmost() -> None:
    ranks = {b"a": 0, b"b": 1, b"ab": 5, b"ba": 4, b"aba": 6}
    # Pairs "ab" (rank 5) and "ba" (rank 4): "ba" merges first, then "a" + "ba" = "aba" (6).
    assert tokens.bpe_merge(b"aba", ranks) == [6]
    tie = {b"a": 0, b"aa": 1}
    assert tokens.bpe_merge(b"aaa", tie) == [1, 0]  # leftmost pair first
