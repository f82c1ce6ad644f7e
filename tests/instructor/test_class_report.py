"""The class report: it opens with what to re-teach, shows an import failure once
with its cause, names timeouts, leaves out lessons nobody submitted, shows the scores of
grades.csv (late penalty included, raw beside) and lists the code flagged for review.

The class is graded by the stand-in harness (tests/support/autograde_fakes.py): the test is
about the report, not the grading.

A second class (``fake_class``, built once for this file) serves the report's ranking, its
stuck students and its page in a browser, and with them the tests that use that class too:
autograde records every submission, feedback/export/report on lessons nobody submitted, and a
gradebook from another course refused."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import sys
import zipfile

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
    STUDENT_MISTAKE,
    instructor_here,
    manifest,
    released_points,
)
from support.system_packages import require  # noqa: E402

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
    from nbgrader.api import Gradebook
    from support.autograde_fakes import fake_grade, marks

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


HOSTILE = "<script>alert('x')</script> & co"


def test_what_a_student_wrote_is_escaped_wherever_the_page_shows_it():
    """A student's name, an import error's message, a flagged reason and a hint holding markup
    and ``&`` are text in the page: the template escapes every one of them."""
    from dataclasses import replace

    from instructor import class_report as cr

    manifest = _manifest()
    lesson = manifest.lesson("embeddings")
    check = replace(lesson.checks[0], hint=f"a hint with {HOSTILE}")
    stats = cr.CheckStats(check, students=2, failed=1, mistakes={"unnamed": [HOSTILE]})
    report = cr.ClassReport(
        [lesson],
        {lesson.slug: [1.0, 2.0]},
        {lesson.slug: 5.0},
        {lesson.slug: [stats]},
        [cr.Stuck(HOSTILE, lesson.slug, check.id, 2, None)],
        "",
        {HOSTILE: {lesson.slug: cr.Score(1.0, 5.0, 1.0)}, "bob": {}},
        import_failed={lesson.slug: {"dee": f"SyntaxError: {HOSTILE}"}},
        flagged=[cr.Flag("bob", lesson.slug, "nearest", "x.py", 3, HOSTILE)],
    )
    page = cr.render_html(report, manifest)
    assert "<script>" not in page and "& co" not in page
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"
    # the reteach list and the check's row (hint, who), the import failure, the flagged
    # reason, the students' table and the stuck table
    assert page.count(escaped) >= 8, page.count(escaped)
    assert f"dee</span>: SyntaxError: {escaped}" in page
    assert f"<td class='id'>{escaped}</td>" in page
    assert f"the check&#39;s hint: a hint with {escaped}" in page


@pytest.fixture(scope="module")
def fake_class(released_course, tmp_path_factory):
    """Every lesson released, embeddings submitted by four students (one of them twice, failing
    the same check both times), autograded with the stand-in harness; plus two submissions
    that cannot be graded."""
    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course

    root = tmp_path_factory.mktemp("fake-class") / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    lookup = "lookup-matches-indexing"
    released = released_points(root)
    hidden = next(c for c in manifest().lesson(LESSON).checks if c.hidden and c.id in released)
    submit(root, "ann", {})
    submit(root, "bob", {lookup: STUDENT_MISTAKE, hidden.id: None})
    (submit(root, "cy", {lookup: STUDENT_MISTAKE}) / "timestamp.txt").write_text(
        "2026-01-29 09:00:00.000000 UTC\n"
    )
    submit(root, "dee", {lookup: None, "nearest-cosine": "not-implemented"})
    submit(root, "odd id!", {})
    submit(root, "ann", {}, lesson=LESSON).rename(root / "submitted" / "ann" / "no-such")
    submit(root, "ann", {})
    jobs, problems = pipeline.find_jobs(course)
    first = pipeline.autograde(course, jobs=jobs, engine="threads", grader=fake_grade)
    # cy resubmits, still failing the same check; regrading bob's same files changes nothing.
    submit(root, "cy", {lookup: STUDENT_MISTAKE, "nearest-cosine": None})
    (root / "submitted" / "cy" / LESSON / "timestamp.txt").write_text(
        "2026-01-30 14:05:00.000000 UTC\n"
    )
    second = pipeline.autograde(
        course, [LESSON], ["cy", "bob"], engine="threads", grader=fake_grade
    )
    return {
        "course": course,
        "jobs": jobs,
        "problems": problems,
        "outcomes": first + second,
        "hidden": hidden,
        "lookup": lookup,
    }


def test_autograde_records_every_submission_and_skips_what_it_cannot_grade(fake_class):
    import nbformat

    course = fake_class["course"]
    assert sorted(fake_class["jobs"]) == [(s, LESSON) for s in ("ann", "bob", "cy", "dee")]
    problems = fake_class["problems"]
    assert len(problems) == 2, problems
    assert any("'odd id!'" in p and "letters, digits" in p for p in problems), problems
    assert any("'no-such' is no lesson" in p for p in problems), problems
    assert all("\n" not in p for p in problems)
    assert all(o.recorded and o.graded and not o.notes for o in fake_class["outcomes"])
    points = released_points(course.root)
    full = sum(points.values())
    lookup, hidden = fake_class["lookup"], fake_class["hidden"].id
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        got = {s.student.id: s.score for s in gb.find_assignment(LESSON).submissions}
        cy = gb.find_submission(LESSON, "cy")
        assert cy.timestamp is not None and cy.timestamp.year == 2026
    assert got == {
        "ann": full,
        "bob": full - points[lookup] - points[hidden],
        "cy": full - points[lookup] - points["nearest-cosine"],
        "dee": full - points[lookup] - points["nearest-cosine"],
    }
    # The autograded notebook is the released one, with the report's output in its cells.
    nb = nbformat.read(course.autograded / "cy" / LESSON / f"{LESSON}.ipynb", as_version=4)
    source = nbformat.read(course.source / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == [c.source for c in source.cells]
    shown = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert lookup in shown and "hint" in shown
    assert hidden not in shown  # a hidden check's cell shows its points only


def test_instructor_commands_handle_lessons_without_submissions(fake_class, capfd):
    """feedback, export and report on a course whose other lessons nobody submitted: each
    says so once and goes on; exports tell "not submitted" from 0, and name hidden checks."""
    course = fake_class["course"].root
    others = [lesson for lesson in fake_class["course"].lessons() if lesson != LESSON]
    assert others
    said = {}
    for command in ("feedback", "export", "report"):
        status, out, err = instructor_here(capfd, course, command)
        said[command] = out + err
        assert status == 0, said[command][-3000:]
        assert "Traceback" not in said[command]
    feedback = said["feedback"]
    assert feedback.count("no autograded submissions for") == 1
    assert all(lesson in feedback for lesson in others)
    import csv

    grades = list(csv.DictReader((course / "grades.csv").open()))
    mine = {r["student_id"]: r for r in grades if r["assignment"] == LESSON}
    assert set(mine) == {"ann", "bob", "cy", "dee"}
    assert mine["cy"]["timestamp"].startswith("2026-01-30 14:05:00")
    assert all(r["status"] == "graded" and r["score"] != "" for r in mine.values())
    missing = [r for r in grades if r["assignment"] in others]
    assert missing and all(r["status"] == "not submitted" and r["score"] == "" for r in missing)
    by_check = list(csv.DictReader((course / "grades-by-check.csv").open()))
    ids = set(released_points(course))
    graded = [r for r in by_check if r["lesson"] == LESSON]
    assert {r["check"] for r in graded} == ids  # hidden checks by their ids, not "hidden"
    hidden = fake_class["hidden"].id
    bob = next(r for r in graded if r["student_id"] == "bob" and r["check"] == hidden)
    assert bob["hidden"] == "yes" and bob["score"] == "0"
    assert all(r["score"] == "" for r in by_check if r["lesson"] in others)
    # nbgrader's own export, in the course folder (a copy of the released one: the config
    # file follows its folder), is the same export plugin.
    theirs = course / "nbgrader-export"
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "export", "--to", str(theirs / "grades.csv")],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name in ("grades.csv", "grades-by-check.csv"):
        assert (theirs / name).read_text() == (course / name).read_text(), name


def test_mistakes_report_ranks_mistakes_and_finds_stuck_students(fake_class):
    import csv

    from instructor.class_report import write_report

    course = fake_class["course"].root
    write_report(fake_class["course"])
    rows = list(csv.DictReader((course / "reports" / "mistakes.csv").open()))
    lookup = [r for r in rows if r["check"] == fake_class["lookup"]]
    # Latest submissions: bob and cy made the named mistake, dee failed without one.
    assert [r["mistake"] for r in lookup] == [STUDENT_MISTAKE, "unnamed"]
    assert [r["count"] for r in lookup] == ["2", "1"]
    assert [r["who"] for r in lookup] == ["bob cy", "dee"]  # who made each mistake
    # A stub still in place is not a mistake: listed apart, not counted as failed.
    cosine = [r for r in rows if r["check"] == "nearest-cosine"]
    assert [(r["mistake"], r["who"]) for r in cosine] == [("unnamed", "cy")]
    assert cosine[0]["failed"] == "1" and cosine[0]["not_implemented"] == "dee"
    assert lookup[0]["failed"] == "3" and lookup[0]["students"] == "4"
    assert "chapters/02-embeddings/#" in lookup[0]["link"]
    check = next(c for c in manifest().lesson(LESSON).checks if c.id == fake_class["lookup"])
    assert lookup[0]["hint"] == check.mistakes[STUDENT_MISTAKE]
    stuck = list(csv.DictReader((course / "reports" / "stuck.csv").open()))
    assert [(r["student"], r["check"], r["attempts"]) for r in stuck] == [
        ("cy", fake_class["lookup"], "2")
    ]
    html = (course / "reports" / "mistakes.html").read_text()
    assert "For instructors only" in html
    # Only the lesson anybody submitted; a row per student; who did not submit it is said.
    order = [lesson.slug for lesson in manifest().lessons]
    assert [slug for slug in order if f"<section id='{slug}'>" in html] == [LESSON]
    students = html[html.index("<section id='students'>") :]
    assert all(f"<td class='id'>{s}</td>" in students for s in ("ann", "bob", "cy", "dee"))
    assert "not submitted" in students
    assert not (course / "feedback").exists() or "For instructors only" not in "".join(
        p.read_text() for p in (course / "feedback").rglob("*.html")
    )


def test_stuck_sees_the_attempts_of_one_download(released_course, tmp_path):
    """An LMS download with two attempts of one student, both making the same mistake: the
    newest is graded into the gradebook, the older into the history, and the report says the
    student is stuck; a student who fixed it in the newer attempt is not. Autograde again and
    the attempts are not graded twice."""
    import csv

    from support.autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.collect import collect
    from instructor.course import Course
    from instructor.gradebook import HISTORY

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    lookup = "lookup-matches-indexing"
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    attempts = {
        ("eve", "2026-01-30-14-05-00"): {lookup: STUDENT_MISTAKE},
        ("eve", "2026-02-03-09-30-00"): {lookup: STUDENT_MISTAKE, "nearest-cosine": None},
        ("fay", "2026-01-30-15-00-00"): {lookup: STUDENT_MISTAKE},
        ("fay", "2026-02-03-10-00-00"): {},
    }
    for (student, when), fails in attempts.items():
        folder = submit(root, student, fails)
        with zipfile.ZipFile(archive / f"hw_{student}_attempt_{when}.zip", "w") as zf:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    zf.write(path, f"{LESSON}/{path.relative_to(folder)}")
    shutil.rmtree(root / "submitted")
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["eve", "fay"]} and not problems
    assert len(notes) == 2 and all("ignored hw_" in line for line in notes), notes
    graded = []

    def counting(lesson, files, **kwargs):
        graded.append(lesson)
        return fake_grade(lesson, files, **kwargs)

    outcomes = pipeline.autograde(course, [LESSON], engine="threads", grader=counting)
    assert all(o.recorded and not o.notes for o in outcomes), [o.notes for o in outcomes]
    assert len(graded) == 4  # two submissions, two earlier attempts
    points = released_points(root)
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        got = {s.student.id: s.score for s in gb.find_assignment(LESSON).submissions}
    full = sum(points.values())
    assert got == {"eve": full - points[lookup] - points["nearest-cosine"], "fay": full}
    write_report(course)
    stuck = list(csv.DictReader((root / "reports" / "stuck.csv").open()))
    assert [(r["student"], r["check"], r["attempts"], r["mistake"]) for r in stuck] == [
        ("eve", lookup, "2", STUDENT_MISTAKE)
    ]
    # The latest submission decides the class's numbers: fay's lookup passes now.
    rows = list(csv.DictReader((root / "reports" / "mistakes.csv").open()))
    assert [r["who"] for r in rows if r["check"] == lookup] == ["eve"]

    graded.clear()
    pipeline.autograde(course, [LESSON], engine="threads", grader=counting)
    assert len(graded) == 2  # the submissions again; the attempts are in the history already
    from sqlalchemy import create_engine, func, select

    engine = create_engine(course.db_url)
    with engine.connect() as db:
        distinct = select(func.count()).select_from(
            select(HISTORY.c.student, HISTORY.c.fingerprint).distinct().subquery()
        )
        assert db.execute(distinct).scalar() == 4
    engine.dispose()


@pytest.mark.slow  # a browser
def test_mistakes_report_renders_in_a_browser(fake_class, tmp_path):
    chromium = require("chromium")
    from playwright.sync_api import sync_playwright

    from instructor.class_report import write_report

    page_path = write_report(fake_class["course"], tmp_path)[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium),
            args=["--headless", "--no-sandbox", "--disable-gpu"],
        )
        try:
            page = browser.new_page()
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(page_path.as_uri(), wait_until="load")
            assert page.locator("#instructors-only").is_visible()
            images = page.locator("img")
            assert images.count() >= 2
            widths = images.evaluate_all("els => els.map(i => i.complete && i.naturalWidth)")
            assert all(w and w > 100 for w in widths), widths
            assert page.locator(f"#{LESSON} a[href*='chapters/02-embeddings/#']").count() >= 1
            assert page.locator("#stuck td", has_text="cy").count() == 1
            # Lessons in course order, each once.
            shown = page.locator("section[id] > h2").evaluate_all(
                "hs => hs.map(h => h.parentElement.id)"
            )
            lessons = [s for s in shown if s not in ("reteach", "flagged", "students", "stuck")]
            assert lessons == [LESSON], lessons  # the others: nobody submitted them
            # One row per student, every lesson a column.
            rows = page.locator("#students tr:has(td)")
            names = rows.evaluate_all("rs => rs.map(r => r.cells[0].textContent)")
            assert names == ["ann", "bob", "cy", "dee"], names
            widths = rows.evaluate_all("rs => rs.map(r => r.cells.length)")
            assert set(widths) == {len(lessons) + 1}, widths
            # Nothing wider than the window, on a laptop's screen and on a narrow one.
            for width in (1280, 800):
                page.set_viewport_size({"width": width, "height": 900})
                overflow = page.evaluate(
                    """() => {
                        const limit = document.documentElement.clientWidth;
                        const wide = [...document.querySelectorAll('body *')].filter(e => {
                            const box = e.getBoundingClientRect();
                            const scroller = e.closest('.scroll');
                            return box.right > limit + 1 && !(scroller && scroller !== e);
                        });
                        return {page: document.documentElement.scrollWidth - limit,
                                wide: wide.map(e => e.tagName + '#' + (e.id || ''))};
                    }"""
                )
                assert overflow["page"] <= 0 and not overflow["wide"], (width, overflow)
            page.set_viewport_size({"width": 1280, "height": 900})
            page.screenshot(path=str(tmp_path / "mistakes.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()


def test_a_gradebook_from_another_course_is_refused_in_one_line(
    fake_class, tmp_path, capsys, monkeypatch
):
    from instructor.__main__ import main
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    other = tmp_path / "other.db"
    shutil.copyfile(fake_class["course"].gradebook, other)
    db = sqlite3.connect(other)
    db.execute("UPDATE course SET id = 'ml-101' WHERE id = 'gpt-from-the-ground-up'")
    db.commit()
    db.close()
    course = str(fake_class["course"].root)
    for url, says in (
        (f"sqlite:///{other}", "belongs to another course (course 'ml-101'"),
        (f"sqlite:///{tmp_path / 'new.db'}", f"lesson {LESSON!r} is not in the gradebook"),
    ):
        status = main(["--course", course, "autograde", "--gradebook", url])
        out, err = capsys.readouterr()
        assert status == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], err
        assert "autograded" not in out  # refused before grading anything
