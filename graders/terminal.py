"""The terminal view of a grading: a table per lesson as it is graded, with the hint, detail
and link of each failed check, and the summary of every lesson the report holds (the report
itself is graders/report.py). On a terminal, one transient line counts a lesson's checks as
they finish, until its table comes (``Ticker``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from .hints import NOT_IMPLEMENTED
from .report import NOT_GRADED, follows, href, told_with

KINDS = ("same", "after", "uses")  # the order the terminal tells followers in


class Ticker:
    """The grading's calls back: while a lesson is graded, one line that counts its checks as
    they finish ("block: 7 of 23 checks, 7 passed so far"), replaced by the lesson's table
    when its last check is done. Only on a terminal: in a log or a pipe the tables say all."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.status: Any = None

    def check(self, lesson: dict[str, Any], row: dict[str, Any]) -> None:
        if not self.console.is_terminal:
            return
        checks = lesson["checks"]
        done = sum(c["detail"] != NOT_GRADED for c in checks)
        passed = sum(c["passed"] for c in checks)
        line = f"{lesson['slug']}: {done} of {len(checks)} checks, {passed} passed so far"
        if self.status is None:
            self.status = self.console.status(line)
            self.status.start()
        else:
            self.status.update(line)

    def lesson(self, lesson: dict[str, Any]) -> None:
        self.stop()
        render_lesson(self.console, lesson)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


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
    followers: dict[str, list[dict[str, Any]]] = {}  # check id -> failures it explains
    for check in failed:
        if check.get("explained_by"):
            followers.setdefault(check["explained_by"], []).append(check)
    for check in failed:
        if check["hint"] == NOT_IMPLEMENTED:
            stubs.setdefault(check["function"], check)
            continue
        if check.get("explained_by"):
            continue  # told with the failure that explains it
        told = followers.get(check["id"], [])
        groups = {kind: [c for c in told if follows(check, c) == kind] for kind in KINDS}
        # A grid with a fixed gutter: long hints and details wrap with a hanging indent.
        note = Table.grid(padding=(0, 0))
        note.add_column(width=4, no_wrap=True)
        note.add_column()
        note.add_row(
            Text("  ✗ ", "red"),
            Text.assemble((check["id"], "bold"), ": ", (check["hint"] or "failed", "yellow")),
        )
        for each in [check, *(c for kind in KINDS for c in groups[kind])]:
            if each["detail"]:
                label = f"{each['id']}: " if each is not check else ""
                note.add_row("", Padding(Text(label + each["detail"], "dim"), (0, 0, 0, 2)))
        for kind in KINDS:
            if groups[kind]:
                line = Text(told_with(check, groups[kind]), "yellow")
                note.add_row("", Padding(line, (0, 0, 0, 2)))
        console.print(note)
        print_link(console, check["link"], indent=6)
    for function, check in stubs.items():
        console.print(
            Text.assemble(("  ✗ ", "red"), (function, "bold"), (": not implemented yet", "yellow"))
        )
        print_link(console, check["link"], indent=6)
    console.print()


def print_link(console: Any, link: str, indent: int = 0) -> None:
    """``see <where>`` on a line of its own that is never wrapped: a terminal finds the whole
    address (a long one runs past the edge rather than breaking), and where the terminal
    supports it the address is a hyperlink."""
    from rich.style import Style
    from rich.text import Text

    where = href(link)
    target = where if "://" in where else Path(where.rsplit(":", 1)[0]).resolve().as_uri()
    text = Text.assemble(" " * indent, "see ", (where, Style(color="cyan", link=target)))
    console.print(text, soft_wrap=True, crop=False, overflow="ignore", no_wrap=True)


def local_time(lesson: dict[str, Any]) -> str:
    """When the lesson was graded, in the local time zone (``2026-03-01 14:05``)."""
    try:
        return datetime.fromisoformat(lesson["graded"]).astimezone().strftime("%Y-%m-%d %H:%M")
    except (KeyError, TypeError, ValueError):
        return ""


def render_total(console: Any, report: dict[str, Any]) -> None:
    """The run's last word: one table of every lesson the report holds (those graded earlier
    too) with when each was graded, then the total."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Summary", title_justify="left", title_style="bold")
    table.add_column("lesson", no_wrap=True)
    table.add_column("title")
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("graded", no_wrap=True, style="dim")
    for lesson in report["lessons"]:
        points, most = lesson["points"], lesson["max_points"]
        to_do = sum(1 for check in lesson["checks"] if not check["passed"])
        if not lesson["checks"]:
            status = Text("no checks yet", "dim")
        elif points == most:
            status = Text("done", "bold green")
        else:
            status = Text(f"to do ({to_do} of {len(lesson['checks'])} checks)", "yellow")
        table.add_row(
            lesson["slug"], lesson["title"], f"{points}/{most}", status, local_time(lesson)
        )
    console.print(table)
    kind = "public and hidden checks" if report["hidden"] else "public checks"
    console.print(
        Text.assemble(
            ("Total: ", "bold"),
            (f"{report['points']}/{report['max_points']} points", "bold"),
            (f" ({kind}, {report['target']})", "dim"),
        )
    )
