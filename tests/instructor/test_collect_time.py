"""A submission's time never comes from inside its zip: the student sets those
dates. It comes from the LMS's own times when a download's name holds none; a
corrected first-seen.json is the zip's time; zips with no time are counted, with their cost
under the late policy, in one line before grading."""

from __future__ import annotations

import json
import shutil
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"
DUE = datetime(2026, 2, 1, 12, 0)  # UTC, as nbgrader keeps it
DATED = (2001, 1, 1, 0, 0, 0)  # the entries' dates inside a zip: the student's to set


def _zip(path: Path, dated: tuple[int, ...], text: str = "{}") -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name in (f"{LESSON}/exercises/embeddings.py", f"{LESSON}/{LESSON}.ipynb"):
            zf.writestr(zipfile.ZipInfo(name, date_time=dated), text)


def test_a_zip_dated_back_gets_the_time_collect_first_saw_it(tmp_path):
    from instructor.collect import collect
    from instructor.course import Course

    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    _zip(archive / "ann.zip", (2001, 1, 1, 0, 0, 0))  # a late student's entries, set back
    before = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    found, problems, _notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not problems
    stamp_file = course.submitted / "ann" / LESSON / "timestamp.txt"
    first = stamp_file.read_text().strip()
    seen = datetime.strptime(first, "%Y-%m-%d %H:%M:%S.%f UTC")
    assert seen >= before, first
    # Collected again later, the same zip keeps the time it was first seen.
    collect(course, [LESSON])
    assert stamp_file.read_text().strip() == first
    # A new zip under the same name is a new submission: a time of its own, not earlier.
    _zip(archive / "ann.zip", (2001, 1, 2, 0, 0, 0))
    collect(course, [LESSON])
    assert stamp_file.read_text().strip() >= first


@pytest.fixture(scope="module")
def class_gradebook(tmp_path_factory) -> Path:
    """A roster of three on Canvas and Moodle, and the lesson due 2026-02-01 12:00 UTC."""
    from nbgrader.api import Gradebook

    from instructor.course import COURSE_ID

    path = tmp_path_factory.mktemp("class") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}", course_id=COURSE_ID) as gb:
        gb.add_student("ann", first_name="Ann", last_name="Ables", lms_user_id="12345")
        gb.add_student("bob", first_name="Bob", last_name="Baker", lms_user_id="4242")
        gb.add_student("cy", first_name="Cy", last_name="Chen")
        gb.add_assignment(LESSON, duedate=DUE)
    return path


@pytest.fixture
def late_class(tmp_path, monkeypatch, class_gradebook):
    """A course whose late policy is nbgrader's harshest (a late submission scores 0), with
    Canvas and Moodle zips downloaded after the due date."""
    from instructor.course import Course

    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(config))
    course = Course.at(tmp_path / "course")
    course.root.mkdir()
    shutil.copyfile(class_gradebook, course.gradebook)
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    _zip(archive / "ablesann_12345_67890_embeddings.zip", DATED)
    _zip(archive / "bakerbob_late_4242_67891_embeddings.zip", DATED)
    _zip(archive / "Cy Chen_901234_assignsubmission_file_embeddings.zip", DATED)
    return course


def _stamp(course, student: str) -> str:
    return (course.submitted / student / LESSON / "timestamp.txt").read_text().strip()


def test_undated_zips_downloaded_late_are_named_with_their_cost_once(late_class):
    from instructor.collect import FIRST_SEEN, collect

    found, problems, notes = collect(late_class, [LESSON])
    assert found == {LESSON: ["ann", "bob", "cy"]} and not problems
    (line,) = [n for n in notes if "no submission time" in n]
    assert line.startswith(f"warning: {LESSON}: 3 of 3 zip(s) carry no submission time"), line
    assert "3 of them after the due date, 2026-02-01 12:00:00 UTC" in line
    assert "would score 0 under the late policy (ann, bob, cy)" in line
    assert FIRST_SEEN in line and "grading worksheet" in line


