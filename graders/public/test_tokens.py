"""Lesson 1, Text becomes tokens: public checks. The oracle is tiktoken's GPT-2 encoding."""

from __future__ import annotations

import pytest

from graders.answers import later, oracle, resolve
from graders.checking import (
    CheckFailed,
    alphabet,
    as_int,
    as_list,
    as_str,
    describe,
    diagnose,
    expect_equal,
    fail,
    letters,
    relabel,
    same,
    shuffle_words,
)
from graders.client import StudentError
from graders.gpt2 import EOT_ID, gpt2_sub_ranks

TEXTS = [
    "The Time Traveller (for so it will be convenient to speak of him)",
    "Hello, world! It's 2024.   Isn't it?\n\nThey'll say we've done it; I'd agree.",
    "tabs\tand  double  spaces \n trailing   ",
    "I'LL SAY IT'S DONE, AND WE'VE WON. HAVEN'T WE?",  # GPT-2's contractions are lower-case
]


PIECES_MISTAKES = ("lost-text", "space-apart", "contractions", "trailing-space", "ignore-case")


def check_pieces(student, text: str, what: str) -> None:
    expected = oracle.split_pieces(text)
    mistakes = {key: later.split_pieces(text, mistake=key) for key in PIECES_MISTAKES}
    try:
        result = as_list(student.call("split_pieces", text), what, as_str)
    except StudentError as error:
        if "bad escape \\p" in error.message:  # Python's re knows no \p{L}
            fail(f"{what} raised {error.type_name}: {error.message}", "re-module")
        raise
    if result != expected and "".join(result) != text:
        fail(f"{what}: the pieces join to {''.join(result)!r}, not to the text", "lost-text")
    expect_equal(result, expected, what, mistakes=mistakes)


@pytest.mark.check("split-pieces-gpt2")
@pytest.mark.parametrize(
    "text", TEXTS, ids=["sentence", "contractions", "whitespace", "upper-case"]
)
def test_split_pieces_gpt2(student, text):
    text = shuffle_words(1 + TEXTS.index(text), text)
    check_pieces(student, text, f"split_pieces({text[:30]!r}...)")


@pytest.mark.check("split-pieces-unicode")
def test_split_pieces_unicode(student):
    text = shuffle_words(5, "naïve café, Straße ٣٤ 東京タワー 42km ½ — Ωmega")
    check_pieces(student, text, f"split_pieces({text!r})")


def check_merge(
    student,
    piece: bytes,
    ranks: dict[bytes, int],
    what: str,
    mistakes: tuple[str, ...] = (),
) -> None:
    expected = oracle.bpe_merge(piece, ranks)
    answers = {key: later.bpe_merge(piece, ranks, mistake=key) for key in mistakes}
    result = student.call("bpe_merge", piece, ranks)
    if isinstance(result, list) and result and all(isinstance(r, bytes) for r in result):
        fail(f"{what} returned bytes {result!r}", "returns-parts")
    as_list(result, what, as_int)
    expect_equal(result, expected, what, mistakes=answers)


SINGLE = {bytes([b]): b for b in range(256)}


def toy_ranks(*merged: bytes) -> dict[bytes, int]:
    """Every single byte, then ``merged`` ranked in the order given."""
    return SINGLE | {m: 256 + i for i, m in enumerate(merged)}


@pytest.mark.check("bpe-merge-toy")
def test_bpe_merge_toy(student):
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"abc": 4}
    keys = ("one-pass",)
    check_merge(student, b"abc", ranks, "bpe_merge(b'abc', {a, b, c, ab, abc})", keys)
    check_merge(student, b"cab", ranks, "bpe_merge(b'cab', {a, b, c, ab, abc})", keys)
    swap = alphabet(6)  # the same letters swapped for others in the piece and its ranks
    ranks = toy_ranks(*map(swap, (b"lo", b"low", b"er", b"lower")))
    check_merge(student, swap(b"lowest"), ranks, f"bpe_merge({swap(b'lowest')!r}, ...)", keys)
    check_merge(student, b"x", ranks, "bpe_merge(b'x', ...) (one byte)", keys)


