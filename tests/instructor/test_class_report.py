"""The class report (issue 34): it opens with what to re-teach, shows an import failure once
with its cause, names timeouts, leaves out lessons nobody submitted, shows the scores of
grades.csv (late penalty included, raw beside) and lists the code flagged for review.

The class is graded by the stand-in harness (tests/autograde_fakes.py): the test is about the
report, not the grading."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

CAUSE = "SyntaxError: invalid syntax (exercises/embeddings.py, line 3)"
LOOKUP, MASK, LARGE = "lookup-matches-indexing", "attention-causal-mask", "attention-large-scores"
FLAG = {
    "function": "nearest",
    "file": "exercises/embeddings.py",
    "line": 12,
    "reason": "calls a function it looks up by a name built at run time",
}
# lesson -> student -> the checks the fake fails (check id -> mistake key)
CLASS = {
    "embeddings": {
        "ann": {},
        "bob": {LOOKUP: "off-by-one"},
        "cy": {LOOKUP: "off-by-one", "nearest-cosine": "timed-out"},
        "dee": None,  # the module fails to import
    },
    "attention": {
        "ann": {},  # late: nbgrader's "zero" penalty takes every point
        "bob": {MASK: "mask-inverted", LARGE: "mask-inverted"},
        "cy": {MASK: "mask-inverted"},
        "dee": {MASK: "mask-inverted"},
    },
}


def _manifest():
    from core.manifest import load_manifest

    return load_manifest()


@pytest.fixture(scope="module")
def reported(released_course, tmp_path_factory):
    """The class above autograded with a due date on attention and a "zero" late penalty;
    bob's embeddings report given a ``flagged`` entry by hand; exported and reported."""
    from autograde_fakes import fake_grade, marks
    from nbgrader.api import Gradebook

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.course import Course
    from instructor.export import export

    root = tmp_path_factory.mktemp("class-report") / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    config = root.parent / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    with Gradebook(course.db_url) as gb:
        gb.update_or_create_assignment("attention", duedate="2026-02-01 12:00:00 UTC")
    for lesson, students in CLASS.items():
        module = _manifest().lesson(lesson).module
        for student, fails in students.items():
            dest = course.submitted / student / lesson
            shutil.copytree(course.release / lesson, dest)
            source = dest / "exercises" / f"{module}.py"
            added = f"\n# IMPORT-ERROR {CAUSE}\n" if fails is None else marks(fails)
            source.write_text(source.read_text() + added)
            late = lesson == "attention" and student == "ann"
            stamp = "2026-02-02 08:00:00" if late else "2026-02-01 09:00:00"
            (dest / "timestamp.txt").write_text(f"{stamp}.000000 UTC\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_CONFIG_DIR", str(config))
        outcomes = pipeline.autograde(course, engine="threads", grader=fake_grade)
    assert all(o.recorded for o in outcomes), [o.notes for o in outcomes]
    results = course.results / "bob" / "embeddings.json"
    data = json.loads(results.read_text())
    data["report"]["lessons"][0]["flagged"] = [FLAG]
    results.write_text(json.dumps(data))
    export(course)
    write_report(course)
    reports = root / "reports"
    return {
        "course": course,
        "html": (reports / "mistakes.html").read_text(),
        "rows": list(csv.DictReader((reports / "mistakes.csv").open())),
        "grades": list(csv.DictReader((root / "grades.csv").open())),
    }


def _section(html: str, name: str) -> str:
    start = html.index(f"<section id='{name}'>")
    return html[start : html.index("</section>", start)]


