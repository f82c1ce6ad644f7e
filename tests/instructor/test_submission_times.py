"""The LMS's own submission times: a Canvas submissions JSON, a Moodle grading
worksheet and a plain student,timestamp CSV are read into UTC times and the students they name;
a file of another shape, or a row that holds no time, is refused in one line saying what to do."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def utc_machine() -> Iterator[None]:
    """This machine in UTC: Moodle writes times in the downloading user's zone, read as this
    machine's."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_canvas_submissions_json(tmp_path):
    from instructor.submission_times import Reported, read_times

    path = tmp_path / "submissions.json"
    path.write_text(
        json.dumps(
            [  # the fields of Canvas's Submission object this reads, as its API answers
                {"user_id": 12345, "submitted_at": "2026-02-01T11:58:07Z", "late": False},
                {"user_id": 4242, "submitted_at": "2026-02-01T13:10:00+01:00", "late": False},
                {"user_id": 9, "submitted_at": None, "workflow_state": "unsubmitted"},
            ]
        )
    )
    assert read_times(path) == [
        Reported({"lms_id": "12345"}, "2026-02-01 11:58:07.000000 UTC", 1),
        Reported({"lms_id": "4242"}, "2026-02-01 12:10:00.000000 UTC", 2),
    ]


def test_moodle_grading_worksheet(tmp_path, utc_machine):
    from instructor.submission_times import read_times

    path = tmp_path / "Grades-GPT-Lesson 3-17.csv"
    path.write_text(
        "\ufeffIdentifier,Full name,Email address,Status,Grade,Maximum Grade,"
        '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
        '"Feedback comments"\n'
        'Participant 901234,Cy Chen,cy@example.org,"Submitted for grading",,100.00,Yes,'
        '"Sunday, 1 February 2026, 11:58 AM",-,\n'
        'Participant 901235,Dee Dent,dee@example.org,"No submission",,100.00,Yes,-,-,\n',
        encoding="utf-8",
    )
    (found,) = read_times(path)
    assert found.who == {"lms_id": "901234", "name": "Cy Chen"}
    assert found.stamp == "2026-02-01 11:58:00.000000 UTC"


def test_plain_csv_and_refusals(tmp_path):
    from instructor.submission_times import UnreadableTimes, read_times

    path = tmp_path / "times.csv"
    path.write_text("student,timestamp\nann,2026-02-01 11:00:00 UTC\nbob,\n")
    (found,) = read_times(path)
    assert (found.who, found.stamp) == ({"student_id": "ann"}, "2026-02-01 11:00:00.000000 UTC")
    path.write_text("student,timestamp\nann,last tuesday-ish\n")
    with pytest.raises(UnreadableTimes, match=r"row 2: 'last tuesday-ish' is no time"):
        read_times(path)
    path.write_text("name,when\nann,2026-02-01\n")
    with pytest.raises(UnreadableTimes, match="student,timestamp"):
        read_times(path)
    other = Path(tmp_path / "x.json")
    other.write_text('{"user_id": 1}')
    with pytest.raises(UnreadableTimes, match="Canvas's list of submissions"):
        read_times(other)
