"""instructor/regrade.py: ``regrade --reproduce STUDENT LESSON`` grades the same files with
the recorded seed and finds the same points and messages; another seed, or changed files, do
not pass for the recorded grading."""

from __future__ import annotations

import json

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

LESSON = "embeddings"
LOOKUP = "lookup-matches-indexing"


@pytest.fixture
def graded(course):
    """A course where ann's submission (one check failed) was autograded."""
    from support.autograde_fakes import fake_grade, submit

    from instructor import autograde as pipeline

    submit(course.root, "ann", {LOOKUP: "off-by-one"})
    pipeline.autograde(course, [LESSON], engine="threads", grader=fake_grade, progress=False)
    return course


def test_the_recorded_seed_reproduces_points_and_messages(graded):
    from support.autograde_fakes import fake_grade

    from instructor import gradings
    from instructor.regrade import reproduce

    done = reproduce(graded, "ann", LESSON, grader=fake_grade)
    assert done.differences == []
    seed = gradings.entry(graded.root, "ann", LESSON)["seed"]
    failed = [row for row in done.rows if not row["passed"]]
    assert [row["id"] for row in failed] == [LOOKUP] and failed[0]["detail"] == f"seed {seed}"


def test_another_seed_is_told_apart(graded):
    from support.autograde_fakes import fake_grade

    from instructor import gradings
    from instructor.regrade import reproduce

    path = gradings.path(graded.root)
    data = json.loads(path.read_text())
    data[f"ann/{LESSON}"]["seed"] += 1
    path.write_text(json.dumps(data))
    done = reproduce(graded, "ann", LESSON, grader=fake_grade)
    assert len(done.differences) == 1 and done.differences[0].startswith(f"{LOOKUP}: detail")


def test_changed_files_or_no_record_are_one_line(graded):
    from support.autograde_fakes import fake_grade, submit

    from instructor.errors import SetupError
    from instructor.regrade import reproduce

    with pytest.raises(SetupError, match="no grading of bob/embeddings is on record"):
        reproduce(graded, "bob", LESSON, grader=fake_grade)
    submit(graded.root, "ann", {})
    with pytest.raises(SetupError, match="changed since its grade was recorded"):
        reproduce(graded, "ann", LESSON, grader=fake_grade)


def test_the_command_says_whether_it_reproduced(graded, capfd, monkeypatch):
    from support.autograde_fakes import fake_grade

    from instructor import grading
    from instructor.__main__ import main

    monkeypatch.setattr(grading, "grade_files", fake_grade)
    monkeypatch.setattr("instructor.regrade.grade_files", fake_grade)
    status = main(["--course", str(graded.root), "regrade", "--reproduce", "ann", LESSON])
    out, err = capfd.readouterr()
    assert status == 0 and not err
    assert f"✗ {LOOKUP}" in out
    assert out.strip().splitlines()[-1].startswith(f"ann/{LESSON}: reproduced: the same points")
