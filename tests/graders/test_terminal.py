"""graders/terminal.py's Ticker: on a terminal, one line that counts a lesson's checks as they
finish, which the lesson's table replaces; off a terminal, the tables only. (The tables
themselves are tested with the grading, in tests/graders/test_graders.py.)"""

from __future__ import annotations

import io
import re

from rich.console import Console

from graders.report import NOT_GRADED
from graders.terminal import Ticker


def _row(check_id: str, passed: bool, graded: bool) -> dict:
    return {
        "id": check_id,
        "function": "lookup",
        "points": 2 if passed else 0,
        "max_points": 2,
        "passed": passed,
        "hidden": False,
        "hint": None if passed or not graded else "index the rows of the table",
        "detail": None if passed else ("lookup returned zeros" if graded else NOT_GRADED),
        "link": "chapters/02-embeddings.md#embedding-lookup",
        "explained_by": None,
    }


def _lesson(*rows: dict) -> dict:
    return {
        "slug": "embeddings",
        "title": "Tokens become vectors",
        "points": sum(r["points"] for r in rows),
        "max_points": 2 * len(rows),
        "import_error": None,
        "checks": list(rows),
    }


def test_on_a_terminal_the_line_counts_the_checks_then_gives_way_to_the_table():
    screen = io.StringIO()
    ticker = Ticker(Console(file=screen, force_terminal=True, width=100))
    first = _lesson(_row("a", True, True), _row("b", False, False), _row("c", False, False))
    ticker.check(first, first["checks"][0])
    status = ticker.status
    assert status is not None
    assert "embeddings: 1 of 3 checks, 1 passed so far" in str(status.renderable.text)
    second = _lesson(_row("a", True, True), _row("b", False, True), _row("c", False, False))
    ticker.check(second, second["checks"][1])
    assert ticker.status is status, "one line, updated"
    assert "2 of 3 checks, 1 passed so far" in str(status.renderable.text)
    done = _lesson(_row("a", True, True), _row("b", False, True), _row("c", True, True))
    ticker.lesson(done)
    assert ticker.status is None
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())  # the terminal's codes
    assert "Lesson: Tokens become vectors (embeddings) 4/6 points" in shown


def test_off_a_terminal_only_the_tables_are_printed():
    screen = io.StringIO()
    ticker = Ticker(Console(file=screen, force_terminal=False, width=100))
    lesson = _lesson(_row("a", True, True), _row("b", False, False))
    ticker.check(lesson, lesson["checks"][0])
    assert ticker.status is None and screen.getvalue() == ""
    ticker.lesson(_lesson(_row("a", True, True), _row("b", True, True)))
    assert screen.getvalue().startswith("Lesson: Tokens become vectors (embeddings) 4/4 points")
    ticker.stop()  # nothing to stop: no error


def test_flags_are_shown_under_the_table_with_their_lines():
    screen = io.StringIO()
    lesson = _lesson(_row("a", True, True))
    lesson["flagged"] = [
        {"function": "lookup", "file": "embeddings.py", "line": 7, "reason": "lookup uses F.x"}
    ]
    Ticker(Console(file=screen, force_terminal=False, width=100)).lesson(lesson)
    shown = screen.getvalue()
    assert "2/2 points" in shown and "flagged for review (no points rest on these)" in shown
    assert "embeddings.py, line 7: lookup uses F.x" in shown
    plain = io.StringIO()
    Ticker(Console(file=plain, force_terminal=False, width=100)).lesson(
        _lesson(_row("a", True, True))
    )
    assert "flagged" not in plain.getvalue()
