"""``collect``: submissions as zips (one per student, from an LMS) into ``submitted/``.

Put the zips in ``build/nbgrader/downloaded/LESSON/archive/``, one per student, named
``STUDENT.zip`` or as the LMS's "download all" names them (:data:`DOWNLOAD_NAMES`):
Blackboard's ``ASSIGNMENT_STUDENT_attempt_DATE.zip``, Canvas's
``lastfirst_USERID_SUBMISSION_file.zip`` and Moodle's
``First Last_ID_assignsubmission_file_file.zip``. For any other, set
``c.SubmissionCollector.named_regexp`` in your ``nbgrader_config.py`` (as nbgrader's
``ZipCollectApp`` has it: groups ``student_id``, or ``lms_id`` and ``name``, and
``timestamp``). Canvas and Moodle name students by their LMS user id and name: those are
found in the gradebook's roster (``nbgrader db student import``, with ``lms_user_id``). When
the gradebook has a roster, a student not on it is skipped with one line saying how to add
them, never created silently.

Each zip holds the lesson's folder as released (``LESSON.ipynb`` and ``exercises/``), at its
top level or inside one folder. Only the notebook and the ``exercises/`` package are kept; the
rest of a submission is left out (autograde restores it from source/ anyway). The submission's
time (nbgrader's ``timestamp.txt``) is the date in the download's name, else the time collect
first saw that zip (recorded in ``archive/first-seen.json``), with a warning line naming the
student and that time: never a date inside the zip, which the student sets.

A download can hold several attempts of one student (``hw1_ann_attempt_DATE.zip`` twice), and
a later download can hold an older zip than the one collected before. The newest attempt by
that time is the submission, in ``submitted/``; an older one never replaces it, and one line
per student says which was kept and which ignored. The older attempts (and a submission a
newer one replaced) are kept in ``downloaded/LESSON/attempts/STUDENT/TIME/``: autograde grades
them into the per-check history only, so the class report sees every attempt (who is stuck),
while the gradebook holds the newest.

A zip that cannot be collected (unreadable, no student id in its name, a student not on the
roster, nothing of the lesson inside, too big) is skipped with one line saying why; the others
are collected. Plain ``nbgrader zip_collect`` works too, with :class:`SubmissionCollector`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from nbgrader.plugins import FileNameCollectorPlugin

from core.atomic import atomic_write_bytes
from core.cli import one_line

from .course import Course
from .errors import SetupError

_STUDENT = re.compile(r"^[A-Za-z0-9][\w.@-]{0,127}$")
_ATTEMPT = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[-T_ ](\d\d)[-:](\d\d)(?:[-:](\d\d))?)?")
MAX_UNPACKED = 64 << 20  # bytes: a lesson folder is a few hundred KiB
STAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt
# Download names (without .zip), tried after the instructor's own pattern, in this order: a
# group ``student_id`` is a roster id; ``lms_id`` (the LMS's user id) and ``name`` are looked
# up in the roster; ``timestamp`` holds the submission's date, when the name has one.
DOWNLOAD_NAMES = {
    "Blackboard": r"^.+_(?P<student_id>[^_]+)_attempt_(?P<timestamp>.+)$",
    "Canvas": r"^(?P<name>[^_]+)(?:_LATE)?_(?P<lms_id>\d+)_\d+_.+$",
    "Moodle": r"^(?P<name>[^_]+)_(?P<lms_id>\d+)_assignsubmission_(?:file|onlinetext)_.*$",
    "a roster id": r"^(?P<student_id>.+)$",
}
WHO = {"student_id", "lms_id", "name"}


class Unusable(Exception):
    """A zip that cannot be collected; the message says why and what to do."""


@dataclass(frozen=True)
class Rostered:
    """A student on the gradebook's roster."""

    id: str
    first_name: str = ""
    last_name: str = ""
    lms_user_id: str = ""

    def known_as(self, name: str) -> bool:
        """Whether an LMS's name for a student (Canvas: ``lastfirst``; Moodle: ``First
        Last``) is this one's, letters and digits compared, case ignored."""
        plain = _letters(name)
        return bool(plain) and plain in {
            _letters(self.last_name + self.first_name),
            _letters(self.first_name + self.last_name),
        }