def check_merges(
    student, pieces: list[bytes], ranks: dict[bytes, int], what: str, mistakes: tuple[str, ...]
) -> None:
    """All ``pieces`` first, then one diagnosis over all their answers: a mistake shows in
    the whole pattern of answers (two mistakes may agree on one piece)."""
    expected = oracle.bpe_merges(pieces, ranks)
    answers = {key: later.bpe_merges(pieces, ranks, mistake=key) for key in mistakes}
    results = []
    for piece in pieces:
        result = student.call("bpe_merge", piece, ranks)
        results.append(as_list(result, f"bpe_merge({piece!r}, ...)", as_int))
    expect_equal(results, expected, f"{what}: for pieces {pieces}, bpe_merge", mistakes=answers)


@pytest.mark.check("bpe-merge-lowest-rank")
def test_bpe_merge_lowest_rank(student):
    # b"bc" ranks before b"ab", so "abc" must become a + bc, and "abcd" -> a + bcd -> abcd.
    swap = alphabet(7)
    ranks = toy_ranks(*map(swap, (b"bc", b"cd", b"ab", b"bcd", b"abcd")))
    check_merges(
        student,
        [swap(piece) for piece in (b"abc", b"abcd", b"xabcdx")],
        ranks,
        "ranks with bc < cd < ab",
        ("first-pair", "one-pass"),
    )


@pytest.mark.check("bpe-merge-tie-leftmost")
def test_bpe_merge_tie_leftmost(student):
    swap = alphabet(8)
    # With aa alone, only the tie rule decides how b'aaa' splits.
    piece = swap(b"aaa")
    check_merge(
        student,
        piece,
        toy_ranks(swap(b"aa")),
        f"bpe_merge({piece!r}, ranks with aa)",
        ("rightmost-tie",),
    )
    ranks = toy_ranks(swap(b"aa"), swap(b"aaa"))
    for piece in map(swap, (b"aaa", b"baaab", b"aaaaa")):
        check_merge(
            student,
            piece,
            ranks,
            f"bpe_merge({piece!r}, ranks with aa, aaa)",
            mistakes=("first-pair", "rightmost-tie"),  # the first explains a merge either would
        )


@pytest.mark.check("bpe-merge-gpt2")
def test_bpe_merge_gpt2(student):
    for piece in map(alphabet(9), (" Traveller", " convenient", "ization", " 2024", "!!!!!!")):
        data = piece.encode("utf-8")
        check_merge(student, data, gpt2_sub_ranks(data), f"bpe_merge({data!r}, GPT-2's ranks)")


def check_no_eot_appended(result: list[int], expected: list[int], what: str) -> None:
    if result == [*expected, EOT_ID]:
        fail(f"{what} ends with id {EOT_ID}, which the text does not hold", "appends-eot")


def check_encode(student, text: str, what: str) -> None:
    expected = oracle.encode(text)
    whole = later.encode(text, mistake="no-split")
    result = as_list(student.call("encode", text), what, as_int)
    check_no_eot_appended(result, expected, what)
    if result != expected and EOT_ID in result and "<|endoftext|>" in text:
        fail(f"{what} contains id {EOT_ID}", "special-token")
    expect_equal(result, expected, what, mistakes={"no-split": whole} if text else None)


@pytest.mark.check("encode-matches-tiktoken")
@pytest.mark.parametrize(
    "text", TEXTS, ids=["sentence", "contractions", "whitespace", "upper-case"]
)
def test_encode_matches_tiktoken(student, text):
    text = shuffle_words(10 + TEXTS.index(text), text)
    check_encode(student, text, f"encode({text[:30]!r}...)")


@pytest.mark.check("encode-endoftext-plain")
def test_encode_endoftext_plain(student):
    text = shuffle_words(14, "The end.<|endoftext|>A new story")
    expected = oracle.encode(text)
    result = as_list(student.call("encode", text), f"encode({text!r})", as_int)
    check_no_eot_appended(result, expected, f"encode({text!r})")
    if EOT_ID in result:
        fail(f"encode({text!r}) contains id {EOT_ID}", "special-token")
    expect_equal(result, expected, f"encode({text!r})")


