"""The grading report: a grading keeps the lessons it leaves out, each with when it was graded
and a fingerprint of the files it graded."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

from rich.console import Console

from core.fingerprint import fingerprint
from core.manifest import ROOT, load_manifest
from graders.report import Report
from graders.terminal import render_total

ORDER = [lesson.slug for lesson in load_manifest().lessons]


def _grade(target: Path, path: Path, *slugs: str, hidden: bool = False, passed: bool = True):
    """A report of ``slugs`` (every public check recorded as ``passed``), merged into ``path``."""
    manifest = load_manifest()
    chosen = [(manifest.lesson(s), manifest.lesson(s).selected_checks(hidden)) for s in slugs]
    report = Report(target, hidden, chosen, path, order=ORDER)
    for _, checks in chosen:
        for check in checks:
            report.record(check, passed, None if passed else check.hint, "wrong")
    report.finish()
    return report


def _package(tmp_path: Path) -> Path:
    target = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_a_one_lesson_grading_keeps_the_other_lessons(tmp_path: Path) -> None:
    target, path = _package(tmp_path), tmp_path / "report.json"
    _grade(target, path, "tokens", "windows", "objective", passed=False)
    earlier = {e["slug"]: e for e in json.loads(path.read_text())["lessons"]}
    again = _grade(target, path, "windows").data
    assert [e["slug"] for e in again["lessons"]] == ["tokens", "windows", "objective"]
    lessons = {e["slug"]: e for e in json.loads(path.read_text())["lessons"]}
    assert lessons["tokens"] == earlier["tokens"] and lessons["objective"] == earlier["objective"]
    assert lessons["windows"]["points"] == lessons["windows"]["max_points"] > 0
    assert earlier["windows"]["points"] == 0
    assert again["points"] == lessons["windows"]["points"]  # the kept ones failed everything
    assert again["max_points"] == sum(e["max_points"] for e in lessons.values())
    for entry in lessons.values():
        assert entry["graded"].endswith("+00:00")
        assert entry["fingerprint"] == fingerprint(
            target, load_manifest().lesson(entry["slug"]).module
        )


def test_another_package_hidden_checks_or_an_unfinished_lesson_are_not_kept(
    tmp_path: Path,
) -> None:
    target, path = _package(tmp_path), tmp_path / "report.json"
    _grade(target, path, "tokens")
    assert [e["slug"] for e in _grade(ROOT / "solutions", path, "windows").data["lessons"]] == [
        "windows"
    ]
    _grade(target, path, "tokens")
    assert [e["slug"] for e in _grade(target, path, "windows", hidden=True).data["lessons"]] == [
        "windows"
    ]
    manifest = load_manifest()
    lesson = manifest.lesson("tokens")
    killed = Report(target, False, [(lesson, lesson.selected_checks(False))], path, order=ORDER)
    assert killed.lesson("tokens")["graded"] is None  # no check recorded yet: still running
    assert [e["slug"] for e in _grade(target, path, "windows").data["lessons"]] == ["windows"]


def test_a_report_that_cannot_be_read_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    for text in ("{half a report", "[]", '{"target": 1}', '{"target": "x", "hidden": false}'):
        path.write_text(text)
        assert [e["slug"] for e in _grade(ROOT / "solutions", path, "tokens").data["lessons"]] == [
            "tokens"
        ]


def test_the_summary_says_when_each_lesson_was_graded(tmp_path: Path) -> None:
    report = _grade(ROOT / "solutions", tmp_path / "report.json", "tokens")
    out = io.StringIO()
    render_total(Console(file=out, width=160, color_system=None), report.data)
    (row,) = [line for line in out.getvalue().splitlines() if " tokens " in f" {line} "]
    assert re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d", row)  # the local time


def test_flags_are_listed_with_their_function_file_line_and_reason(tmp_path: Path) -> None:
    from graders.rules import Flag

    path = tmp_path / "report.json"
    report = _grade(_package(tmp_path), path, "training")
    flags = [
        Flag("training.py", 12, "adamw_step uses torch.optim.AdamW\x1b[2J", "adamw_step"),
        Flag("helpers.py", 1, "not read: too large"),
    ]
    report.flag("training", flags)
    (lesson,) = json.loads(path.read_text())["lessons"]
    assert lesson["flagged"] == [
        {
            "function": "adamw_step",
            "file": "training.py",
            "line": 12,
            "reason": "adamw_step uses torch.optim.AdamW",  # no terminal escape left
        },
        {"function": None, "file": "helpers.py", "line": 1, "reason": "not read: too large"},
    ]
    assert lesson["points"] == lesson["max_points"]  # a flag costs no point


def test_every_rewrite_is_the_whole_report_encoded_anew(tmp_path: Path) -> None:
    """The report is rewritten after every check with only the changed lesson encoded again:
    each file is, byte for byte, the whole report as write_json_atomic encodes it, also with a
    kept lesson, a flag, an import error and none at all."""
    from graders.report import write_json_atomic
    from graders.rules import Flag

    target, path = _package(tmp_path), tmp_path / "report.json"
    _grade(target, path, "tokens", passed=False)  # kept by the grading below
    manifest = load_manifest()
    chosen = [(manifest.lesson(s), manifest.lesson(s).selected_checks(False)) for s in ORDER[1:3]]
    report = Report(target, False, chosen, path, order=ORDER)
    plain = tmp_path / "plain.json"

    def written_as_a_whole() -> bool:
        write_json_atomic(plain, report.data)
        return path.read_bytes() == plain.read_bytes()

    assert written_as_a_whole() and len(report.data["lessons"]) == 3
    report.flag(ORDER[1], [Flag("x.py", 3, "a reason", None)])
    assert written_as_a_whole()
    for (_, checks), passed in zip(chosen, (True, False), strict=True):
        for check in checks:
            report.record(check, passed, None if passed else check.hint, "wrong")
            assert written_as_a_whole()
    report.import_failed(ORDER[2], "SyntaxError: x.py, line 1")
    assert written_as_a_whole()
    report.finish()
    assert written_as_a_whole() and json.loads(path.read_text())["complete"] is True
    empty = Report(target, False, [], tmp_path / "empty.json")
    write_json_atomic(plain, empty.data)
    assert (tmp_path / "empty.json").read_bytes() == plain.read_bytes()
