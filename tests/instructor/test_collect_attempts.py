"""Several attempts of one student: collect keeps the newest as the submission,
never lets an older zip replace a newer one, says so in one line, and keeps the older attempts
for the class report's history."""

from __future__ import annotations

import zipfile
from pathlib import Path

from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

LESSON = "embeddings"
MODULE = f"{LESSON}/exercises/embeddings.py"


def _zip(path: Path, text: str) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(MODULE, text)
        zf.writestr(f"{LESSON}/{LESSON}.ipynb", "{}")


def _lms(archive: Path, when: str, text: str) -> Path:
    path = archive / f"hw2_ann_attempt_{when}.zip"
    _zip(path, text)
    return path


def _submitted(course) -> tuple[str, str]:
    folder = course.submitted / "ann" / LESSON
    return (
        (folder / "exercises" / "embeddings.py").read_text(),
        (folder / "timestamp.txt").read_text().strip(),
    )


def _attempts(course) -> list[tuple[str, str]]:
    from instructor.collect import attempts

    return [
        (
            (folder / "exercises" / "embeddings.py").read_text(),
            (folder / "timestamp.txt").read_text().strip(),
        )
        for folder in attempts(course, LESSON, "ann")
    ]


def test_collect_keeps_the_newest_attempt_and_says_which_it_ignored(tmp_path):
    from instructor.collect import collect
    from instructor.course import Course

    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    # One download, two attempts; the newer sorts first by name, the older last.
    _lms(archive, "2026-02-03-09-30-00", "# second\n")
    _lms(archive, "2026-01-30-14-05-00", "# first\n").rename(
        archive / "zz_ann_attempt_2026-01-30-14-05-00.zip"
    )
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not problems
    assert _submitted(course) == ("# second\n", "2026-02-03 09:30:00.000000 UTC")
    assert len(notes) == 1, notes
    assert notes[0].startswith("ann/embeddings: kept hw2_ann_attempt_2026-02-03-09-30-00.zip")
    assert "ignored zz_ann_attempt_2026-01-30-14-05-00.zip (2026-01-30 14:05:00 UTC)" in notes[0]
    assert "as older" in notes[0]
    assert _attempts(course) == [("# first\n", "2026-01-30 14:05:00.000000 UTC")]

    # A later download holds an older zip only: the newer submission stays, and one line says why.
    for path in archive.glob("*.zip"):
        path.unlink()
    _lms(archive, "2026-01-15-08-00-00", "# zeroth\n")
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not problems
    assert _submitted(course) == ("# second\n", "2026-02-03 09:30:00.000000 UTC")
    assert len(notes) == 1
    assert "kept submitted/ann/embeddings/ (2026-02-03 09:30:00 UTC)" in notes[0]
    assert "newer; ignored hw2_ann_attempt_2026-01-15-08-00-00.zip" in notes[0], notes
    assert [text for text, _ in _attempts(course)] == ["# zeroth\n", "# first\n"]

    # A newer zip replaces the submission; the one it replaces stays as an attempt.
    for path in archive.glob("*.zip"):
        path.unlink()
    _lms(archive, "2026-02-05-10-00-00", "# third\n")
    found, problems, notes = collect(course, [LESSON])
    assert not notes and not problems  # nothing of this download was ignored
    assert _submitted(course) == ("# third\n", "2026-02-05 10:00:00.000000 UTC")
    assert [text for text, _ in _attempts(course)] == ["# zeroth\n", "# first\n", "# second\n"]
    # Collecting the same download again changes nothing.
    collect(course, [LESSON])
    assert _submitted(course)[0] == "# third\n" and len(_attempts(course)) == 3


def test_an_unreadable_newest_attempt_leaves_the_older_one_as_the_submission(tmp_path):
    from instructor.collect import collect
    from instructor.course import Course

    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    _lms(archive, "2026-01-30-14-05-00", "# first\n")
    (archive / "hw2_ann_attempt_2026-02-03-09-30-00.zip").write_bytes(b"PK\x03\x04 truncated")
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann"]} and not notes
    assert len(problems) == 1 and "2026-02-03-09-30-00.zip: not a readable zip" in problems[0]
    assert _submitted(course)[0] == "# first\n"