@pytest.mark.check("encode-unicode")
def test_encode_unicode(student):
    text = shuffle_words(15, "Déjà vu 🦖 naïve 東京 — ½")
    check_encode(student, text, f"encode({text!r})")


def check_decode(student, ids: list[int], what: str) -> None:
    expected = oracle.decode(ids)
    per_token = later.decode(ids, mistake="per-token")
    try:
        result = as_str(student.call("decode", ids), what)
    except StudentError as error:
        if error.is_a("UnicodeDecodeError"):
            fail(f"{what} raised UnicodeDecodeError: {error.message}")
        raise
    expect_equal(result, expected, what, mistakes={"per-token": per_token})


@pytest.mark.check("decode-matches-tiktoken")
def test_decode_matches_tiktoken(student):
    for text in (*TEXTS, "Déjà vu 🦖 東京"):
        text = shuffle_words(16, text)
        check_decode(student, oracle.encode(text), f"decode(encode({text[:20]!r}...))")


@pytest.mark.check("decode-partial-utf8")
def test_decode_partial_utf8(student):
    ids = oracle.encode(letters(17, "🦖 dinosaur"))
    check_decode(student, ids[:1], f"decode({ids[:1]}) (half an emoji)")
    check_decode(student, ids[1:], f"decode({ids[1:]}) (the other half and more)")


@pytest.mark.check("decode-endoftext")
def test_decode_endoftext(student):
    ids = relabel(18, [464, EOT_ID, 3862], 0, EOT_ID, keep=(EOT_ID,))
    check_decode(student, ids, f"decode({ids})")


# -- train_bpe ----------------------------------------------------------------------------------


def as_ranks(value, what: str) -> dict:
    """A dict of bytes -> int, or fail saying what is wrong with it."""
    if type(value) is not dict:
        fail(f"{what} should be a dict of bytes -> int, got {describe(value)}")
    for token, rank in value.items():
        if type(token) is not bytes:
            kind = "str" if isinstance(token, str) else type(token).__name__
            fail(f"{what} has the key {token!r} ({kind}); keys are the joined bytes", "not-bytes")
        as_int(rank, f"{what}[{token!r}]")
    return value


def new_merges(ranks: dict) -> list:
    """The learned entries (rank 256 and above), in rank order: what a detail shows."""
    return sorted((rank, token) for token, rank in ranks.items() if rank >= 256)


ONCE_PER_PIECE = ("once-per-piece", "once-per-piece:set")


def check_train(
    student, text: str, vocab_size: int, what: str, mistakes: tuple[str, ...] = ()
) -> None:
    expected = oracle.train_bpe(text, vocab_size)
    # Ties and the table's size show in most texts: every check names them.
    mistakes = (*mistakes, "one-too-many", "one-too-few", "tie-last", "tie-greatest")
    answers = {key: later.train_bpe(text, vocab_size, mistake=key) for key in mistakes}
    # Pairs counted once per piece, however written: told before the ties it can look like.
    once = [later.train_bpe(text, vocab_size, mistake=key) for key in ONCE_PER_PIECE]
    try:
        result = student.call("train_bpe", text, vocab_size)
    except StudentError as error:
        if error.is_a("ValueError") and "empty" in error.message:
            fail(f"{what} raised ValueError: {error.message}", "runs-out")
        raise
    result = as_ranks(result, what)
    if same(result, expected, rtol=0.0, atol=0.0):
        return
    got, want = new_merges(result), new_merges(expected)
    if len(result) == len(expected) and sorted(result.values()) != list(range(len(result))):
        detail = f"{what}: the ranks are not 0 ... {len(result) - 1}, each once"
    elif len(got) != len(want):
        detail = f"{what} has {len(result)} ranks, expected {len(expected)}: learned {got}"
    else:
        rank, token, wanted = next(
            (g[0], g[1], w[1]) for g, w in zip(got, want, strict=True) if g != w
        )
        detail = f"{what}: rank {rank} is {token!r}, expected {wanted!r} (learned: {got})"
    if any(same(result, resolve(form), rtol=0.0, atol=0.0) for form in once):
        fail(detail, "once-per-piece")
    if same(result, resolve(answers["tie-last"])) and same(
        result, resolve(answers["tie-greatest"])
    ):
        fail(detail, tie_rule(student))
    diagnose(result, answers, rtol=0.0, atol=0.0, detail=detail)


