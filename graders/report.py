"""The grading report: a JSON document rewritten after every check, and its terminal view.

Schema (``complete`` is false until the run ends, so a report left by a killed run says so;
checks not graded yet have ``passed: false`` and detail "not graded"):

    {"target", "hidden", "complete", "points", "max_points",
     "lessons": [{"slug", "title", "points", "max_points", "import_error",
                  "checks": [{"id", "function", "points", "max_points", "passed", "hint",
                              "link", "url", "detail", "hidden"}]}]}

``import_error`` is null, or the one line that says why the lesson's module failed to import
(exception, file and line); its checks then have detail "not run (module failed to import)"
and no hint.

``link`` is the chapter page and section relative to course/ (chapters/01-tokens.md#x),
``url`` the same place on the built site (chapters/01-tokens/#x). ``hint`` and ``detail`` are
null for a passed check; ``detail`` is always null for a hidden check, so no hidden input or
expected value ever leaves the grader.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .hints import NOT_IMPLEMENTED
from .manifest import Check, Lesson

NOT_GRADED = "not graded"


class Report:
    def __init__(
        self,
        target: Path,
        hidden: bool,
        lessons: Sequence[tuple[Lesson, Sequence[Check]]],
        json_path: Path | None,
        *,
        reveal_hidden: bool = False,
    ) -> None:
        self.json_path = json_path
        self.reveal_hidden = reveal_hidden
        self._checks: dict[str, dict[str, Any]] = {}
        self._lesson_of: dict[str, dict[str, Any]] = {}
        self.data: dict[str, Any] = {
            "target": str(target),
            "hidden": hidden,
            "complete": False,
            "points": 0,
            "max_points": 0,
            "lessons": [],
        }
        for lesson, checks in lessons:
            entry = {
                "slug": lesson.slug,
                "title": lesson.title,
                "points": 0,
                "max_points": sum(c.points for c in checks),
                "import_error": None,
                "checks": [],
            }
            for check in checks:
                row = {
                    "id": check.id,
                    "function": check.function,
                    "points": 0,
                    "max_points": check.points,
                    "passed": False,
                    "hint": None,
                    "link": check.link,
                    "url": check.url,
                    "detail": NOT_GRADED,
                    "hidden": check.hidden,
                }
                entry["checks"].append(row)
                self._checks[check.id] = row
                self._lesson_of[check.id] = entry
            self.data["lessons"].append(entry)
        self.data["max_points"] = sum(e["max_points"] for e in self.data["lessons"])
        self.write()

    def record(self, check: Check, passed: bool, hint: str | None, detail: str | None) -> None:
        row = self._checks[check.id]
        row["passed"] = passed
        row["points"] = check.points if passed else 0
        row["hint"] = None if passed else hint
        row["detail"] = None if passed or (check.hidden and not self.reveal_hidden) else detail
        lesson = self._lesson_of[check.id]
        lesson["points"] = sum(c["points"] for c in lesson["checks"])
        self.data["points"] = sum(e["points"] for e in self.data["lessons"])
        self.write()

    def import_failed(self, slug: str, message: str) -> None:
        """The lesson's module failed to import: said once, for the whole lesson."""
        lesson = self.lesson(slug)
        if lesson.get("import_error") is None:
            lesson["import_error"] = message
            self.write()

    def lesson(self, slug: str) -> dict[str, Any]:
        return next(e for e in self.data["lessons"] if e["slug"] == slug)

    def finish(self) -> None:
        self.data["complete"] = True
        self.write()

    def write(self) -> None:
        if self.json_path is not None:
            write_json_atomic(self.json_path, self.data)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so that readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# --------------------------------------------------------------------------------------------
# Terminal view


def render_lesson(console: Any, lesson: dict[str, Any]) -> None:
    """One lesson: a table of its checks, then a hint, detail and link per failed check."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    done = lesson["points"] == lesson["max_points"]
    title = Text.assemble(
        (f"Lesson: {lesson['title']} ", "bold"),
        (f"({lesson['slug']}) ", "dim"),
        (f"{lesson['points']}/{lesson['max_points']} points", "bold green" if done else "bold"),
    )
    console.print(title)  # its own line: a table title would wrap at the table's width
    if lesson.get("import_error"):
        # One cause, said once and first; its checks did not run, so no hints.
        console.print(
            Text.assemble(
                ("  ✗ ", "red"), ("failed to import: ", "bold red"), lesson["import_error"]
            )
        )
    table = Table(box=None, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("function", no_wrap=True, style="dim")
    table.add_column("points", justify="right", no_wrap=True)
    failed = []
    for check in lesson["checks"]:
        name = check["id"] + (" (hidden)" if check["hidden"] else "")
        not_run = lesson.get("import_error") and not check["passed"]
        mark = Text("✓", "green") if check["passed"] else Text("-" if not_run else "✗", "red")
        table.add_row(mark, name, check["function"], f"{check['points']}/{check['max_points']}")
        if not check["passed"] and not not_run:
            failed.append(check)
    console.print(table)
    stubs: dict[str, dict[str, Any]] = {}
    for check in failed:
        if check["hint"] == NOT_IMPLEMENTED:
            stubs.setdefault(check["function"], check)
            continue
        # A grid with a fixed gutter: long hints and details wrap with a hanging indent.
        note = Table.grid(padding=(0, 0))
        note.add_column(width=4, no_wrap=True)
        note.add_column()
        note.add_row(
            Text("  ✗ ", "red"),
            Text.assemble((check["id"], "bold"), ": ", (check["hint"] or "failed", "yellow")),
        )
        if check["detail"]:
            note.add_row("", Padding(Text(check["detail"], "dim"), (0, 0, 0, 2)))
        note.add_row("", Padding(Text(f"see course/{check['link']}", "cyan"), (0, 0, 0, 2)))
        console.print(note)
    for function, check in stubs.items():
        console.print(
            Text.assemble(
                ("  ✗ ", "red"),
                (function, "bold"),
                (": not implemented yet", "yellow"),
                (f"; see course/{check['link']}", "cyan"),
            )
        )
    console.print()


def render_total(console: Any, report: dict[str, Any]) -> None:
    """The run's last word: one table of every graded lesson, then the total."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Summary", title_justify="left", title_style="bold")
    table.add_column("lesson", no_wrap=True)
    table.add_column("title")
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for lesson in report["lessons"]:
        points, most = lesson["points"], lesson["max_points"]
        to_do = sum(1 for check in lesson["checks"] if not check["passed"])
        if not lesson["checks"]:
            status = Text("no checks yet", "dim")
        elif points == most:
            status = Text("done", "bold green")
        else:
            status = Text(f"to do ({to_do} of {len(lesson['checks'])} checks)", "yellow")
        table.add_row(lesson["slug"], lesson["title"], f"{points}/{most}", status)
    console.print(table)
    kind = "public and hidden checks" if report["hidden"] else "public checks"
    console.print(
        Text.assemble(
            ("Total: ", "bold"),
            (f"{report['points']}/{report['max_points']} points", "bold"),
            (f" ({kind}, {report['target']})", "dim"),
        )
    )
