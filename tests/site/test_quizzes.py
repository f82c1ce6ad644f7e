"""The quizzes' options give nothing away by their length.

A reader who always picks the longest option should score no better than chance. The options
are shuffled per reader on the site, so their order tells nothing; their lengths still would if
the right option were usually the longest (a common habit of quiz writers: the answer gets the
careful qualifications, the distractors are one quick line). This reads every `<quiz>` of
course/ (mkdocs-quiz's markup) and bounds the share of questions whose right option is the
longest at the share that chance gives with four options.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
QUIZ = re.compile(r"^<quiz>\n(.*?)^</quiz>", re.M | re.S)
OPTION = re.compile(r"^- \[([ xX])\] (.+)$", re.M)
CHANCE = 0.25  # one option in four


def visible_length(option: str) -> int:
    """The option's length as read: without the backticks and dollar signs of its markup."""
    return len(re.sub(r"[`$]", "", option).strip())


def questions() -> list[tuple[str, list[tuple[bool, str]]]]:
    """Every quiz question of course/: (where, [(is right, option text), ...])."""
    found = []
    for path in sorted(COURSE.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for quiz in QUIZ.finditer(text):
            line = text.count("\n", 0, quiz.start()) + 1
            options = [(mark != " ", option) for mark, option in OPTION.findall(quiz.group(1))]
            found.append((f"{path.relative_to(ROOT)}:{line}", options))
    return found


def answer_is_longest(options: list[tuple[bool, str]]) -> bool:
    right = max(visible_length(text) for correct, text in options if correct)
    return all(right > visible_length(text) for correct, text in options if not correct)


def test_every_quiz_has_a_right_option_and_wrong_ones() -> None:
    found = questions()
    assert len(found) >= 40, f"only {len(found)} quiz questions found in course/"
    for where, options in found:
        assert any(correct for correct, _ in options), f"{where}: no option marked [x]"
        assert sum(not correct for correct, _ in options) >= 2, f"{where}: fewer than 2 wrong"


def test_the_right_option_is_the_longest_no_more_often_than_chance() -> None:
    found = questions()
    longest = [where for where, options in found if answer_is_longest(options)]
    bound = CHANCE * len(found)
    assert len(longest) <= bound, (
        f"the right option is the longest in {len(longest)} of {len(found)} questions (at most "
        f"{int(bound)} allowed): give the distractors the answer's care, or trim the answer. "
        "Longest answers at: " + ", ".join(longest)
    )


def test_the_length_measure_sees_what_a_reader_sees() -> None:
    # Markup does not count: a code span is as long as its code, so the right option here
    # ties with the wrong ones as read, although its markdown is the longest.
    assert visible_length("`[8, 1024]`") == 9
    assert not answer_is_longest([(True, "`a + b`"), (False, "a - b"), (False, "a * b")])
    assert answer_is_longest([(True, "the long one"), (False, "short"), (False, "brief")])
