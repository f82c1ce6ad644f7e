"""The tokens lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

from typing import Any

import regex

from graders.gpt2 import GPT2_PATTERN, gpt2

from . import unknown

_PIECES_MISTAKES = {
    "space-apart": r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+",
    "contractions": GPT2_PATTERN.replace(r"'(?:[sdmt]|ll|ve|re)|", ""),
    "trailing-space": GPT2_PATTERN.replace(r"|\s+(?!\S)", ""),
}


def split_pieces(text: str, mistake: str | None = None) -> list[str]:
    """GPT-2's pieces of ``text``, or those a classic mistake gives."""
    if mistake is None:
        return regex.findall(GPT2_PATTERN, text)
    if mistake == "lost-text":
        return text.split()
    if mistake == "ignore-case":
        return regex.findall(GPT2_PATTERN, text, flags=regex.IGNORECASE)
    if mistake not in _PIECES_MISTAKES:
        raise unknown(mistake)
    return regex.findall(_PIECES_MISTAKES[mistake], text)


def _bpe_tiktoken(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's own byte-pair merge of one piece, with any table holding the piece's bytes.

    tiktoken returns a piece that is itself in the table as one token without merging; the
    contract merges step by step. So the piece gets a sentinel byte that no merge involves,
    which tiktoken then merges like any piece, and the sentinel's rank is dropped again.
    """
    import tiktoken

    in_merges = {b for key in ranks if len(key) > 1 for b in key}
    sentinel = next(bytes([b]) for b in range(256) if b not in in_merges)
    table = dict(ranks)
    table.setdefault(sentinel, max(table.values(), default=-1) + 1)
    encoding = tiktoken.Encoding(
        name="toy", pat_str=r"[\s\S]+", mergeable_ranks=table, special_tokens={}
    )
    return list(encoding._encode_single_piece(piece + sentinel))[:-1]


def _merge_first_pair(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: merge the leftmost mergeable pair each round (not the lowest rank)."""
    parts = [bytes([b]) for b in piece]
    while True:
        for i in range(len(parts) - 1):
            if parts[i] + parts[i + 1] in ranks:
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
                break
        else:
            return [ranks[p] for p in parts]


def _merge_one_pass(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: one left-to-right sweep of merges, never looking again."""
    parts = [bytes([b]) for b in piece]
    i = 0
    while i < len(parts) - 1:
        if parts[i] + parts[i + 1] in ranks:
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        i += 1
    return [ranks[p] for p in parts]


def _merge_rightmost_tie(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: among equal ranks, merge the rightmost pair."""
    parts = [bytes([b]) for b in piece]
    while True:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank <= best[0]):
                best = (rank, i)
        if best is None:
            return [ranks[p] for p in parts]
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


_MERGES = {
    None: _bpe_tiktoken,
    "first-pair": _merge_first_pair,
    "one-pass": _merge_one_pass,
    "rightmost-tie": _merge_rightmost_tie,
}


def bpe_merge(piece: bytes, ranks: dict[bytes, int], mistake: str | None = None) -> list[int]:
    if mistake not in _MERGES:
        raise unknown(mistake)
    return _MERGES[mistake](piece, ranks)


def bpe_merges(
    pieces: list[bytes], ranks: dict[bytes, int], mistake: str | None = None
) -> list[list[int]]:
    return [bpe_merge(piece, ranks, mistake) for piece in pieces]


def _train_bpe(
    text: str,
    vocab_size: int,
    *,
    tie: str = "first",
    across: bool = False,
    first_only: bool = False,
    characters: bool = False,
    count: str = "all",
) -> dict[bytes, int]:
    """BPE training written out, one full count per merge; the knobs give classic mistakes
    (``tie``: "first" met, "last" met or "greatest" pair; pairs counted ``across`` pieces;
    only the ``first_only`` occurrence in each piece merged; ``characters`` as first units;
    ``count``: "all" occurrences, once per "distinct" piece, or a pair once in a piece,
    "set")."""
    pieces = [text] if across else regex.findall(GPT2_PATTERN, text)
    if count == "distinct":
        pieces = list(dict.fromkeys(pieces))
    if characters:
        words = [[c.encode("utf-8") for c in piece] for piece in pieces]
    else:
        words = [[bytes([b]) for b in piece.encode("utf-8")] for piece in pieces]
    ranks = {bytes([b]): b for b in range(256)}
    while len(ranks) < vocab_size:
        counts: dict[tuple[bytes, bytes], int] = {}
        for word in words:
            pairs = list(zip(word, word[1:], strict=False))
            for pair in dict.fromkeys(pairs) if count == "set" else pairs:
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        top = max(counts.values())
        tied = [pair for pair, n in counts.items() if n == top]  # in the order first met
        best = {"first": tied[0], "last": tied[-1], "greatest": max(tied)}[tie]
        joined = best[0] + best[1]
        ranks.setdefault(joined, len(ranks))
        for w, word in enumerate(words):
            out, i, done = [], 0, False
            while i < len(word):
                if not done and word[i : i + 2] == list(best):
                    out.append(joined)
                    i, done = i + 2, first_only
                else:
                    out.append(word[i])
                    i += 1
            words[w] = out
    return ranks


_TRAIN_BPE_MISTAKES: dict[str, dict[str, Any]] = {
    "tie-last": {"tie": "last"},
    "tie-greatest": {"tie": "greatest"},
    "across-pieces": {"across": True},
    "first-only": {"first_only": True},
    "characters": {"characters": True},
    "once-per-piece": {"count": "distinct"},
    "once-per-piece:set": {"count": "set"},
}


def train_bpe(text: str, vocab_size: int, mistake: str | None = None) -> dict[bytes, int]:
    """tiktoken's educational trainer (the contract's oracle), or a mistake's ranks.

    tiktoken's trainer raises ValueError once no pair is left to merge (``max`` of nothing);
    the contract stops there, which the written-out trainer does. Checks use only texts on
    which tiktoken's ranks are all distinct, where the two agree (``bpe_ranks_distinct``).
    """
    if mistake == "one-too-many":
        return train_bpe(text, vocab_size + 1)
    if mistake == "one-too-few":
        return train_bpe(text, vocab_size - 1)
    if mistake is not None:
        if mistake not in _TRAIN_BPE_MISTAKES:
            raise unknown(mistake)
        return _train_bpe(text, vocab_size, **_TRAIN_BPE_MISTAKES[mistake])
    from tiktoken._educational import bpe_train

    try:
        ranks = bpe_train(text, vocab_size, GPT2_PATTERN, visualise=None)
    except ValueError:  # ran out of pairs before vocab_size
        return _train_bpe(text, vocab_size)
    if len(set(ranks.values())) != len(ranks):
        raise ValueError("tiktoken's trainer gave a rank twice on this text: a bad check input")
    return ranks


def bpe_ranks_distinct(text: str, vocab_size: int) -> bool:
    """Whether tiktoken's trainer gives ``text`` distinct ranks (where the contract is its
    answer: joined bytes never met twice from two different pairs)."""
    from tiktoken._educational import bpe_train

    try:
        ranks = bpe_train(text, vocab_size, GPT2_PATTERN, visualise=None)
    except ValueError:
        return True  # it ran out of pairs: the written-out trainer answers
    return len(set(ranks.values())) == len(ranks)


def encode(text: str, mistake: str | None = None) -> list[int]:
    """tiktoken's GPT-2 ids; "no-split" merges the whole text as one piece."""
    if mistake is None:
        return gpt2().encode_ordinary(text)
    if mistake == "no-split":
        return list(gpt2()._encode_single_piece(text.encode("utf-8"))) if text else []
    raise unknown(mistake)


def decode(ids: list[int], mistake: str | None = None) -> str:
    """tiktoken's decoding; "per-token" decodes every token on its own."""
    if mistake is None:
        return gpt2().decode(ids)
    if mistake == "per-token":
        return "".join(gpt2().decode([i]) for i in ids)
    raise unknown(mistake)
