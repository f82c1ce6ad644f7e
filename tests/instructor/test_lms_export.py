"""instructor/lms_export.py: `export --format canvas|moodle` writes the columns each
LMS's gradebook import documents (Canvas: Student, ID, SIS User ID, SIS Login ID, Section, a
column per assignment and the Points Possible row; Moodle: an identifier column and a column per
grade item), with the scores after late penalties and an empty cell for work not handed in."""

from __future__ import annotations

import csv
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

LESSONS = ("embeddings", "tokens")


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory) -> Path:
    """Two lessons of 10 points; ann and bob graded on embeddings (bob late, a 3-point
    penalty), cy on none, and cy has neither LMS user id nor email (made once: nbgrader takes
    seconds to make a gradebook)."""
    from nbgrader.api import Gradebook

    from instructor.course import COURSE_ID

    path = tmp_path_factory.mktemp("lms") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}", course_id=COURSE_ID) as gb:
        gb.add_student(
            "ann", first_name="Ann", last_name="Ables", lms_user_id="12345", email="ann@example.org"
        )
        gb.add_student(
            "bob", first_name="Bob", last_name="Baker", lms_user_id="4242", email="bob@example.org"
        )
        gb.add_student("cy", first_name="Cy", last_name="Chen")
        for lesson in LESSONS:
            gb.add_assignment(lesson, duedate=datetime(2026, 2, 1, 12))
            gb.add_notebook(lesson, lesson)
            gb.add_grade_cell("check", lesson, lesson, max_score=10, cell_type="code")
        for student, score, stamp in (("ann", 8, 11), ("bob", 9, 13)):
            gb.add_submission("embeddings", student, timestamp=datetime(2026, 2, 1, stamp))
            grade = gb.find_grade("check", "embeddings", "embeddings", student)
            grade.auto_score = score
            notebook = gb.find_submission_notebook("embeddings", "embeddings", student)
            notebook.late_submission_penalty = 3 if student == "bob" else None
        gb.db.commit()
    return path


@pytest.fixture
def course(tmp_path, monkeypatch, gradebook):
    """A course folder with both lessons released and that gradebook."""
    from instructor.course import Course
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    course = Course.at(tmp_path / "course")
    for lesson in LESSONS:
        (course.source / lesson).mkdir(parents=True)
        (course.source / lesson / f"{lesson}.ipynb").write_text("{}")
    shutil.copyfile(gradebook, course.gradebook)
    return course


def _read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_gradebook_csv(course):
    from instructor.lms_export import export_lms

    path, warnings = export_lms(course, "canvas", assignment_ids={"embeddings": "9001"})
    assert path == course.root / "grades-canvas.csv"
    header, possible, *students = _read(path)
    assert header == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "embeddings (9001)",
        "tokens",
    ]
    assert possible == ["Points Possible", "", "", "", "", "10", "10"]
    assert students == [
        ["Ables, Ann", "12345", "", "", "", "8", ""],
        ["Baker, Bob", "4242", "", "", "", "6", ""],  # 9 less the late penalty
    ]
    (line,) = warnings
    assert line.startswith("not in the Canvas file: cy has no LMS user id")
    assert "--lms-user-id ID" in line


def test_moodle_grade_import_csv(course):
    from instructor.lms_export import export_lms

    path, warnings = export_lms(course, "moodle", course.root / "out")
    header, *students = _read(path)
    assert header == ["Email address", "ID number", "First name", "Last name", *LESSONS]
    assert students == [
        ["ann@example.org", "ann", "Ann", "Ables", "8", ""],
        ["bob@example.org", "bob", "Bob", "Baker", "6", ""],
        ["", "cy", "Cy", "Chen", "", ""],
    ]
    assert len(warnings) == 1 and "cy" in warnings[0] and "ID number" in warnings[0]


def test_the_export_command(course, capsys):
    from instructor.__main__ import USAGE, main

    assert main(["--course", str(course.root), "export", "--format", "canvas"]) == 0
    out = capsys.readouterr()
    assert f"exported {course.root / 'grades-canvas.csv'}" in out.out
    assert "cy has no LMS user id" in out.err
    assert _read(course.root / "grades-canvas.csv")[0][5:] == list(LESSONS)
    bad = ["--course", str(course.root), "export", "--format", "canvas"]
    assert main([*bad, "--canvas-assignment", "embeddings=x"]) == USAGE
    assert "is not LESSON=ID" in capsys.readouterr().err
    assert main([*bad, "--canvas-assignment", "tokenz=3"]) == USAGE
    assert "'tokenz', no lesson of the gradebook" in capsys.readouterr().err
    # A mistyped lesson, to any command: the one it is close to.
    assert main(["--course", str(course.root), "feedback", "embedings"]) == USAGE
    err = capsys.readouterr().err
    assert "'embedings' is not a released lesson (did you mean 'embeddings'?" in err