def tie_rule(student) -> str | None:
    """Which wrong tie rule a train_bpe follows, where a text's ties cannot tell: in "ef xy ab"
    every pair occurs once, so the first merge is the pair it takes on a tie."""
    first = new_merges(as_ranks(student.call("train_bpe", "ef xy ab", 257), "train_bpe"))[:1]
    return {b"ab": "tie-last", b"xy": "tie-greatest"}.get(first[0][1] if first else b"")


@pytest.mark.check("train-bpe-toy")
def test_train_bpe_toy(student):
    text = letters(19, "low lower lowest")
    check_train(student, text, 258, f"train_bpe({text!r}, 258)")
    text = letters(20, "the cat sat on the mat; the hat")
    check_train(
        student,
        text,
        262,
        f"train_bpe({text!r}, 262)",
        ("across-pieces", "first-only"),
    )


@pytest.mark.check("train-bpe-ties")
def test_train_bpe_ties(student):
    # Every pair of "ef xy ab" occurs once: the first met (e, f) wins, not the last (a, b) or
    # the greatest (x, y). In "abab abab aaaaa", ab and aa both occur 4 times.
    for text, size in (("ef xy ab", 257), ("abab abab aaaaa", 260)):
        text = letters(21 + size, text)  # the letters' order kept: the greatest pair too
        check_train(
            student,
            text,
            size,
            f"train_bpe({text!r}, {size})",
            ("first-only",),
        )


@pytest.mark.check("train-bpe-inside-pieces")
def test_train_bpe_inside_pieces(student):
    # Letters and full stops are separate pieces: only "oo" is a pair inside a piece.
    text = letters(22, "x.y.x.y.x.y.oo")
    check_train(student, text, 300, f"train_bpe({text!r}, 300)", ("across-pieces",))


@pytest.mark.check("train-bpe-merges-everywhere")
def test_train_bpe_merges_everywhere(student):
    text = letters(23, "abab abab aaaaa ababab")
    check_train(student, text, 262, f"train_bpe({text!r}, 262)", ("first-only", "across-pieces"))


@pytest.mark.check("train-bpe-bytes")
def test_train_bpe_bytes(student):
    text = letters(24, "ééé ééé naïve")  # the letters with accents kept
    check_train(student, text, 259, f"train_bpe({text!r}, 259)", ("characters",))


@pytest.mark.check("train-bpe-vocab-size")
def test_train_bpe_vocab_size(student):
    text = shuffle_words(25, TEXTS[1])
    for size in (256, 257, 270):
        check_train(student, text, size, f"train_bpe(text, {size})")


@pytest.mark.check("train-bpe-runs-out")
def test_train_bpe_runs_out(student):
    # Three pieces of two bytes each: two merges exist, then nothing is left to merge.
    text = letters(26, "a b c")
    check_train(student, text, 300, f"train_bpe({text!r}, 300)")


@pytest.mark.check("train-bpe-validates")
@pytest.mark.parametrize("size", [255, 0])
def test_train_bpe_validates(student, size):
    try:
        error = student.error("train_bpe", "abc", size)
    except CheckFailed as failure:
        if failure.hint is None and "instead of raising" in failure.detail:
            fail(f"train_bpe('abc', {size}): {failure.detail}", "no-validation")
        raise
    if not error.is_a("ValueError"):
        fail(f"train_bpe('abc', {size}) raised {error.type_name}, expected ValueError")


@pytest.mark.check("train-bpe-tiktoken")
def test_train_bpe_tiktoken(student):
    text = shuffle_words(27, " ".join(TEXTS))
    check_train(student, text, 300, "train_bpe(four sentences, 300)")