def test_the_lms_times_stamp_a_late_download_and_no_penalty_follows(late_class):
    from nbgrader.api import Gradebook

    from instructor.collect import collect
    from instructor.course import COURSE_ID

    archive = late_class.downloaded / LESSON / "archive"
    # Canvas's API answer for the assignment; Moodle's grading worksheet (in UTC here).
    (archive / "submissions.json").write_text(
        json.dumps(
            [
                {"user_id": 12345, "submitted_at": "2026-02-01T11:58:07Z"},
                {"user_id": 4242, "submitted_at": "2026-02-01T12:30:00Z"},  # late indeed
            ]
        )
    )
    (archive / "Grades-GPT-embeddings-7.csv").write_text(
        'Identifier,Full name,"Last modified (submission)"\n'
        'Participant 901234,Cy Chen,"2026-02-01 10:00:00 UTC"\n'
    )
    found, problems, notes = collect(late_class, [LESSON])
    assert found == {LESSON: ["ann", "bob", "cy"]} and not problems, problems
    assert not [n for n in notes if "no submission time" in n], notes
    assert sum("the LMS's submission times of" in n for n in notes) == 2, notes
    assert _stamp(late_class, "ann") == "2026-02-01 11:58:07.000000 UTC"
    assert _stamp(late_class, "bob") == "2026-02-01 12:30:00.000000 UTC"
    assert _stamp(late_class, "cy") == "2026-02-01 10:00:00.000000 UTC"
    # What nbgrader then counts as late, from these times: bob alone, by half an hour.
    with Gradebook(f"sqlite:///{late_class.gradebook}", course_id=COURSE_ID) as gb:
        for student in ("ann", "bob", "cy"):
            gb.add_submission(LESSON, student, timestamp=_stamp(late_class, student))
        late = {s: gb.find_submission(LESSON, s).total_seconds_late for s in ("ann", "bob", "cy")}
    assert late == {"ann": 0, "bob": 1800, "cy": 0}


def test_a_corrected_first_seen_time_is_the_zips_time(late_class):
    from instructor.collect import FIRST_SEEN, attempts, collect

    collect(late_class, [LESSON])
    ledger_path = late_class.downloaded / LESSON / "archive" / FIRST_SEEN
    ledger = json.loads(ledger_path.read_text())
    (key,) = [k for k in ledger if k.startswith("ablesann_")]
    ledger[key] = "2026-02-01 11:00:00 UTC"  # the instructor's correction, in their words
    ledger_path.write_text(json.dumps(ledger))
    found, problems, notes = collect(late_class, [LESSON])
    assert found[LESSON] == ["ann", "bob", "cy"] and not problems
    assert _stamp(late_class, "ann") == "2026-02-01 11:00:00.000000 UTC"
    assert not attempts(late_class, LESSON, "ann")  # not filed as an earlier attempt of itself
    assert not [n for n in notes if "ignored" in n], notes
    (line,) = [n for n in notes if "no submission time" in n]
    assert "2 of them after the due date" in line and "(bob, cy)" in line
    ledger = json.loads(ledger_path.read_text())
    ledger[key] = "soon"
    ledger_path.write_text(json.dumps(ledger))
    _found, problems, _notes = collect(late_class, [LESSON])
    assert len(problems) == 1 and "its time in first-seen.json ('soon') is no time" in problems[0]


def test_a_resubmission_with_the_lms_time_replaces_one_stamped_when_first_seen(late_class):
    from instructor.collect import attempts, collect

    archive = late_class.downloaded / LESSON / "archive"
    collect(late_class, [LESSON])  # ann's first zip: stamped now, after the due date
    first = _stamp(late_class, "ann")
    # A second download: ann resubmitted before the due date, and the LMS's times came along.
    (archive / "ablesann_12345_67890_embeddings.zip").unlink()
    _zip(archive / "ablesann_late_12345_67999_embeddings.zip", DATED, "# resubmitted\n")
    (archive / "times.csv").write_text("student,timestamp\nann,2026-02-01T11:30:00Z\n")
    found, problems, _notes = collect(late_class, [LESSON])
    assert "ann" in found[LESSON] and not problems
    module = late_class.submitted / "ann" / LESSON / "exercises" / "embeddings.py"
    assert module.read_text() == "# resubmitted\n"
    assert _stamp(late_class, "ann") == "2026-02-01 11:30:00.000000 UTC"
    (kept,) = attempts(late_class, LESSON, "ann")  # the first zip, in the history
    assert (kept / "timestamp.txt").read_text().strip() == first
