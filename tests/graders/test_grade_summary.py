"""`nox -s grade` ends with one table of every graded lesson; the course server's report view."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from graders.terminal import render_total
from live.handlers import read_report


def _check(id_: str, passed: bool, points: int) -> dict:
    return {"id": id_, "function": "f", "points": points if passed else 0, "max_points": points,
            "passed": passed, "hint": None, "link": "", "url": "", "detail": None,
            "hidden": False}  # fmt: skip


REPORT = {
    "target": "exercises",
    "hidden": False,
    "complete": True,
    "points": 5,
    "max_points": 8,
    "lessons": [
        {"slug": "tokens", "title": "Text becomes tokens", "points": 3, "max_points": 3,
         "checks": [_check("a", True, 2), _check("b", True, 1)]},
        {"slug": "windows", "title": "Training pairs", "points": 2, "max_points": 5,
         "checks": [_check("c", True, 2), _check("d", False, 2), _check("e", False, 1)]},
    ],
}  # fmt: skip


def test_summary_table_lists_points_and_what_is_left() -> None:
    out = io.StringIO()
    render_total(Console(file=out, width=120, color_system=None), REPORT)
    text = out.getvalue()
    rows = {
        line.split()[1]: line for line in text.splitlines() if "tokens" in line or "windows" in line
    }
    assert "3/3" in rows["tokens"] and "done" in rows["tokens"]
    assert "2/5" in rows["windows"] and "to do (2 of 3 checks)" in rows["windows"]
    assert text.index("Summary") < text.index("tokens") < text.index("windows")
    assert "Total: 5/8 points" in text


def test_report_view_says_when_and_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "grading-report.json"
    assert read_report(path) == {"report": None, "graded": None, "error": None}
    path.write_text(json.dumps(REPORT))
    state = read_report(path)
    assert state["report"]["points"] == 5 and state["graded"].startswith("20")
    path.write_text('{"half a report')
    state = read_report(path)
    assert state["report"] is None and "cannot read" in state["error"]
