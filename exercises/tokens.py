"""Lesson 1 — Text becomes tokens: GPT-2's byte-pair encoding, by hand.

A GPT never sees characters. Text is cut into pieces by a regular expression, each piece's
UTF-8 bytes are merged into larger and larger units by a learned table of merge ranks, and
each final unit is a token id. Decoding joins the units' bytes back together.
"""

from __future__ import annotations

import collections
import functools

import regex

from gpt.vocab import EOT_ID, GPT2_PATTERN, bpe_ranks, id_to_bytes

_PIECES = regex.compile(GPT2_PATTERN)


def split_pieces(text: str) -> list[str]:
    """Cut text into GPT-2's pre-tokenization pieces.

    Merges never cross a piece boundary, so "dog." can never become one token: the word and
    the full stop are separate pieces. GPT-2's pattern keeps a leading space with the word that
    follows it (" cat"), splits off common English contractions ("'s", "'ll"), and keeps runs of
    letters, of digits, and of other symbols apart.

    Args:
        text: any Unicode string.

    Returns:
        The pieces, in order; joined together they give back ``text`` exactly.

    Example:
        >>> split_pieces("Hello, world! It's 2024.")
        ['Hello', ',', ' world', '!', ' It', "'s", ' 2024', '.']
    """
    raise NotImplementedError('split_pieces in exercises/tokens.py is not implemented yet (lesson 1, Text becomes tokens: see course/chapters/01-tokens.md#pre-tokenization)')


def bpe_merge(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Merge one piece's bytes into tokens, lowest merge rank first.

    Start from single bytes. At every round look at each adjacent pair of parts, join it, and
    look the joined bytes up in ``ranks``; merge the pair with the lowest rank (the leftmost
    one when two pairs have the same rank). Stop when no adjacent pair is in ``ranks``.
    Then every part is a token, and its rank is its id.

    Args:
        piece: the UTF-8 bytes of one pre-tokenized piece.
        ranks: merge ranks, bytes -> rank; every single byte has a rank.

    Returns:
        The ranks (token ids) of the final parts, left to right.

    Example:
        >>> ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"abc": 4}
        >>> bpe_merge(b"abc", ranks)   # a b c -> ab c -> abc
        [4]
    """
    raise NotImplementedError('bpe_merge in exercises/tokens.py is not implemented yet (lesson 1, Text becomes tokens: see course/chapters/01-tokens.md#byte-pair-merges)')


def train_bpe(text: str, vocab_size: int) -> dict[bytes, int]:
    """Learn byte-pair merge ranks from ``text``: the training half of BPE.

    The table starts with the 256 single bytes, byte b at rank b. Cut the text with
    ``split_pieces`` and turn every piece into its list of single bytes. Then repeat: count
    every adjacent pair of parts *inside* each piece (never a pair that straddles two pieces:
    merges never cross a piece boundary, so such a pair could never be used), take the most
    frequent pair, give its joined bytes the next free rank, and merge that pair everywhere it
    occurs, left to right, so that later rounds count the merged part as one unit. Stop when
    the table holds ``vocab_size`` entries, or sooner, when no piece has two parts left.

    Ties decide which merges exist, so they have one rule: among pairs with the same count,
    the pair met first, reading the pieces in order and each piece left to right, wins (a
    ``collections.Counter`` filled in that order, and ``max`` over it, does exactly this). If
    a pair's joined bytes are already in the table (``a`` + ``bc`` after ``ab`` + ``c``), merge
    the pair but keep the rank the bytes already have.

    Args:
        text: the training text.
        vocab_size: the number of ranks wanted, the 256 bytes included.

    Returns:
        Merge ranks, bytes -> rank, in the format ``bpe_merge`` reads: ranks 0, 1, 2, ...

    Raises:
        ValueError: when ``vocab_size < 256`` (every byte needs a rank).

    Example:
        >>> ranks = train_bpe("low lower lowest", 258)
        >>> [token for token, rank in ranks.items() if rank >= 256]
        [b'lo', b'low']
    """
    raise NotImplementedError('train_bpe in exercises/tokens.py is not implemented yet (lesson 1, Text becomes tokens: see course/chapters/01-tokens.md#training-bpe)')


def encode(text: str) -> list[int]:
    """Encode text into GPT-2 token ids.

    Split the text into pieces, merge each piece's UTF-8 bytes with GPT-2's ranks
    (``gpt.vocab.bpe_ranks()``; the provided ``_encode_piece`` does that with a cache), and
    concatenate the ids. The text ``<|endoftext|>`` is plain text here, as in tiktoken's
    ``encode_ordinary``: it becomes several ordinary tokens.

    Example:
        >>> encode("The Time Traveller")
        [464, 3862, 43662, 6051]
    """
    raise NotImplementedError('encode in exercises/tokens.py is not implemented yet (lesson 1, Text becomes tokens: see course/chapters/01-tokens.md#encoding-text)')


@functools.lru_cache(maxsize=1 << 16)
def _encode_piece(piece: str) -> tuple[int, ...]:
    """bpe_merge with GPT-2's ranks, cached: common words recur and merging is pure Python."""
    return tuple(bpe_merge(piece.encode("utf-8"), bpe_ranks()))


def decode(ids: list[int]) -> str:
    """Turn GPT-2 token ids back into text.

    Join the bytes of every token (``gpt.vocab.id_to_bytes()``; id 50256 is ``<|endoftext|>``)
    and decode the result as UTF-8 with ``errors="replace"``: a single token can hold half of
    a multi-byte character, so a slice of ids need not be valid UTF-8 on its own.

    Example:
        >>> decode([464, 3862, 43662, 6051])
        'The Time Traveller'
    """
    raise NotImplementedError('decode in exercises/tokens.py is not implemented yet (lesson 1, Text becomes tokens: see course/chapters/01-tokens.md#decoding-ids)')


__all__ = ["EOT_ID", "split_pieces", "bpe_merge", "train_bpe", "encode", "decode"]