def _letters(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def roster(course: Course) -> dict[str, Rostered]:
    """The gradebook's students (nbgrader's roster: ``nbgrader db student import``); empty
    when there is no gradebook yet or it holds none."""
    from sqlalchemy import create_engine, inspect, text
    from sqlalchemy.engine import make_url

    url = course.db_url
    database = make_url(url).database
    if url.startswith("sqlite") and not (database and Path(database).is_file()):
        return {}  # connecting would create it
    engine = create_engine(url)
    try:
        with engine.connect() as db:
            if "student" not in inspect(db).get_table_names():
                return {}
            rows = db.execute(text("SELECT id, first_name, last_name, lms_user_id FROM student"))
            return {row[0]: Rostered(*(str(v or "") for v in row)) for row in rows}
    except Exception as error:  # noqa: BLE001 - any driver's error, in one line
        raise SetupError(
            f"cannot read the roster in {course.gradebook_name()}: {one_line(error)}"
        ) from None
    finally:
        engine.dispose()


class Names:
    """Who a download is and when it was handed in, from its name: the instructor's pattern
    (``c.SubmissionCollector.named_regexp`` in their nbgrader_config.py) first, then
    :data:`DOWNLOAD_NAMES`. When the gradebook has a roster, a student not on it is refused."""

    def __init__(self, pattern: str = "", students: dict[str, Rostered] | None = None) -> None:
        self.patterns = dict(DOWNLOAD_NAMES)
        if pattern:
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise SetupError(
                    f"c.SubmissionCollector.named_regexp {pattern!r} is no regular expression "
                    f"({error}): fix it in your nbgrader_config.py"
                ) from None
            if not WHO & set(compiled.groupindex):
                raise SetupError(
                    f"c.SubmissionCollector.named_regexp {pattern!r} names no student: give it "
                    "a group (?P<student_id>...), (?P<lms_id>...) or (?P<name>...)"
                )
            self.patterns = {"your named_regexp": pattern, **self.patterns}
        self.roster = students or {}

    @classmethod
    def of(cls, course: Course) -> Names:
        from .own_config import instructor_config

        pattern = instructor_config().get("SubmissionCollector", {}).get("named_regexp", "")
        return cls(str(pattern or ""), roster(course))

    def read(self, name: str) -> tuple[str, str | None]:
        """(student id, the date in the name or None) of a download named ``name`` (no .zip)."""
        for kind, pattern in self.patterns.items():
            found = re.match(pattern, name)
            groups = {k: v for k, v in found.groupdict().items() if v} if found else {}
            if WHO & set(groups):
                return self._student(kind, groups), groups.get("timestamp")
        raise Unusable(
            "no student id in the name: name it STUDENT.zip, or keep the LMS's download name "
            "(Blackboard, Canvas, Moodle), or set c.SubmissionCollector.named_regexp in your "
            "nbgrader_config.py"
        )

    def _student(self, kind: str, groups: dict[str, str]) -> str:
        if "student_id" in groups:
            student = groups["student_id"]
            if not _STUDENT.match(student):
                raise Unusable(
                    f"no student id in the name ({student!r} holds characters other than "
                    "letters, digits and . _ @ -): rename it STUDENT.zip"
                )
            if self.roster and student not in self.roster:
                raise Unusable(
                    f"{student} is not on the roster: add them (nbgrader db student add "
                    f"{student}) or rename the zip to their roster id, then collect again"
                )
            return student
        lms, name = groups.get("lms_id", ""), groups.get("name", "")
        found = [s for s in self.roster.values() if lms and lms in (s.lms_user_id, s.id)]
        found = found or [s for s in self.roster.values() if s.known_as(name)]
        if len(found) == 1:
            return found[0].id
        who = ", ".join(f"{k} {v!r}" for k, v in (("name", name), ("LMS user id", lms)) if v)
        how = "matches several students on" if found else "matches no student on"
        raise Unusable(
            f"a {kind} download ({who}) that {how} the roster: add the student with their "
            "LMS user id (nbgrader db student add ID --first-name ... --last-name ... "
            f"--lms-user-id {lms or 'ID'}), then collect again"
        )


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

    _names: Names | None = None

    def names(self) -> Names:
        """The download names this collector reads: its ``named_regexp``, then the LMSs'."""
        if self._names is None:
            coursedir = getattr(self.parent, "coursedir", None)
            course = Course.at(getattr(coursedir, "root", None) or Path.cwd())
            self._names = Names(self.named_regexp, roster(course))
        return self._names

    def collect(self, submitted_file: str) -> dict | None:
        parts = PurePosixPath(submitted_file.replace("\\", "/")).parts
        try:
            at = len(parts) - 1 - parts[::-1].index("extracted")
        except ValueError:
            return None
        inside = list(parts[at + 1 :])
        if len(inside) < 2:
            return None
        try:
            student, _date = self.names().read(inside[0])
        except Unusable as error:
            self.log.warning("Skipped %s: %s", submitted_file, error)
            return None
        rel = file_id(inside[1:])
        return {"student_id": student, "file_id": rel} if rel else None


FIRST_SEEN = "first-seen.json"  # in archive/: zip name and content hash -> when collect saw it
ATTEMPTS = "attempts"  # downloaded/LESSON/attempts/STUDENT/TIME/: the earlier attempts


def _timestamp(date: str | None, first_seen: str) -> str:
    """The submission's time: the date a download's name holds, else when collect first saw
    it."""
    match = _ATTEMPT.search(date or "")
    if match:
        year, month, day, hour, minute, second = (int(p) if p else 0 for p in match.groups())
        try:
            return datetime(year, month, day, hour, minute, second).strftime(STAMP)
        except ValueError:
            pass
    return first_seen


def _first_seen(path: Path, ledger: dict[str, str]) -> tuple[str, bool]:
    """When collect first saw this zip (its name and content), and whether that is now."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = f"{path.name} {digest}"
    new = key not in ledger
    if new:
        ledger[key] = datetime.now(UTC).strftime(STAMP)
    return ledger[key], new


def _stamp_of(path: Path, names: Names, ledger: dict[str, str]) -> tuple[str, str, bool]:
    """(student, submission time) of a zip, from its name (and the first-seen ledger), and
    whether it was stamped now, its name holding no date."""
    first_seen, new = _first_seen(path, ledger)  # kept even for a zip refused now
    name = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else None
    if name is None:
        raise Unusable("not a .zip file (download the students' submissions as zips)")
    student, date = names.read(name)
    stamp = _timestamp(date, first_seen)
    return student, stamp, new and stamp == first_seen


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
    names = Names.of(course)
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
                student, stamp, undated = _stamp_of(path, names, ledger)
            except Unusable as error:
                problems.append(f"skipped {path.relative_to(course.root)}: {error}")
                continue
            by_student.setdefault(student, []).append((path, stamp))
            if undated:
                notes.append(
                    f"warning: {student}/{lesson}: {path.name} has no date in its name, so it "
                    f"is stamped {_shown(stamp)}, when collect first saw it; late penalties "
                    "count from that time (if it was handed in earlier, correct its time in "
                    f"downloaded/{lesson}/archive/{FIRST_SEEN} and collect again)"
                )
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
