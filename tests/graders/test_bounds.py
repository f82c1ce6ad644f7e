"""The checker bounds itself: a failure message shows a bounded summary of a value,
never its full repr, however the value shares its parts."""

from __future__ import annotations

import time

import pytest
import torch

from graders.checking import CheckFailed, expect_equal, summary
from graders.worker.protocol import TABLE, encode


def test_a_value_of_shared_parts_is_summarised_in_bounded_time_and_size():
    text = "x" * (1 << 20)
    shared = [text] * 10_000_000  # 80 MB of references; its repr would be 10 TB
    nested: list = []
    nested.append(nested)
    for value in (shared, {i: shared for i in range(1000)}, nested, (torch.zeros(10**6),)):
        start = time.process_time()
        shown = summary(value)
        assert len(shown) <= 210 and time.process_time() - start < 1.0, shown


def test_a_failure_message_names_type_shape_dtype_and_first_elements():
    with pytest.raises(CheckFailed) as failed:
        expect_equal(["y" * (1 << 20)] * 1_000_000, [1, 2], "encode('hi')")
    detail = failed.value.detail
    assert len(detail) < 600 and "list of 1000000" in detail and "'yyyy" in detail, detail
    assert "tensor(float32, shape [2, 3], first [0.0, 0.0, 0.0, 0.0])" in summary(torch.zeros(2, 3))


# Every proxy question is bounded in size and time; nothing grows across calls.


def _answers(function: str = "tokens.encode"):
    from graders.secret.dependencies import Answers

    answers = Answers()
    answers.allow(function)
    return answers


def _shapes() -> dict[str, tuple[str, object]]:
    row = list(range(1000))
    deep: list = []
    for _ in range(40):
        deep = [deep]
    return {
        # a table crosses as the bytes of its encoding, as the worker's proxy sends it
        "rows shared a million times": (
            "bpe_merge.table",
            encode({b"a": 1, b"b": [row] * 100_000}),
        ),
        "keys that are long texts": (
            "bpe_merge.table",
            encode({b"k%d" % i + b"x" * 10**5: i for i in range(100)}),
        ),
        "a long text": ("bpe_merge", [b"a" * (8 << 20), 1]),
        "deep nesting": ("bpe_merge", [deep, 1]),
        "a long piece": ("bpe_merge", [b"ab" * 10_000, 1]),
    }


@pytest.mark.parametrize("shape", sorted(_shapes()))
def test_a_hostile_question_is_refused_in_seconds(shape):
    from graders.secret.dependencies import Refused

    answers = _answers()
    key = answers.answer("bpe_merge.table", encode({b"a": 0, b"b": 1, b"ab": 2}))
    name, question = _shapes()[shape]
    if name == "bpe_merge":  # the piece, and the table as the worker's proxy sends it
        question = [[question[0], {TABLE: key}], {}]
    start = time.process_time()
    with pytest.raises(Refused):
        answers.answer(name, question)
    assert time.process_time() - start < 2.0


