"""instructor/feedback.py (and export, report): what students control reaches the notebooks, the
HTML and the CSV files escaped."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
)

HOSTILE_ID = "<img src=x onerror=alert(1)>"


HOSTILE_TEXT = "\x1b]0;owned\x07\x1b[2J<script>alert('x')</script> =HYPERLINK(\"http://evil\")"


def test_student_text_is_escaped_in_notebooks_html_and_csv(released_course, tmp_path):
    """What students control (their ids and names on the roster, the messages their code's
    exceptions carry, their code) reaches the autograded notebook as plain text without
    terminal escapes, the feedback and the reports' HTML escaped, and every CSV with the
    cells a spreadsheet would run as formulas neutralised."""
    import csv
    from html import escape

    import nbformat
    from nbgrader.api import Gradebook
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.course import Course
    from instructor.export import export
    from instructor.feedback import feedback
    from instructor.similarity import compare

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    formula = {"first_name": '=cmd|" /C calc"!A0', "last_name": "+1+1", "email": "@SUM(A1)"}
    with Gradebook(course.db_url) as gb:
        gb.add_student(HOSTILE_ID, **formula)
        gb.add_student("-2+3", first_name="\tTab", last_name="\rReturn")
    lookup = "lookup-matches-indexing"
    code = f"\nSHOUT = {HOSTILE_TEXT!r}  # </code></pre><script>alert(2)</script>\n"
    for student in ("ann", "bob"):
        module = submit(root, student, {lookup: None}) / "exercises" / "embeddings.py"
        module.write_text(module.read_text() + code)
    shutil.copytree(course.submitted / "ann", course.submitted / HOSTILE_ID)

    def hostile(lesson, files, **kwargs):
        result = fake_grade(lesson, files, **kwargs)
        for row in result["report"]["lessons"][0]["checks"]:
            if not row["passed"]:
                row["detail"] = HOSTILE_TEXT  # as an exception's message reads
        return result

    outcomes = pipeline.autograde(
        course, [LESSON], ["ann", "bob"], engine="threads", grader=hostile
    )
    assert all(o.recorded for o in outcomes), [o.notes for o in outcomes]
    notebook = (course.autograded / "ann" / LESSON / f"{LESSON}.ipynb").read_text()
    assert "<script>alert('x')</script>" in notebook  # shown as text,
    assert "\\u001b" not in notebook and "\\u0007" not in notebook  # without its escapes
    outputs = [
        output
        for cell in nbformat.reads(notebook, as_version=4).cells
        for output in cell.get("outputs", [])
    ]
    assert all(o.output_type in ("stream", "execute_result") for o in outputs)
    assert not any("text/html" in o.get("data", {}) for o in outputs)

    made, _skipped = feedback(course, [LESSON])
    page = Path(next(p for p in made if "/ann/" in p)).read_text()
    assert "<script>alert('x')" not in page and "&lt;script&gt;alert(" in page
    assert "\x1b" not in page

    export(course)
    for name in ("grades.csv", "grades-by-check.csv"):
        for row in csv.DictReader((root / name).open(newline="")):
            for value in row.values():
                assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (name, value)
    rows = csv.DictReader((root / "grades.csv").open(newline=""))
    grades = {r["student_id"]: r for r in rows if r["assignment"] == LESSON}
    assert {k: grades[HOSTILE_ID][k] for k in formula} == {k: "'" + v for k, v in formula.items()}
    assert grades["'-2+3"]["first_name"] == "'\tTab"
    assert grades["'-2+3"]["last_name"] == "'\nReturn"
    assert grades["ann"]["score"] != "" and float(grades["ann"]["score"]) > 0

    write_report(course)
    report = (root / "reports" / "mistakes.html").read_text()
    assert HOSTILE_ID not in report and escape(HOSTILE_ID) in report
    for row in csv.DictReader((root / "reports" / "mistakes.csv").open(newline="")):
        assert not any(v.startswith(("=", "+", "-", "@")) for v in row.values()), row

    path, pairs = compare(course, LESSON)
    similar = path.read_text()
    assert {(p.first, p.second) for p in pairs} == {("ann", "bob")}  # the odd id left out
    assert "<script>alert(2)" not in similar and "<img src=x" not in similar


def test_feedback_says_why_the_module_failed_to_import(released_course, tmp_path):
    """A student whose module fails to import reads the cause in their feedback (the
    exception's last line, the file and line in their code), not only that no check ran."""
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.feedback import feedback

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    cause = "embeddings.py, line 7: NameError: name 'torhc' is not defined"
    module = submit(root, "ann", {}) / "exercises" / "embeddings.py"
    module.write_text(module.read_text() + f"# IMPORT-ERROR {cause}\n")
    (outcome,) = pipeline.autograde(course, [LESSON], ["ann"], engine="threads", grader=fake_grade)
    assert outcome.recorded and outcome.points == 0
    made, _skipped = feedback(course, [LESSON])
    page = Path(next(p for p in made if "/ann/" in p)).read_text()
    assert "not run: the module failed to import: embeddings.py, line 7: NameError: name " in page
    assert "&#39;torhc&#39; is not defined" in page or "'torhc' is not defined" in page


def test_a_feedback_folder_keeps_the_html_the_module_and_what_the_exchange_needs(tmp_path):
    """What nbgrader copied from the assignment goes; the HTML, the student's lesson module and
    the submission's timestamp.txt and submission_secret.txt (nbgrader's release_feedback files
    the feedback under them) stay, but not as links (to a file of the instructor's, say)."""
    from instructor.feedback import keep_only_theirs

    own = f"exercises/{LESSON}.py"
    exchange = ["timestamp.txt", "submission_secret.txt"]
    theirs_not = [f"graders/public/test_{LESSON}.py", "gpt/model.py"]
    for name in (f"{LESSON}.html", own, *exchange, *theirs_not):
        (tmp_path / "kept" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "kept" / name).write_text("x")
    keep_only_theirs(tmp_path / "kept", own)
    names = {p.relative_to(tmp_path / "kept").as_posix() for p in (tmp_path / "kept").rglob("*")}
    assert names == {f"{LESSON}.html", "exercises", own, *exchange}

    linked = tmp_path / "linked"
    linked.mkdir()
    for name in exchange:
        (linked / name).symlink_to(tmp_path / "kept" / name)
    keep_only_theirs(linked, own)
    assert not any(linked.iterdir())
