"""``collect``: submissions as zips (one per student, from an LMS) into ``submitted/``.

Put the zips in ``build/nbgrader/downloaded/LESSON/archive/``, one per student, named
``STUDENT.zip`` or LMS-style ``anything_STUDENT_attempt_DATE.zip`` (the student id: letters,
digits and ``. _ @ -``). Each holds the lesson's folder as released (``LESSON.ipynb`` and
``exercises/``), at its top level or inside one folder. Only the notebook and the
``exercises/`` package are kept; the rest of a submission is left out (autograde restores it
from source/ anyway). The submission's time (nbgrader's ``timestamp.txt``) is the attempt's
date in an LMS-style name (``..._attempt_2026-01-30-14-05-00.zip``), else the time collect first
saw that zip (recorded in ``archive/first-seen.json``): never a date inside the zip, which the
student sets.

A zip that cannot be collected (unreadable, no student id in its name, nothing of the lesson
inside, too big) is skipped with one line saying why; the others are collected. Plain
``nbgrader zip_collect`` works too, with :class:`SubmissionCollector`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from nbgrader.plugins import FileNameCollectorPlugin

from core.atomic import atomic_write_bytes

from .course import Course

_STUDENT = re.compile(r"^[A-Za-z0-9][\w.@-]{0,127}$")
_ATTEMPT = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[-T_ ](\d\d)[-:](\d\d)(?:[-:](\d\d))?)?")
MAX_UNPACKED = 64 << 20  # bytes: a lesson folder is a few hundred KiB
STAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt


def student_of(archive: str) -> str | None:
    """``ann`` for ``ann`` (from ann.zip) and for ``hw1_ann_attempt_2026-01-30`` (LMS style)."""
    if "_attempt_" in archive:
        archive = archive.split("_attempt_")[0].rsplit("_", 1)[-1]
    return archive if _STUDENT.match(archive) else None


def file_id(files: list[str]) -> str | None:
    """Where a file of a submission goes, from its path inside the zip (after the student's
    folder): ``LESSON.ipynb`` or ``exercises/...py``; None for anything else."""
    files = list(files)
    # Accept the lesson's folder at the top of the zip (LESSON/...) as well.
    while len(files) > 1 and files[0] != "exercises" and not files[0].endswith(".ipynb"):
        files = files[1:]
    if not files or any(part in ("", ".", "..") for part in files):
        return None
    rel = "/".join(files)
    wanted = (len(files) == 1 and rel.endswith(".ipynb")) or (
        files[0] == "exercises" and rel.endswith(".py") and "__pycache__" not in files
    )
    return rel if wanted else None


class SubmissionCollector(FileNameCollectorPlugin):
    """For ``nbgrader zip_collect``: student id from the archive's name; file id = path inside
    the lesson folder."""

    def collect(self, submitted_file: str) -> dict | None:
        parts = PurePosixPath(submitted_file.replace("\\", "/")).parts
        try:
            at = len(parts) - 1 - parts[::-1].index("extracted")
        except ValueError:
            return None
        inside = list(parts[at + 1 :])
        if len(inside) < 2:
            return None
        student = student_of(inside[0])
        if student is None:
            self.log.warning("Skipped %s: no student id in the archive name", submitted_file)
            return None
        rel = file_id(inside[1:])
        return {"student_id": student, "file_id": rel} if rel else None


class Unusable(Exception):
    """A zip that cannot be collected; the message says why and what to do."""


FIRST_SEEN = "first-seen.json"  # in archive/: zip name and content hash -> when collect saw it


def _timestamp(name: str, first_seen: str) -> str:
    if "_attempt_" in name:
        match = _ATTEMPT.search(name.split("_attempt_", 1)[1])
        if match:
            year, month, day, hour, minute, second = (int(p) if p else 0 for p in match.groups())
            try:
                return datetime(year, month, day, hour, minute, second).strftime(STAMP)
            except ValueError:
                pass
    return first_seen


def _first_seen(path: Path, ledger: dict[str, str]) -> str:
    """When collect first saw this zip (its name and content): now, the first time."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = f"{path.name} {digest}"
    if key not in ledger:
        ledger[key] = datetime.now(UTC).strftime(STAMP)
    return ledger[key]


def unpack(path: Path, lesson: str, submitted: Path, first_seen: str = "") -> str:
    """Collect one zip into submitted/STUDENT/LESSON/; returns the student id. ``first_seen``:
    the submission time when the zip's name carries none."""
    name = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else None
    if name is None:
        raise Unusable("not a .zip file (download the students' submissions as zips)")
    student = student_of(name)
    if student is None:
        raise Unusable(
            "no student id in the name: name it STUDENT.zip (or the LMS's "
            "NAME_STUDENT_attempt_DATE.zip) with letters, digits and . _ @ - only"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            if sum(info.file_size for info in members) > MAX_UNPACKED:
                raise Unusable(f"unpacks to more than {MAX_UNPACKED >> 20} MiB")
            wanted = {}
            for info in members:
                parts = PurePosixPath(info.filename.replace("\\", "/")).parts
                rel = file_id(list(parts))
                if rel is not None and not _is_link(info):
                    wanted[rel] = info
            if f"{lesson}.ipynb" not in wanted and not any(
                r.startswith("exercises/") for r in wanted
            ):
                raise Unusable(
                    f"holds neither {lesson}.ipynb nor exercises/ (zip the lesson's folder "
                    "as released)"
                )
            staging = submitted / student / f".{lesson}.collecting"
            if staging.exists():
                shutil.rmtree(staging)
            for rel, info in sorted(wanted.items()):
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(archive.read(info))
            stamp = _timestamp(name, first_seen)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as error:
        detail = str(error).strip().splitlines()
        raise Unusable(
            f"not a readable zip ({detail[0] if detail else type(error).__name__}): download "
            "it again from the LMS"
        ) from None
    staging.mkdir(parents=True, exist_ok=True)
    if stamp:
        (staging / "timestamp.txt").write_text(stamp + "\n")
    dest = submitted / student / lesson
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(staging, dest)
    return student


def _is_link(info: zipfile.ZipInfo) -> bool:
    return (info.external_attr >> 16) & 0o170000 == 0o120000


def collect(course: Course, lessons: list[str] | None = None) -> tuple[dict, list[str]]:
    """Collect every zip in downloaded/LESSON/archive/; returns the students found per lesson
    and one line per zip that was skipped."""
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    for lesson in lessons or course.lessons():
        archive = course.downloaded / lesson / "archive"
        if not archive.is_dir():
            continue
        students = []
        ledger_path = archive / FIRST_SEEN
        try:
            ledger = json.loads(ledger_path.read_text())
        except (OSError, ValueError):
            ledger = {}
        for path in sorted(p for p in archive.iterdir() if p.is_file() and p != ledger_path):
            try:
                seen = _first_seen(path, ledger)
                students.append(unpack(path, lesson, course.submitted, seen))
            except Unusable as error:
                problems.append(f"skipped {path.relative_to(course.root)}: {error}")
        atomic_write_bytes(ledger_path, json.dumps(ledger, indent=1, sort_keys=True).encode())
        found[lesson] = students
    return found, problems
