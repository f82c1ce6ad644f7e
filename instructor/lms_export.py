"""``export --format canvas|moodle``: the grades as a file the LMS's gradebook imports as it is.

The scores are grades.csv's (:func:`.export.grade_rows`: after late penalties; a lesson a
student did not submit is an empty cell, which both LMSs import as "no grade", never 0).

- **Canvas** (Grades, Import): the columns of Canvas's own gradebook export, ``Student``
  (``Last, First``), ``ID`` (the Canvas user id: the roster's ``lms_user_id``), ``SIS User
  ID``, ``SIS Login ID`` (empty: Canvas matches a row by ``ID``), ``Section``, then one column
  per lesson, and a second row ``Points Possible`` with each lesson's most points. A lesson's
  column is ``LESSON (ASSIGNMENT_ID)`` when its Canvas assignment id is given (Canvas then
  fills that assignment), else ``LESSON`` (Canvas offers to create an assignment of that
  name). A student without an LMS user id cannot be matched: each is named in one line.
- **Moodle** (Grades, Import, CSV file): ``Email address`` (map it to the user field "Email
  address"), ``ID number`` (the roster id), ``First name``, ``Last name``, then one column per
  lesson, which the import maps to its grade item. A student without an email is named.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .course import COURSE_ID, Course
from .errors import SetupError
from .export import GRADED, grade_rows, write_csv

CANVAS_FIRST = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_FIRST = ["Email address", "ID number", "First name", "Last name"]
FORMATS = ("canvas", "moodle")
POINTS_POSSIBLE = "Points Possible"


def _scores(gb: Any) -> tuple[list[str], dict[str, str], dict[str, dict[str, str]]]:
    """The lessons (in order), each one's most points, and per student their score of each
    graded lesson, from grades.csv's rows."""
    lessons: list[str] = []
    most: dict[str, str] = {}
    scores: dict[str, dict[str, str]] = {}
    for row in grade_rows(gb):
        lesson = row["assignment"]
        if lesson not in most:
            lessons.append(lesson)
            most[lesson] = row["max_score"]
        if row["status"] == GRADED:
            scores.setdefault(row["student_id"], {})[lesson] = row["score"]
    return lessons, most, scores


def _canvas_rows(
    gb: Any, assignment_ids: dict[str, str]
) -> tuple[list[str], Iterator[dict[str, str]], list[str]]:
    lessons, most, scores = _scores(gb)
    column = {
        lesson: f"{lesson} ({assignment_ids[lesson]})" if lesson in assignment_ids else lesson
        for lesson in lessons
    }
    students = sorted(gb.students, key=lambda s: (s.last_name or "", s.first_name or "", s.id))
    unmatched = [s.id for s in students if not s.lms_user_id]
    rows: list[dict[str, str]] = [
        {"Student": POINTS_POSSIBLE, **{column[lesson]: most[lesson] for lesson in lessons}}
    ]
    for student in students:
        if not student.lms_user_id:
            continue
        name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
        row = {"Student": name, "ID": str(student.lms_user_id)}
        for lesson in lessons:
            row[column[lesson]] = scores.get(student.id, {}).get(lesson, "")
        rows.append(row)
    warnings = [
        f"not in the Canvas file: {who} has no LMS user id (the Canvas ID that Canvas matches "
        f"a row by): add it (nbgrader db student add {who} --lms-user-id ID) and export again"
        for who in unmatched
    ]
    return CANVAS_FIRST + [column[lesson] for lesson in lessons], iter(rows), warnings


def _moodle_rows(gb: Any) -> tuple[list[str], Iterator[dict[str, str]], list[str]]:
    lessons, _most, scores = _scores(gb)
    students = sorted(gb.students, key=lambda s: s.id)
    rows = [
        {
            "Email address": student.email or "",
            "ID number": student.id,
            "First name": student.first_name or "",
            "Last name": student.last_name or "",
            **{lesson: scores.get(student.id, {}).get(lesson, "") for lesson in lessons},
        }
        for student in students
    ]
    warnings = [
        f"in the Moodle file without an email: {s.id}: map the import by ID number instead, "
        f"or add their email (nbgrader db student add {s.id} --email ADDRESS)"
        for s in students
        if not s.email
    ]
    return MOODLE_FIRST + lessons, iter(rows), warnings


def parse_assignment_ids(given: list[str]) -> dict[str, str]:
    """``LESSON=ID`` options: each lesson's Canvas assignment id."""
    found = {}
    for item in given:
        lesson, _, number = item.partition("=")
        if not lesson or not number.strip().isdigit():
            raise SetupError(
                f"--canvas-assignment {item!r} is not LESSON=ID: give the lesson and the number "
                "in its Canvas address (.../assignments/ID)"
            )
        found[lesson.strip()] = number.strip()
    return found


def export_lms(
    course: Course, kind: str, to: Path | None = None, assignment_ids: dict[str, str] | None = None
) -> tuple[Path, list[str]]:
    """Write ``grades-canvas.csv`` or ``grades-moodle.csv`` (in ``to``, default the course
    folder); returns its path and one line per student the LMS will not match."""
    from nbgrader.api import Gradebook

    if kind not in FORMATS:
        raise SetupError(f"no export format {kind!r}: choose one of {', '.join(FORMATS)}")
    path = Path(to or course.root) / f"grades-{kind}.csv"
    with Gradebook(course.db_url, course_id=COURSE_ID) as gb:
        if kind == "canvas":
            known = {a.name for a in gb.assignments}
            unknown = sorted(set(assignment_ids or {}) - known)
            if unknown:
                raise SetupError(
                    f"--canvas-assignment names {unknown[0]!r}, no lesson of the gradebook "
                    f"(it has: {', '.join(sorted(known)) or 'none'})"
                )
            columns, rows, warnings = _canvas_rows(gb, assignment_ids or {})
        else:
            columns, rows, warnings = _moodle_rows(gb)
        write_csv(path, columns, ({c: row.get(c, "") for c in columns} for row in rows))
    return path, warnings
