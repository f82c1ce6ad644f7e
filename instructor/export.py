"""``export``: the gradebook as two CSV files, for the instructor (not for students).

``grades.csv``, one row per student and lesson: nbgrader's columns (assignment, duedate,
timestamp, student_id, last_name, first_name, email, raw_score, late_submission_penalty,
score, max_score) and ``status``, ``graded`` or ``not submitted``. A lesson a student never
submitted has empty scores, not 0, so the two can be told apart.

``grades-by-check.csv``, one row per student, lesson and check: the check's id (hidden checks
too: their cells carry an opaque grade id in the students' notebook, but this file is the
instructor's), whether it is hidden, its function, the submission's timestamp and status, the
score and the most it could score, and nbgrader's cell id.

Both are written atomically (a reader sees the old file or the new one), cells that a
spreadsheet would run as a formula neutralised (:func:`cell`), by
:class:`GradesExport`, an nbgrader export plugin: ``nbgrader export`` in the course folder
(whose generated config names it) writes the same files, ``--to PATH`` naming grades.csv.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nbgrader.plugins import ExportPlugin

from core.atomic import atomic_write_bytes
from core.manifest import load_manifest

from .course import COURSE_ID, Course
from .gradebook import check_of_cell
from .late_penalty import after_penalty

GRADES = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "status",
]
BY_CHECK = [
    "student_id",
    "lesson",
    "check",
    "hidden",
    "function",
    "timestamp",
    "status",
    "score",
    "max_score",
    "cell",
]
GRADED, NOT_SUBMITTED = "graded", "not submitted"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def grade_rows(gb: Any) -> Iterator[dict[str, str]]:
    """grades.csv's rows: every student (the roster and whoever submitted) for every lesson."""
    from nbgrader.api import MissingEntry

    students = sorted(gb.students, key=lambda s: s.id)
    for assignment in sorted(gb.assignments, key=lambda a: a.name):
        for student in students:
            row: dict[str, Any] = {
                "assignment": assignment.name,
                "duedate": assignment.duedate,
                "student_id": student.id,
                "last_name": student.last_name,
                "first_name": student.first_name,
                "email": student.email,
                "max_score": assignment.max_score,
            }
            try:
                sub = gb.find_submission(assignment.name, student.id)
            except MissingEntry:
                row["status"] = NOT_SUBMITTED
            else:
                penalty = sub.late_submission_penalty or 0.0
                row.update(
                    timestamp=sub.timestamp,
                    raw_score=sub.score,
                    late_submission_penalty=penalty,
                    score=after_penalty(sub.score, penalty),
                    status=GRADED,
                )
            yield {key: _text(row.get(key)) for key in GRADES}


def check_rows(gb: Any) -> Iterator[dict[str, str]]:
    """grades-by-check.csv's rows, in notebook order."""
    from nbgrader.api import MissingEntry

    manifest = load_manifest()
    students = sorted(gb.students, key=lambda s: s.id)
    for assignment in sorted(gb.assignments, key=lambda a: a.name):
        try:
            lesson = manifest.lesson(assignment.name)
        except Exception:  # noqa: BLE001 - an assignment not in the manifest: no check names
            lesson = None
        checks = {c.id: c for c in lesson.checks} if lesson else {}
        for notebook in assignment.notebooks:
            sources = {cell.name: cell.source for cell in notebook.source_cells}
            cells = sorted(notebook.grade_cells, key=lambda c: c.name)
            for student in students:
                try:
                    sub = gb.find_submission_notebook(notebook.name, assignment.name, student.id)
                except MissingEntry:
                    sub, scores = None, {}
                else:
                    scores = {g.name: g.score for g in sub.grades}
                for cell in cells:
                    found = check_of_cell(sources.get(cell.name, ""))
                    check = checks.get(found[1]) if found else None
                    row = {
                        "student_id": student.id,
                        "lesson": assignment.name,
                        "check": found[1] if found else cell.name,
                        "hidden": "yes" if check and check.hidden else "no",
                        "function": check.function if check else "",
                        "timestamp": sub.assignment.timestamp if sub else None,
                        "status": GRADED if sub else NOT_SUBMITTED,
                        "score": scores.get(cell.name),
                        "max_score": cell.max_score,
                        "cell": cell.name,
                    }
                    yield {key: _text(row.get(key)) for key in BY_CHECK}


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as a formula


def cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: one that starts like a formula (a roster's
    name, a student's id) gets a leading apostrophe, as OWASP advises against CSV injection;
    plain numbers (a negative one too) stay numbers. A carriage return becomes a line break,
    which the writer quotes (it quotes only its own line terminator's characters)."""
    if text.startswith(FORMULA_START):
        try:
            float(text)
        except ValueError:
            text = "'" + text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def write_csv(path: Path, columns: list[str], rows: Iterator[dict[str, str]]) -> None:
    """Every CSV of the course (exports, reports): atomically, each cell through :func:`cell`."""
    buffer = io.StringIO()
    out = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    out.writeheader()
    out.writerows({key: cell(value) for key, value in row.items()} for row in rows)
    atomic_write_bytes(path, buffer.getvalue().encode("utf-8"))


class GradesExport(ExportPlugin):
    """nbgrader's export step writing grades.csv (at ``to``, default ./grades.csv) and
    grades-by-check.csv beside it; ``--student`` and ``--assignment`` keep only those rows."""

    def export(self, gradebook: Any) -> None:
        grades = Path(self.to or "grades.csv")
        self.log.info("Exporting grades to %s", grades)
        write_csv(grades, GRADES, self.chosen(grade_rows(gradebook), "assignment"))
        by_check = self.chosen(check_rows(gradebook), "lesson")
        write_csv(grades.with_name("grades-by-check.csv"), BY_CHECK, by_check)

    def chosen(self, rows: Iterator[dict[str, str]], lesson: str) -> Iterator[dict[str, str]]:
        students, lessons = set(map(str, self.student)), set(map(str, self.assignment))
        for row in rows:
            if (not students or row["student_id"] in students) and (
                not lessons or row[lesson] in lessons
            ):
                yield row


def export(course: Course, to: Path | None = None) -> list[Path]:
    """Write grades.csv and grades-by-check.csv (in ``to``, default the course folder)."""
    from nbgrader.api import Gradebook

    folder = Path(to) if to else course.root
    paths = [folder / "grades.csv", folder / "grades-by-check.csv"]
    with Gradebook(course.db_url, course_id=COURSE_ID) as gb:
        GradesExport(to=str(paths[0])).export(gb)
    return paths
