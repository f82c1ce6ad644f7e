"""Download names: Blackboard's, Canvas's and Moodle's are recognised, and a pattern
of one's own in nbgrader_config.py (Canvas's late marker, Moodle's group
submissions, Blackboard's attempt files and receipts); a student not on the roster is listed,
never created; the zips whose names hold no date are counted in one line per lesson;
the collector maps the files of a zip to students and skips unusable zips in one line each."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.instructor_commands import ROOT  # noqa: E402

LESSON = "embeddings"


def _zip(path: Path, text: str = "# mine\n") -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{LESSON}/exercises/embeddings.py", text)
        zf.writestr(f"{LESSON}/{LESSON}.ipynb", "{}")


@pytest.fixture(scope="module")
def roster_gradebook(tmp_path_factory) -> Path:
    """A gradebook holding a roster of four (made once: nbgrader takes seconds to make one).
    Canvas and Moodle name students by their LMS user id and name."""
    from nbgrader.api import Gradebook

    from instructor.course import COURSE_ID

    path = tmp_path_factory.mktemp("roster") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}", course_id=COURSE_ID) as gb:
        gb.add_student("ann", first_name="Ann", last_name="Ables", lms_user_id="12345")
        gb.add_student("bob", first_name="Bob", last_name="Baker")
        gb.add_student("cy", first_name="Cy", last_name="Chen", lms_user_id="777")
        gb.add_student("dee")
    return path


@pytest.fixture
def course(tmp_path, monkeypatch, roster_gradebook):
    """A course with that roster and no nbgrader settings of the instructor's."""
    from instructor.course import Course

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "jupyter"))
    course = Course.at(tmp_path / "course")
    course.root.mkdir()
    shutil.copyfile(roster_gradebook, course.gradebook)
    (course.downloaded / LESSON / "archive").mkdir(parents=True)
    return course


def test_lms_download_names_are_read_and_strangers_listed(course):
    from instructor.collect import FIRST_SEEN, collect

    archive = course.downloaded / LESSON / "archive"
    # The names as each LMS's "download all" writes them.
    _zip(archive / "ablesann_12345_67890_embeddings.zip")  # Canvas: by LMS user id
    _zip(archive / "bakerbob_late_4242_67891_embeddings-1.zip")  # Canvas, late: by name
    # Moodle, a group submission: GROUP-Full Name, and a participant number of its own.
    _zip(archive / "Team Rocket-Cy Chen_901234_assignsubmission_file_embeddings.zip")
    # Blackboard: the attempt's file, and the receipt it puts beside it.
    _zip(archive / "hw2_dee_attempt_2026-02-03-09-30-00_embeddings.zip")
    (archive / "hw2_dee_attempt_2026-02-03-09-30-00.txt").write_text("Date Submitted: ...\n")
    _zip(archive / "eve.zip")  # not on the roster
    _zip(archive / "zedzoe_55555_67892_embeddings.zip")  # Canvas, not on the roster
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann", "bob", "cy", "dee"]}, (problems, notes)
    assert sorted(p.name for p in course.submitted.iterdir()) == ["ann", "bob", "cy", "dee"]
    by_zip = {p.split(":")[0].rsplit("/", 1)[-1]: p for p in problems}
    assert set(by_zip) == {"eve.zip", "zedzoe_55555_67892_embeddings.zip"}, problems
    assert "eve is not on the roster" in by_zip["eve.zip"]
    assert "nbgrader db student add eve" in by_zip["eve.zip"]
    canvas = by_zip["zedzoe_55555_67892_embeddings.zip"]
    assert "Canvas" in canvas and "'zedzoe'" in canvas and "no student on the roster" in canvas
    assert "--lms-user-id 55555" in canvas
    # The three names without a date: one line for the lesson, before anything is graded;
    # with no due date it costs nothing.
    (line,) = [n for n in notes if "carry no submission time" in n]
    assert line.startswith(f"note: {LESSON}: 3 of 4 zip(s)") and FIRST_SEEN in line, notes
    assert "no due date" in line
    dee = (course.submitted / "dee" / LESSON / "timestamp.txt").read_text()
    assert dee.startswith("2026-02-03 09:30:00")
    # Collected again: the same times, the same one line.
    stamps = {
        s: (course.submitted / s / LESSON / "timestamp.txt").read_text() for s in found[LESSON]
    }
    _, _, again = collect(course, [LESSON])
    assert [n for n in again if "carry no submission time" in n] == [line]
    assert stamps == {
        s: (course.submitted / s / LESSON / "timestamp.txt").read_text() for s in found[LESSON]
    }


