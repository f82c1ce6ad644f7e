"""A submission's time never comes from inside its zip: the student sets those dates."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"


def _zip(path: Path, dated: tuple[int, ...]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name in (f"{LESSON}/exercises/embeddings.py", f"{LESSON}/{LESSON}.ipynb"):
            zf.writestr(zipfile.ZipInfo(name, date_time=dated), "{}")


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
