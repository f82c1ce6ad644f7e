"""Recording graded submissions in nbgrader's gradebook, many at a time, one transaction each.

Grading (the harness, sandboxed) already produced a report per submission; what nbgrader's
own autograde would add is a kernel per submission that executes test cells whose only work is
to read that report. :func:`record_batch` does the same without a kernel: for each submission
it writes ``autograded/STUDENT/LESSON/`` (the submitted files, the rest restored from
source/, and the notebook rebuilt from the gradebook's source cells with each test cell's
output and value filled in from the report) and sets every grade cell's ``auto_score``,
exactly as nbgrader's ``SaveAutoGrades`` would; feedback and formgrader work on the result.

A batch is one database transaction: a submission is recorded whole or not at all, and
recording it again (a regrade, or a worker's task run twice) updates the same rows, so no row
is ever half-written or doubled. SQLite serves one machine; any SQLAlchemy URL nbgrader
supports (PostgreSQL) serves a cluster.

Every graded submission also leaves one row per check in ``course_check_history`` (a table of
ours in the same database): whether it passed and the mistake diagnosed, per distinct
submission (the graded files' fingerprint), so the class report can tell who is stuck.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nbformat
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    select,
)

from core.manifest import Check, Manifest, load_manifest
from graders.hints import NOT_IMPLEMENTED
from graders.notebook import render, with_cause
from graders.report import printable

from .course import COURSE_ID, PACKAGE, Course
from .late_penalty import after_penalty, penalty

CALL = re.compile(r"""check\(\s*["']([\w.-]+)["']\s*,\s*["']([\w.-]+)["']\s*\)""")
HISTORY = Table(
    "course_check_history",
    MetaData(),
    Column("student", String(128), nullable=False),
    Column("lesson", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("check_id", String(128), nullable=False),
    Column("submitted", DateTime, nullable=True),  # the submission's timestamp, when known
    Column("graded", DateTime, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("points", Float, nullable=False),
    Column("max_points", Float, nullable=False),
    Column("mistake", String(128), nullable=True),  # a mistake key, or a harness failure's name
    PrimaryKeyConstraint("student", "lesson", "fingerprint", "check_id"),
)
# Failures the harness diagnoses whatever the check, by the start of their hint.
NOT_IMPLEMENTED_KEY = "not-implemented"  # not a mistake: the stub is still there
HARNESS_MISTAKES = {
    NOT_IMPLEMENTED.split(":")[0]: NOT_IMPLEMENTED_KEY,
    "return plain data": "not-plain-data",
    "the function changed its input": "in-place",
    "the code called sys.exit": "exited",
    "ran out of memory": "out-of-memory",
    "took longer than": "timed-out",
    "the process running your code died": "crashed",
    "printed more than": "too-much-output",
}
UNNAMED = "unnamed"  # failed, with the check's general hint: no specific mistake recognised


def check_of_cell(source: str) -> tuple[str, str] | None:
    """(lesson, check id) of a test cell's ``check("LESSON", "ID")`` (hidden cells too)."""
    match = CALL.search(source)
    return (match.group(1), match.group(2)) if match else None


def mistake_of(check: Check, row: dict[str, Any], manifest: Manifest) -> str | None:
    """The name of the mistake a failed check's report row diagnosed: a key of the check's
    mistakes table (or its function's), a harness failure's name, or ``unnamed``."""
    if row.get("passed"):
        return None
    hint = row.get("hint") or ""
    for key, text in {
        **manifest.lesson(check.lesson).mistakes(check.function),
        **check.mistakes,
    }.items():
        if hint == text:
            return key
    for start, name in HARNESS_MISTAKES.items():
        if hint.startswith(start):
            return name
    if row.get("detail") == "not graded":
        return "not-graded"
    return UNNAMED


@dataclass
class Graded:
    """One submission's grading result, as the recorder needs it."""

    student: str
    lesson: str
    fingerprint: str
    report: dict[str, Any]
    timestamp: str | None = None  # timestamp.txt of the submission (nbgrader's format)
    error: str | None = None
    seconds: float = 0.0


def rows_by_check(report: dict[str, Any], lesson: str) -> dict[str, dict[str, Any]]:
    for entry in report.get("lessons", []):
        if entry.get("slug") == lesson:
            # A check the failed import kept from running says why, in the feedback too.
            return {row["id"]: with_cause(entry, row) for row in entry.get("checks", [])}
    return {}


class Recorder:
    """Writes batches of graded submissions into the gradebook (one writer, this object)."""

    def __init__(self, course: Course, site: str = "", manifest: Manifest | None = None) -> None:
        from nbgrader.api import Gradebook

        from .late_penalty import late_penalty_plugin

        self.course = course
        self.site = site
        self.manifest = manifest or load_manifest()
        self.late_plugin = late_penalty_plugin(course)
        self.gb = Gradebook(course.db_url, course_id=COURSE_ID)
        HISTORY.create(self.gb.engine, checkfirst=True)
        self._cells: dict[str, list[Any]] = {}

    def close(self) -> None:
        self.gb.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cells(self, lesson: str) -> list[Any]:
        from .preprocessors import released_cells

        if lesson not in self._cells:
            self._cells[lesson] = released_cells(self.gb, lesson, lesson)
        return self._cells[lesson]

    def record_batch(
        self, batch: Iterable[Graded]
    ) -> tuple[
        dict[tuple[str, str], tuple[float, float, float]], dict[tuple[str, str], BaseException]
    ]:
        """Record every submission of ``batch`` in one transaction. Returns (points, max, raw)
        per recorded (student, lesson), points after the late penalty and raw before it, and
        the error of each that could not be: when the transaction fails, each submission is
        tried on its own, so one bad submission does not keep the others out."""
        batch = list(batch)
        try:
            scores = {(g.student, g.lesson): self._record(g) for g in batch}
            self.gb.db.commit()
            return scores, {}
        except Exception as error:  # noqa: BLE001 - sorted out below
            self.gb.db.rollback()
            if len(batch) == 1:
                return {}, {(batch[0].student, batch[0].lesson): error}
        scores, errors = {}, {}
        for graded in batch:
            done, failed = self.record_batch([graded])
            scores.update(done)
            errors.update(failed)
        return scores, errors

    def _record(self, graded: Graded) -> tuple[float, float, float]:
        from nbgrader.api import Student, SubmittedAssignment
        from nbgrader.utils import parse_utc

        gb, db = self.gb, self.gb.db
        if db.get(Student, graded.student) is None:
            db.add(Student(id=graded.student))
            db.flush()
        timestamp = parse_utc(graded.timestamp) if graded.timestamp else None
        assignment = gb.find_assignment(graded.lesson)
        submission = (
            db.query(SubmittedAssignment)
            .filter(
                SubmittedAssignment.assignment_id == assignment.id,
                SubmittedAssignment.student_id == graded.student,
            )
            .one_or_none()
        )
        if submission is None:
            submission = self._new_submission(assignment, graded.student)
        submission.timestamp = timestamp
        rows = rows_by_check(graded.report, graded.lesson)
        cells = self._autograded_notebook(graded, rows)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                found = check_of_cell(cells.get(grade.name, ""))
                row = rows.get(found[1]) if found else None
                _, value = render(row, autograde=True) if row else ("", 0)
                grade.auto_score = min(max(float(value), 0.0), float(grade.max_score))
                grade.needs_manual_grade = grade.manual_score is not None
            for comment in notebook.comments:
                comment.auto_comment = None
        db.flush()
        self._late_penalty(submission, graded.student)
        self._history(graded, timestamp, rows)
        # Sums the database computes, from the rows just written.
        db.expire(submission, ["score", "max_score", "late_submission_penalty"])
        raw = float(submission.score)
        points = after_penalty(raw, submission.late_submission_penalty)
        return points, float(submission.max_score), raw

    def has_history(self, student: str, lesson: str, fingerprint: str) -> bool:
        """Whether the per-check history holds this submission (its files' fingerprint)."""
        return (
            self.gb.db.execute(
                select(HISTORY.c.check_id).where(
                    HISTORY.c.student == student,
                    HISTORY.c.lesson == lesson,
                    HISTORY.c.fingerprint == fingerprint,
                )
            ).first()
            is not None
        )

    def record_attempts(self, batch: Iterable[Graded]) -> None:
        """Record earlier attempts (see :mod:`.collect`) in the per-check history only, in one
        transaction: the gradebook's grades stay those of the newest submission."""
        from nbgrader.utils import parse_utc

        try:
            for graded in batch:
                stamp = parse_utc(graded.timestamp) if graded.timestamp else None
                self._history(graded, stamp, rows_by_check(graded.report, graded.lesson))
            self.gb.db.commit()
        except Exception:
            self.gb.db.rollback()
            raise

    def _history(self, graded: Graded, timestamp: Any, rows: dict[str, dict[str, Any]]) -> None:
        """One history row per check of a complete report, once per distinct submission."""
        if not graded.report.get("complete") or self.has_history(
            graded.student, graded.lesson, graded.fingerprint
        ):
            return
        checks = {c.id: c for c in self.manifest.lesson(graded.lesson).checks}
        now = datetime.now(UTC).replace(tzinfo=None)
        self.gb.db.execute(
            HISTORY.insert(),
            [
                {
                    "student": graded.student,
                    "lesson": graded.lesson,
                    "fingerprint": graded.fingerprint,
                    "check_id": check_id,
                    "submitted": timestamp,
                    "graded": now,
                    "passed": bool(row.get("passed")),
                    "points": float(row.get("points") or 0),
                    "max_points": float(row.get("max_points") or 0),
                    "mistake": mistake_of(checks[check_id], row, self.manifest)
                    if check_id in checks
                    else None,
                }
                for check_id, row in rows.items()
            ],
        )

    def _late_penalty(self, submission: Any, student: str) -> None:
        """What nbgrader's ``AssignLatePenalties`` does after autograde, per notebook: no
        penalty unless the submission's timestamp is past the lesson's due date (with the
        student's extension), then the plugin's, kept between 0 and the notebook's score."""
        late = submission.total_seconds_late
        for notebook in submission.notebooks:
            notebook.late_submission_penalty = None
            if late > 0:
                self.gb.db.expire(notebook, ["score"])  # the sum of the grades just set
                taken = penalty(self.late_plugin, student, notebook.score, late)
                notebook.late_submission_penalty = taken
        self.gb.db.flush()

    def _new_submission(self, assignment: Any, student: str) -> Any:
        """A submission mirroring the assignment's notebooks and cells (as nbgrader's
        ``add_submission`` makes it, without its commit: the batch commits)."""
        from nbgrader.api import Comment, Grade, SubmittedAssignment, SubmittedNotebook

        with self.gb.db.no_autoflush:
            submission = SubmittedAssignment(assignment=assignment, student_id=student)
            for notebook in assignment.notebooks:
                nb = SubmittedNotebook(notebook=notebook, assignment=submission)
                for cell in notebook.grade_cells:
                    Grade(cell_id=cell.id, notebook=nb)
                for cell in notebook.solution_cells:
                    Comment(cell_id=cell.id, notebook=nb)
                for cell in notebook.task_cells:
                    Comment(cell_id=cell.id, notebook=nb)
                    Grade(cell_id=cell.id, notebook=nb)
            self.gb.db.add(submission)
        self.gb.db.flush()
        return submission

    def _autograded_notebook(self, graded: Graded, rows: dict[str, dict]) -> dict[str, str]:
        """Write autograded/STUDENT/LESSON/ and return the notebook's sources by grade id."""
        course, lesson = self.course, graded.lesson
        module = self.manifest.lesson(lesson).module
        submitted = course.submitted / graded.student / lesson
        dest = course.autograded / graded.student / lesson
        staging = dest.with_name(f".{lesson}.recording")
        if staging.exists():
            shutil.rmtree(staging)
        # What nbgrader's autograde leaves: the submitted files, then every released file but
        # the student's module restored from source/ (so nothing else of theirs is graded).
        shutil.copytree(
            submitted,
            staging,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"),
        )
        mine = Path(PACKAGE) / f"{module}.py"
        source = course.source / lesson
        for root, dirs, files in os.walk(source):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                rel = (Path(root) / name).relative_to(source)
                if rel == mine or rel.name == f"{lesson}.ipynb" or name.endswith(".pyc"):
                    continue
                (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(Path(root) / name, staging / rel)
        # nbformat 4.4, as released: no cell ids (nbgrader matches cells by grade id).
        notebook = nbformat.from_dict(
            {
                "nbformat": 4,
                "nbformat_minor": 4,
                "metadata": {
                    "kernelspec": {
                        "display_name": "Python 3",
                        "language": "python",
                        "name": "python3",
                    },
                    "language_info": {"name": "python"},
                },
                "cells": self.cells(lesson),
            }
        )
        sources = {}
        for count, cell in enumerate(notebook.cells, start=1):
            meta = cell.metadata["nbgrader"]
            sources[meta["grade_id"]] = cell.source
            if cell.cell_type != "code":
                continue
            cell.execution_count = count
            cell.outputs = []
            found = check_of_cell(cell.source)
            if found is None:
                continue
            row = rows.get(found[1])
            if row is None:
                text = f"✗ {found[1]}: not graded ({graded.error or 'no result'})\n"
                value: float = 0
            else:
                text, value = render(row, autograde=True, site=self.site, rows=rows)
            if text:  # a plain-text stream (never HTML), terminal escapes taken out
                cell.outputs.append(
                    nbformat.v4.new_output("stream", name="stdout", text=printable(text))
                )
            cell.outputs.append(
                nbformat.v4.new_output(
                    "execute_result", data={"text/plain": repr(value)}, execution_count=count
                )
            )
        nbformat.write(notebook, staging / f"{lesson}.ipynb")
        if graded.timestamp:
            (staging / "timestamp.txt").write_text(graded.timestamp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
        return sources