def test_a_pattern_of_ones_own_in_nbgrader_config(course, tmp_path):
    from instructor.collect import collect
    from instructor.errors import SetupError

    config = tmp_path / "jupyter" / "nbgrader_config.py"
    config.parent.mkdir()
    config.write_text(
        "c.SubmissionCollector.named_regexp = "
        r"r'^(?P<student_id>\w+)-hw2-(?P<timestamp>\d{4}-\d\d-\d\d)$'" + "\n"
    )
    _zip(course.downloaded / LESSON / "archive" / "ann-hw2-2026-02-01.zip")
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not problems and not notes
    stamp = (course.submitted / "ann" / LESSON / "timestamp.txt").read_text()
    assert stamp.startswith("2026-02-01 00:00:00")
    config.write_text("c.SubmissionCollector.named_regexp = r'^(?P<who>\\w+)$'\n")
    with pytest.raises(SetupError, match=r"names no student.*\(\?P<student_id>"):
        collect(course, [LESSON])


def test_without_a_roster_every_named_student_is_collected(tmp_path, monkeypatch):
    from instructor.collect import collect
    from instructor.course import Course

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter"))
    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    _zip(archive / "eve.zip")
    _zip(archive / "ablesann_12345_67890_embeddings.zip")  # Canvas needs the roster
    found, problems, _notes = collect(course, [LESSON])
    assert found == {LESSON: ["eve"]}
    assert len(problems) == 1 and "no student on the roster" in problems[0]
    assert not course.gradebook.exists()  # reading the roster created no gradebook


def test_nbgrader_zip_collect_reads_the_same_names(course, monkeypatch):
    from instructor.collect import SubmissionCollector

    monkeypatch.chdir(course.root)
    collect = SubmissionCollector().collect
    base = f"{course.downloaded}/{LESSON}/extracted"
    canvas = collect(f"{base}/ablesann_12345_67890_embeddings/exercises/embeddings.py")
    assert canvas == {"student_id": "ann", "file_id": "exercises/embeddings.py"}
    moodle = collect(f"{base}/Cy Chen_777_assignsubmission_file_x/{LESSON}.ipynb")
    assert moodle == {"student_id": "cy", "file_id": f"{LESSON}.ipynb"}
    assert collect(f"{base}/eve/exercises/embeddings.py") is None  # not on the roster


def test_collector_maps_zip_files_to_students():
    from instructor.collect import SubmissionCollector

    collect = SubmissionCollector().collect
    base = "/c/downloaded/embeddings/extracted"
    assert collect(f"{base}/ann/embeddings/exercises/embeddings.py") == {
        "student_id": "ann",
        "file_id": "exercises/embeddings.py",
    }
    assert collect(f"{base}/ann/embeddings.ipynb") == {
        "student_id": "ann",
        "file_id": "embeddings.ipynb",
    }
    lms = collect(f"{base}/hw_ben_attempt_2026-01-01/exercises/embeddings.py")
    assert lms["student_id"] == "ben"
    assert collect(f"{base}/ann/embeddings/graders/runner.py") is None
    assert collect(f"{base}/ann/notes.txt") is None


def test_collect_skips_unusable_zips_in_one_line_each(tmp_path):
    from instructor.collect import collect
    from instructor.course import Course

    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    module = (ROOT / "exercises" / "embeddings.py").read_text()

    def make(name: str, top: str = f"{LESSON}/") -> None:
        with zipfile.ZipFile(archive / name, "w") as zf:
            zf.writestr(f"{top}exercises/embeddings.py", module)
            zf.writestr(f"{top}{LESSON}.ipynb", "{}")
            zf.writestr(f"{top}graders/runner.py", "print('not kept')")

    make("ann.zip")
    make("hw2_bob_attempt_2026-02-03-09-30-00.zip", top="")
    make("odd name!.zip")
    (archive / "cy.zip").write_bytes(b"PK\x03\x04 truncated")
    with zipfile.ZipFile(archive / "dee.zip", "w") as zf:
        zf.writestr("notes.txt", "my homework")
    found, problems, _notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann", "bob"]}
    assert len(problems) == 3, problems
    by_zip = {p.split(":")[0]: p for p in problems}
    assert "not a readable zip" in by_zip[f"skipped downloaded/{LESSON}/archive/cy.zip"]
    assert "no student id" in by_zip[f"skipped downloaded/{LESSON}/archive/odd name!.zip"]
    assert "holds neither" in by_zip[f"skipped downloaded/{LESSON}/archive/dee.zip"]
    bob = course.submitted / "bob" / LESSON
    assert (bob / "exercises" / "embeddings.py").read_text() == module
    assert not (bob / "graders").exists()
    assert (bob / "timestamp.txt").read_text().startswith("2026-02-03 09:30:00")
    assert (course.submitted / "ann" / LESSON / "timestamp.txt").is_file()