def test_a_question_is_refused_when_the_call_that_asked_it_must_end():
    """A question within every size bound whose answer takes long (a piece whose every pair
    merges, with a rank for each length: seconds of merging) ends at the call's deadline."""
    from graders.secret.dependencies import MAX_PIECE, Refused

    answers = _answers()
    key = answers.answer("bpe_merge.table", encode({b"a" * k: k for k in range(1, MAX_PIECE // 2)}))
    start = time.monotonic()
    with pytest.raises(Refused, match="longer than the call"):
        question = [[b"a" * MAX_PIECE, {TABLE: key}], {}]
        answers.answer("bpe_merge", question, time.monotonic() + 0.5)
    assert time.monotonic() - start < 5.0
    value, _, _ = answers.answer("bpe_merge", [[b"aa", {TABLE: key}], {}], time.monotonic() + 5)
    assert value == [2]


def test_ranks_tables_are_bounded_and_forgotten_after_each_request():
    from graders.secret.dependencies import MAX_TABLES, Refused

    answers = _answers()
    table = encode({b"a": 0, b"b": 1, b"ab": 2})
    keys = [answers.answer("bpe_merge.table", table) for _ in range(MAX_TABLES)]
    value, effects, dataset = answers.answer("bpe_merge", [[b"ab", {TABLE: keys[-1]}], {}])
    assert value == [2] and effects == [] and dataset is False
    with pytest.raises(Refused):
        answers.answer("bpe_merge.table", table)
    answers.allow("tokens.encode")  # the next request
    assert not answers.vocabularies
    with pytest.raises(Refused):
        answers.answer("bpe_merge", [[b"ab", {TABLE: keys[-1]}], {}])
    assert answers.answer("bpe_merge.table", table) not in keys  # a number never used before


def test_terminal_sequences_in_a_students_message_reach_neither_console_nor_report(tmp_path):
    import io

    from rich.console import Console
    from variants import Variant, build_target

    import graders
    from graders.terminal import render_lesson

    raising = """
        def perplexity(loss):
            raise ValueError("\\x1b[2J\\x1b]0;graded: full marks\\x07\\x1b[31mgotcha\\x9b")
    """
    target = build_target(tmp_path, [Variant("objective", "perplexity", "escapes", raising, None)])
    report = graders.grade(
        target, lessons=["objective"], functions=["perplexity"], json_path=tmp_path / "r.json"
    )
    screen = io.StringIO()
    render_lesson(Console(file=screen, force_terminal=True, width=100), report["lessons"][0])
    shown, saved = screen.getvalue(), (tmp_path / "r.json").read_text()
    assert "gotcha" in shown and "gotcha" in saved
    for sequence in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\\u001b", "\\u0007"):
        assert sequence not in shown and sequence not in saved, sequence


# The checker reads every answer within bounds of its own, and its memory has a limit.


@pytest.mark.parametrize(
    "answer",
    [
        ["x" * (1 << 20)] * 3_000_000,  # megabytes on the wire, terabytes written out
        [list(range(1000))] * 10_000,  # a list that reuses its own rows
        ["y" * (1 << 20)] * 100,  # a hundred megabytes of text, counted as it is read
    ],
    ids=["shared-string", "shared-rows", "long-text"],
)
def test_an_answer_too_large_to_check_fails_in_seconds(answer):
    from graders.client import unpack
    from graders.worker.protocol import pack

    packed = pack(answer)
    start = time.process_time()
    with pytest.raises(CheckFailed, match="too large to check"):
        unpack(packed, "split_pieces")
    assert time.process_time() - start < 5.0


def test_the_checker_grades_under_a_memory_limit_of_its_own():
    import resource

    from graders.client import checker_memory

    before = resource.getrlimit(resource.RLIMIT_DATA)
    with checker_memory(256 << 20):
        soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
        assert soft != resource.RLIM_INFINITY
        with pytest.raises(MemoryError):
            bytearray(512 << 20)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # the limit is gone again


# A whole lesson with every hostile shape: each fails its own checks quickly, the checker stays
# within its bound, and the rest of the lesson is graded as usual.
HOSTILE_TOKENS = {
    "split_pieces": """
        def split_pieces(text):
            return ["x" * (1 << 20)] * 3_000_000
    """,
    "encode": """
        def encode(text):
            ranks = {b"a": 0, b"b": 1, b"ab": 2}
            shared = [list(range(1000))] * 100_000
            # A table: as many entries as cross as one (1,024), each the same rows. The worker
            # packs it at once, its rows shared, and the checker refuses it by its size (a
            # smaller dict is copied part by part in the worker, the student's own time until
            # the check's limit, and never reaches the checker).
            table = {**ranks, **{b"rows%d" % i: shared for i in range(1024)}}
            tries = (
                lambda: bpe_merge(b"ab", table),  # a table reusing its rows
                lambda: bpe_merge(b"a" * (8 << 20), ranks),  # a huge text
                lambda: bpe_merge(b"ab" * 10_000, ranks),  # a long piece
            )
            for attempt in tries:
                try:
                    attempt()
                except Exception:
                    pass
            return []
    """,
}


@pytest.mark.slow  # every hostile shape graded: above the CPU guard's bound
def test_every_hostile_shape_fails_in_seconds_and_the_rest_of_the_lesson_is_graded(tmp_path):
    from variants import Variant, build_target

    import graders

    variants = [Variant("tokens", name, "hostile", code) for name, code in HOSTILE_TOKENS.items()]
    start = time.process_time()
    report = graders.grade(
        build_target(tmp_path, variants),
        lessons=["tokens"],
        hidden=True,
        json_path=tmp_path / "r.json",
    )
    spent = time.process_time() - start
    checks = report["lessons"][0]["checks"]
    hostile = [c for c in checks if c["function"] in HOSTILE_TOKENS]
    rest = [c for c in checks if c["function"] not in HOSTILE_TOKENS]
    assert hostile and not any(c["passed"] for c in hostile), [c["id"] for c in hostile]
    assert rest and all(c["passed"] for c in rest), [(c["id"], c["hint"]) for c in rest]
    assert spent < 120.0, spent  # the checker's own work (the worker's is apart)