def test_it_opens_with_what_to_re_teach(reported):
    html = reported["html"]
    reteach = _section(html, "reteach")
    assert html.index("<section id='reteach'>") < html.index("<section id='embeddings'>")
    items = reteach.split("<li>")[1:]
    # The inverted mask (3 students, diagnosed by two checks of one function) first, then
    # the off-by-one lookup (2), then cy's timeout (1).
    assert "3 student(s)" in items[0] and "mask inverted" in items[0], items[0]
    assert "bob, cy, dee" in items[0]
    mask = next(c for c in _manifest().lesson("attention").checks if c.id == MASK)
    assert f"{mask.url}'" in items[0]  # the section to revisit, as the manifest has it
    assert "2 student(s)" in items[1] and "lookup" in items[1] and "bob, cy" in items[1]
    assert "02-embeddings/#" in items[1]
    assert "1 student(s)" in items[2] and "took longer than" in items[2]
    assert not any("not-implemented" in item or "import" in item for item in items)


def test_an_import_failure_is_shown_once_with_its_cause(reported):
    embeddings = _section(reported["html"], "embeddings")
    assert embeddings.count("failed to import") == 1
    assert f"dee</span>: {CAUSE}" in embeddings
    # dee counts under no check: the lookup's mistakes are bob's and cy's only.
    lookup = [r for r in reported["rows"] if r["check"] == LOOKUP]
    assert [(r["mistake"], r["who"]) for r in lookup] == [("off-by-one", "bob cy")]
    assert lookup[0]["students"] == "3"
    assert not [
        r
        for r in reported["rows"]
        if r["lesson"] == "embeddings" and "dee" in r["who"] and r["mistake"] != "import-failed"
    ]
    failed = [r for r in reported["rows"] if r["mistake"] == "import-failed"]
    assert [(r["lesson"], r["who"], r["hint"]) for r in failed] == [("embeddings", "dee", CAUSE)]


def test_a_timeout_says_how_long(reported):
    check = next(c for c in _manifest().lesson("embeddings").checks if c.id == "nearest-cosine")
    row = next(r for r in reported["rows"] if r["check"] == check.id and r["who"] == "cy")
    assert row["mistake"] == "timed-out"
    assert row["hint"].startswith(f"took longer than {check.timeout:g} s"), row["hint"]


def test_lessons_nobody_submitted_are_left_out(reported):
    html = reported["html"]
    released = reported["course"].lessons()
    others = [slug for slug in released if slug not in CLASS]
    assert others
    assert all(f"<section id='{slug}'>" not in html for slug in others)
    assert {r["lesson"] for r in reported["rows"]} == set(CLASS)
    line = html[html.index("<p class='missing' id='unsubmitted'>") :].split("</p>")[0]
    assert all(slug in line for slug in others)
    students = _section(html, "students")
    assert all(f"{slug}</th>" not in students for slug in others)


def test_scores_are_those_of_grades_csv_with_the_raw_beside(reported):
    students = _section(reported["html"], "students")
    graded = [r for r in reported["grades"] if r["status"] == "graded"]
    assert len(graded) == 8
    penalised = [r for r in graded if float(r["late_submission_penalty"] or 0)]
    assert [(r["student_id"], r["assignment"]) for r in penalised] == [("ann", "attention")]
    for row in graded:
        raw, score = float(row["raw_score"]), float(row["score"])
        cell = f"{score:g} of {float(row['max_score']):g}"
        cell += f" (raw {raw:g})</td>" if raw != score else "</td>"
        assert (
            cell in students.split(f"<td class='id'>{row['student_id']}</td>")[1].split("</tr>")[0]
        ), (row, cell)
    attention = _section(reported["html"], "attention")
    scores = [float(r["score"]) for r in graded if r["assignment"] == "attention"]
    assert f"mean {sum(scores) / len(scores):.1f} of" in attention
    assert "late penalties included (1 late)" in attention


def test_code_flagged_for_review_is_listed_with_its_line(reported):
    flagged = _section(reported["html"], "flagged")
    assert "Flagged for review" in flagged
    row = flagged.split("<td class='id'>bob</td>")[1].split("</tr>")[0]
    assert "embeddings" in row and FLAG["function"] in row
    assert f"{FLAG['file']}, line {FLAG['line']}" in row and FLAG["reason"] in row
    assert flagged.count("<td class='id'>") == 1