def test_students_autograde_added_are_no_roster(course, tmp_path, monkeypatch):
    """A course without a roster: the students autograde added to the gradebook (an id and
    nothing else) do not make one, so a newcomer's zip is still collected; where a roster
    exists, a student graded before stays collectable and a stranger is refused."""
    from nbgrader.api import Gradebook

    from instructor import gradings
    from instructor.collect import collect
    from instructor.course import COURSE_ID, Course

    bare = Course.at(tmp_path / "bare")
    (bare.downloaded / LESSON / "archive").mkdir(parents=True)
    with Gradebook(f"sqlite:///{bare.gradebook}", course_id=COURSE_ID) as gb:
        gb.add_student("ann")  # as autograde adds a student it grades
    gradings.graded(bare.root, "ann", LESSON, "f" * 64, None, 1, "g")
    for who in ("ann", "newcomer"):
        _zip(bare.downloaded / LESSON / "archive" / f"{who}.zip")
    found, problems, _notes = collect(bare, [LESSON])
    assert found == {LESSON: ["ann", "newcomer"]} and not problems, problems
    # With a roster (the module's four), ann graded before and added bare: still collected.
    with Gradebook(course.db_url, course_id=COURSE_ID) as gb:
        gb.add_student("zed")
    gradings.graded(course.root, "zed", LESSON, "f" * 64, None, 1, "g")
    for who in ("zed", "eve"):
        _zip(course.downloaded / LESSON / "archive" / f"{who}.zip")
    found, problems, _notes = collect(course, [LESSON])
    assert found == {LESSON: ["zed"]}
    assert len(problems) == 1 and "eve is not on the roster" in problems[0]


def test_the_zip_a_student_makes_is_collected(course, tmp_path):
    """What `python -m graders LESSON --zip` writes (graders/submission.py) is what collect
    takes: the module and the notebook, nothing else in the zip."""
    from graders.submission import make_submission
    from instructor.collect import collect

    folder = tmp_path / "lesson"
    (folder / "exercises").mkdir(parents=True)
    (folder / "exercises" / "embeddings.py").write_text("# ann's lookup\n")
    (folder / f"{LESSON}.ipynb").write_text("{}")
    made = make_submission(LESSON, folder)
    shutil.copyfile(made, course.downloaded / LESSON / "archive" / "ann.zip")
    found, problems, _ = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not problems
    got = course.submitted / "ann" / LESSON
    assert (got / "exercises" / "embeddings.py").read_text() == "# ann's lookup\n"
    assert (got / f"{LESSON}.ipynb").is_file()


def test_the_summary_counts_the_skipped_zips(course, capsys):
    """Each lesson's summary line counts its zips that were skipped, beside the submissions
    collected, a lesson whose every zip was skipped included."""
    from instructor.__main__ import collect_lessons

    archive = course.downloaded / LESSON / "archive"
    _zip(archive / "ablesann_12345_67890_embeddings.zip")
    _zip(archive / "eve.zip")  # not on the roster
    (archive / "bakerbob_4242_67891_embeddings.zip").write_text("not a zip")
    other = course.downloaded / "attention" / "archive"
    other.mkdir(parents=True)
    (other / "cy.zip").write_text("not a zip either")
    assert collect_lessons(course, [LESSON, "attention"])  # something was skipped
    said = capsys.readouterr()
    assert len(said.err.splitlines()) == 3, said.err  # one line per skipped zip
    assert f"collected {LESSON}: 1 submission(s), 2 file(s) skipped" in said.out, said.out
    assert "collected attention: 0 submission(s), 1 file(s) skipped" in said.out, said.out
