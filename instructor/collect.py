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

A download can hold several attempts of one student (``hw1_ann_attempt_DATE.zip`` twice), and
a later download can hold an older zip than the one collected before. The newest attempt by
that time is the submission, in ``submitted/``; an older one never replaces it, and one line
per student says which was kept and which ignored. The older attempts (and a submission a
newer one replaced) are kept in ``downloaded/LESSON/attempts/STUDENT/TIME/``: autograde grades
them into the per-check history only, so the class report sees every attempt (who is stuck),
while the gradebook holds the newest.

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
ATTEMPTS = "attempts"  # downloaded/LESSON/attempts/STUDENT/TIME/: the earlier attempts


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


def _stamp_of(path: Path, first_seen: str) -> tuple[str, str]:
    """(student, submission time) of a zip, from its name (and the first-seen ledger)."""
    name = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else None
    if name is None:
        raise Unusable("not a .zip file (download the students' submissions as zips)")
    student = student_of(name)
    if student is None:
        raise Unusable(
            "no student id in the name: name it STUDENT.zip (or the LMS's "
            "NAME_STUDENT_attempt_DATE.zip) with letters, digits and . _ @ - only"
        )
    return student, _timestamp(name, first_seen)


def unpack(path: Path, lesson: str, dest: Path, stamp: str) -> None:
    """Unpack one zip's lesson files into ``dest`` (replaced whole, through a staging folder
    beside it), with ``stamp`` as its timestamp.txt."""
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
            staging = dest.with_name(f".{dest.name}.collecting")
            if staging.exists():
                shutil.rmtree(staging)
            for rel, info in sorted(wanted.items()):
                target = staging / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(info))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as error:
        detail = str(error).strip().splitlines()
        raise Unusable(
            f"not a readable zip ({detail[0] if detail else type(error).__name__}): download "
            "it again from the LMS"
        ) from None
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "timestamp.txt").write_text(stamp + "\n")
    _replace(staging, dest)


def _replace(new: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(new, dest)


def _is_link(info: zipfile.ZipInfo) -> bool:
    return (info.external_attr >> 16) & 0o170000 == 0o120000


def when(stamp: str | None) -> datetime | None:
    """A timestamp.txt's time (nbgrader's format, or any it reads), None if unreadable."""
    if not stamp:
        return None
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(stamp.strip()).replace(tzinfo=None)
    except Exception:  # noqa: BLE001 - an unreadable timestamp is no timestamp
        return None


def read_stamp(folder: Path) -> str | None:
    try:
        return (folder / "timestamp.txt").read_text().strip() or None
    except OSError:
        return None


def attempt_folder(course: Course, lesson: str, student: str, stamp: str) -> Path:
    """Where an earlier attempt is kept: downloaded/LESSON/attempts/STUDENT/TIME/."""
    moment = when(stamp) or datetime.min
    return course.downloaded / lesson / ATTEMPTS / student / moment.strftime("%Y%m%dT%H%M%S%f")


def attempts(course: Course, lesson: str, student: str) -> list[Path]:
    """A student's earlier attempts at a lesson that collect kept, oldest first."""
    folder = course.downloaded / lesson / ATTEMPTS / student
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _shown(stamp: str) -> str:
    moment = when(stamp)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else stamp


def _collect_student(
    course: Course, lesson: str, student: str, zips: list[tuple[Path, str]]
) -> tuple[bool, list[str], list[str]]:
    """Collect one student's zips of a lesson: the newest into submitted/, the others (and a
    submission they replace) kept as earlier attempts. Returns whether submitted/ holds one,
    the skip lines and the line saying which attempt was kept and which ignored."""
    dest = course.submitted / student / lesson
    problems, usable = [], []
    newest_first = sorted(zips, key=lambda z: (when(z[1]) or datetime.min, z[0].name), reverse=True)
    current = read_stamp(dest) if dest.is_dir() else None
    kept: str | None = None  # what submitted/ holds, in words
    older: list[str] = []
    for path, stamp in newest_first:
        rel = path.relative_to(course.root)
        newer_there = kept is not None or (
            current is not None and (when(current) or datetime.min) > (when(stamp) or datetime.min)
        )
        try:
            if newer_there:
                unpack(path, lesson, attempt_folder(course, lesson, student, stamp), stamp)
                older.append(f"{path.name} ({_shown(stamp)})")
            else:
                if current is not None and when(current) not in (None, when(stamp)):
                    # The submission this one replaces stays in the history as an attempt.
                    earlier = attempt_folder(course, lesson, student, current)
                    if earlier.exists():
                        shutil.rmtree(earlier)
                    earlier.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copytree(dest, earlier)
                unpack(path, lesson, dest, stamp)
                kept = f"{path.name} ({_shown(stamp)}), the newest"
            usable.append(path)
        except Unusable as error:
            problems.append(f"skipped {rel}: {error}")
    if kept is None and current is not None and older:
        kept = f"submitted/{student}/{lesson}/ ({_shown(current)}), collected before and newer"
    notes = []
    if older:
        notes.append(
            f"{student}/{lesson}: kept {kept}; ignored {', '.join(older)} as older "
            "(kept as earlier attempts, for the report's history only)"
        )
    return dest.is_dir() and bool(usable), problems, notes


def collect(course: Course, lessons: list[str] | None = None) -> tuple[dict, list[str], list[str]]:
    """Collect every zip in downloaded/LESSON/archive/. Returns the students found per lesson,
    one line per zip that was skipped, and one line per student whose older attempt was
    ignored (which was kept, and why)."""
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    notes: list[str] = []
    for lesson in lessons or course.lessons():
        archive = course.downloaded / lesson / "archive"
        if not archive.is_dir():
            continue
        ledger_path = archive / FIRST_SEEN
        try:
            ledger = json.loads(ledger_path.read_text())
        except (OSError, ValueError):
            ledger = {}
        by_student: dict[str, list[tuple[Path, str]]] = {}
        for path in sorted(p for p in archive.iterdir() if p.is_file() and p != ledger_path):
            try:
                student, stamp = _stamp_of(path, _first_seen(path, ledger))
                by_student.setdefault(student, []).append((path, stamp))
            except Unusable as error:
                problems.append(f"skipped {path.relative_to(course.root)}: {error}")
        atomic_write_bytes(ledger_path, json.dumps(ledger, indent=1, sort_keys=True).encode())
        students = []
        for student, zips in sorted(by_student.items()):
            collected, skipped, said = _collect_student(course, lesson, student, zips)
            problems += skipped
            notes += said
            if collected:
                students.append(student)
        found[lesson] = students
    return found, problems, notes
