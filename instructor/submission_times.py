"""Submission times from the LMS's own records, for downloads whose names carry none.

Canvas's and Moodle's "download all submissions" names hold no date, so :mod:`.collect` reads
the times from a file of the LMS's put beside the zips in ``downloaded/LESSON/archive/``:

- **Canvas**: the submissions of the assignment as its API lists them (``GET
  /api/v1/courses/COURSE/assignments/ASSIGNMENT/submissions?per_page=100``, saved as a
  ``.json`` file): ``user_id`` and ``submitted_at`` of each.
- **Moodle**: the assignment's grading worksheet (View all submissions, Grading action
  "Download grading worksheet", a ``.csv``): ``Identifier`` (``Participant N``, the number in
  the download names), ``Full name`` and ``Last modified (submission)``. Moodle writes that time
  without a zone, in the downloading user's: it is read in this machine's zone.
- **Anything else**: a ``.csv`` with the columns ``student`` (the roster's id) and
  ``timestamp`` (ISO 8601; with no zone, this machine's).

Each row names a student as a download name would (:class:`Reported`), so the roster
resolves both alike.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

STAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt
SUFFIXES = (".csv", ".json")  # the files of archive/ read as submission times
_PARTICIPANT = re.compile(r"(\d+)\s*$")


class UnreadableTimes(Exception):
    """A file of submission times that cannot be read; the message says why and what to do."""


@dataclass(frozen=True)
class Reported:
    """One student's submission time as the LMS recorded it: who, in a download name's terms
    (``student_id``, or ``lms_id`` and ``name``), and when (nbgrader's format, in UTC)."""

    who: dict[str, str]
    stamp: str
    row: int


def utc_stamp(text: str) -> str:
    """A time as nbgrader's timestamp.txt holds it, in UTC; a time without a zone is this
    machine's. Raises ValueError for text that is no time."""
    import importlib

    # python-dateutil, which nbgrader needs too: it reads Moodle's written-out dates as well as
    # ISO 8601. Imported by name, as it ships without type information.
    parser: Any = importlib.import_module("dateutil.parser")
    try:
        moment = parser.parse(text)
    except (OverflowError, ValueError) as error:
        raise ValueError(str(error)) from None
    return moment.astimezone(UTC).replace(tzinfo=None).strftime(STAMP)


def read_times(path: Path) -> list[Reported]:
    """Every submission time a Canvas submissions JSON, a Moodle grading worksheet or a
    ``student,timestamp`` CSV holds (rows without a submission left out)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableTimes(f"cannot be read ({error}): download it again") from None
    if path.suffix.lower() == ".json":
        return _canvas(text)
    return _csv(text)


def _canvas(text: str) -> list[Reported]:
    try:
        data: Any = json.loads(text)
    except ValueError as error:
        raise UnreadableTimes(f"is no JSON ({error}): save the API's answer as it is") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise UnreadableTimes(
            "is not Canvas's list of submissions: save the answer of GET /api/v1/courses/"
            "COURSE/assignments/ASSIGNMENT/submissions (a JSON list)"
        )
    found = []
    for row, item in enumerate(data, 1):
        user, when = item.get("user_id"), item.get("submitted_at")
        if user is None or not when:
            continue  # not submitted
        found.append(Reported({"lms_id": str(user)}, _stamp(str(when), row), row))
    return found


MOODLE_TIME = "Last modified (submission)"


def _csv(text: str) -> list[Reported]:
    rows = list(csv.DictReader(io.StringIO(text)))
    columns = {name.strip().lower(): name for name in (rows[0].keys() if rows else [])}
    if "identifier" in columns and MOODLE_TIME.lower() in columns:
        ident, name, when = (
            columns["identifier"],
            columns.get("full name"),
            columns[MOODLE_TIME.lower()],
        )
        found = []
        for row, item in enumerate(rows, 2):
            stamp = (item.get(when) or "").strip()
            participant = _PARTICIPANT.search(item.get(ident) or "")
            if not participant or stamp in ("", "-"):
                continue  # not submitted
            who = {"lms_id": participant.group(1)}
            if name and (item.get(name) or "").strip():
                who["name"] = item[name].strip()
            found.append(Reported(who, _stamp(stamp, row), row))
        return found
    if "student" in columns and "timestamp" in columns:
        student, when = columns["student"], columns["timestamp"]
        return [
            Reported({"student_id": item[student].strip()}, _stamp(item[when] or "", row), row)
            for row, item in enumerate(rows, 2)
            if (item.get(student) or "").strip() and (item.get(when) or "").strip()
        ]
    raise UnreadableTimes(
        "is neither a Moodle grading worksheet (Identifier, Last modified (submission)) nor a "
        "CSV with the columns student,timestamp: give it one of those shapes"
    )


def _stamp(text: str, row: int) -> str:
    try:
        return utc_stamp(text)
    except ValueError:
        raise UnreadableTimes(
            f"row {row}: {text.strip()[:40]!r} is no time: correct it (ISO 8601, e.g. "
            "2026-02-01T11:58:00Z)"
        ) from None
