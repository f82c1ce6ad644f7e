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
time (nbgrader's ``timestamp.txt``) is, in this order: the date in the download's name
(Blackboard's), the time the LMS recorded (a Canvas submissions JSON, a Moodle grading
worksheet or a ``student,timestamp`` CSV beside the zips: :mod:`.submission_times`), else the
time collect first saw that zip (recorded in ``archive/first-seen.json``, which the instructor
may correct: collect again and the zip is collected with the corrected time). Never a date
inside the zip, which the student sets. Zips stamped from first-seen.json are counted in one
line per lesson that says what they cost under the course's late policy when they are past
the due date, before anything is graded.

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
from .submission_times import STAMP, SUFFIXES, Reported, UnreadableTimes, read_times

_STUDENT = re.compile(r"^[A-Za-z0-9][\w.@-]{0,127}$")
_ATTEMPT = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[-T_ ](\d\d)[-:](\d\d)(?:[-:](\d\d))?)?")
MAX_UNPACKED = 64 << 20  # bytes: a lesson folder is a few hundred KiB
# Download names (without .zip), tried after the instructor's own pattern, in this order: a
# group ``student_id`` is a roster id; ``lms_id`` (the LMS's user id) and ``name`` are looked
# up in the roster; ``timestamp`` holds the submission's date, when the name has one.
DOWNLOAD_NAMES = {
    "Blackboard": r"^.+_(?P<student_id>[^_]+)_attempt_(?P<timestamp>.+)$",
    # Canvas marks a late submission: lastfirst_late_USERID_SUBMISSIONID_file (any case).
    "Canvas": r"^(?P<name>[^_]+)(?:_(?i:late))?_(?P<lms_id>\d+)_\d+_.+$",
    # Moodle's group submissions put the group first: GROUP-First Last_ID_assignsubmission_...
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


def _gradebook_rows(course: Course, table: str, query: str, values: dict, what: str) -> list:
    """The rows ``query`` reads from the gradebook; none when there is no gradebook yet (a
    SQLite file connecting would create) or it has no ``table``. A driver's error is one line
    naming ``what`` was being read."""
    from sqlalchemy import create_engine, inspect, text
    from sqlalchemy.engine import make_url

    url = course.db_url
    database = make_url(url).database
    if url.startswith("sqlite") and not (database and Path(database).is_file()):
        return []  # connecting would create it
    engine = create_engine(url)
    try:
        with engine.connect() as db:
            if table not in inspect(db).get_table_names():
                return []
            return list(db.execute(text(query), values).all())
    except Exception as error:  # noqa: BLE001 - any driver's error, in one line
        raise SetupError(
            f"cannot read {what} in {course.gradebook_name()}: {one_line(error)}"
        ) from None
    finally:
        engine.dispose()


def roster(course: Course) -> dict[str, Rostered]:
    """The gradebook's students (nbgrader's roster: ``nbgrader db student import``); empty
    when there is no gradebook yet or it holds none."""
    rows = _gradebook_rows(
        course,
        "student",
        "SELECT id, first_name, last_name, lms_user_id, email FROM student",
        {},
        "the roster",
    )
    # Autograde adds a student it grades who is not in the gradebook, with nothing but an id:
    # those are no roster, or a course without one would refuse every later newcomer.
    from . import gradings

    graded = {key.split("/", 1)[0] for key in gradings.read(course.root)}
    return {
        row[0]: Rostered(*(str(v or "") for v in row[:4]))
        for row in rows
        if any(row[1:]) or row[0] not in graded
    }


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
        self.graded: set[str] = set()  # students graded before (autograde added them)

    @classmethod
    def of(cls, course: Course) -> Names:
        from . import gradings
        from .own_config import instructor_config

        pattern = instructor_config().get("SubmissionCollector", {}).get("named_regexp", "")
        names = cls(str(pattern or ""), roster(course))
        names.graded = {key.split("/", 1)[0] for key in gradings.read(course.root)}
        return names

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
            if self.roster and student not in self.roster and student not in self.graded:
                raise Unusable(
                    f"{student} is not on the roster: add them (nbgrader db student add "
                    f"{student}) or rename the zip to their roster id, then collect again"
                )
            return student
        lms, name = groups.get("lms_id", ""), groups.get("name", "")
        found = [s for s in self.roster.values() if lms and lms in (s.lms_user_id, s.id)]
        found = found or self._by_name(name)
        if len(found) == 1:
            return found[0].id
        who = ", ".join(f"{k} {v!r}" for k, v in (("name", name), ("LMS user id", lms)) if v)
        how = "matches several students on" if found else "matches no student on"
        raise Unusable(
            f"a {kind} download ({who}) that {how} the roster: add the student with their "
            "LMS user id (nbgrader db student add ID --first-name ... --last-name ... "
            f"--lms-user-id {lms or 'ID'}), then collect again"
        )

    def _by_name(self, name: str) -> list[Rostered]:
        """The students an LMS's name is, tried whole and then after each ``-`` (Moodle's
        group submissions name ``GROUP-First Last``; a name of its own may hold a ``-``)."""
        starts = [0] + [at + 1 for at, ch in enumerate(name) if ch == "-"]
        for start in starts:
            found = [s for s in self.roster.values() if s.known_as(name[start:])]
            if found:
                return found
        return []

    def resolve(self, who: dict[str, str]) -> str:
        """The roster id of a student named as a download name names them (its groups)."""
        return self._student("LMS times", who)


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
COLLECTED = "collected.json"  # in downloaded/LESSON/: which zip each collected folder holds
ATTEMPTS = "attempts"  # downloaded/LESSON/attempts/STUDENT/TIME/: the earlier attempts
BY_NAME, BY_LMS = "its name", "the LMS's times"  # where a zip's time came from (or FIRST_SEEN)


@dataclass(frozen=True)
class Zip:
    """A student's download: its file, its key in first-seen.json (name and content), its
    submission time and where that time came from (:data:`BY_NAME`, :data:`BY_LMS`,
    :data:`FIRST_SEEN`)."""

    path: Path
    key: str
    stamp: str
    source: str


def _dated(date: str | None) -> str | None:
    """The time a download's name holds (Blackboard's ``attempt_DATE``), if it holds one."""
    match = _ATTEMPT.search(date or "")
    if match:
        year, month, day, hour, minute, second = (int(p) if p else 0 for p in match.groups())
        try:
            return datetime(year, month, day, hour, minute, second).strftime(STAMP)
        except ValueError:
            pass
    return None


def _zip_of(
    path: Path, names: Names, ledger: dict[str, str], reported: dict[str, str]
) -> tuple[str, Zip]:
    """(student, the zip) of a file of archive/: its time from its name, else the LMS's times,
    else first-seen.json (where it is entered now if new, even for a zip refused now)."""
    key = f"{path.name} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    ledger.setdefault(key, datetime.now(UTC).strftime(STAMP))
    name = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else None
    if name is None:
        raise Unusable("not a .zip file (download the students' submissions as zips)")
    student, date = names.read(name)
    dated = _dated(date)
    if dated:
        return student, Zip(path, key, dated, BY_NAME)
    if student in reported:
        return student, Zip(path, key, reported[student], BY_LMS)
    seen = when(str(ledger[key]))
    if seen is None:
        raise Unusable(
            f"its time in {FIRST_SEEN} ({ledger[key]!r}) is no time: correct it (as "
            "2026-02-01 11:58:00 UTC), then collect again"
        )
    return student, Zip(path, key, seen.strftime(STAMP), FIRST_SEEN)


def _lms_times(
    course: Course, archive: Path, names: Names
) -> tuple[dict[str, str], list[str], list[str]]:
    """The LMS's submission time of each student (:mod:`.submission_times`: every .csv and
    .json of archive/ but first-seen.json), the files skipped and one line per file read."""
    reported: dict[str, str] = {}
    problems, notes = [], []
    for path in sorted(archive.iterdir()):
        if path.suffix.lower() not in SUFFIXES or path.name == FIRST_SEEN or not path.is_file():
            continue
        rel = path.relative_to(course.root)
        try:
            rows: list[Reported] = read_times(path)
        except UnreadableTimes as error:
            problems.append(f"skipped {rel}: {error}")
            continue
        strangers = []
        for row in rows:
            try:
                student = names.resolve(row.who)
            except Unusable:
                strangers.append(str(row.row))
                continue
            if student not in reported or (when(row.stamp) or datetime.min) > (
                when(reported[student]) or datetime.min
            ):
                reported[student] = row.stamp
        line = f"{rel}: the LMS's submission times of {len(rows) - len(strangers)} student(s)"
        if strangers:
            line += (
                f"; row(s) {', '.join(strangers)} name no student on the roster (add them with "
                "their LMS user id, nbgrader db student add ... --lms-user-id ID)"
            )
        notes.append(line)
    return reported, problems, notes


def is_receipt(path: Path) -> bool:
    """Blackboard's text file beside each attempt (``..._attempt_DATE.txt``): not a
    submission, and its date is in the zip's name too."""
    return path.suffix.lower() == ".txt" and "_attempt_" in path.name


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


def _rel(course: Course, folder: Path) -> str:
    return folder.relative_to(course.root).as_posix()


def _collect_student(
    course: Course, lesson: str, student: str, zips: list[Zip], origins: dict[str, dict]
) -> tuple[bool, list[str], list[str]]:
    """Collect one student's zips of a lesson: the newest into submitted/, the others (and a
    submission they replace) kept as earlier attempts. ``origins`` (collected.json's entry of
    this student: folder -> the zip it holds and where its time came from) is updated.
    Returns whether submitted/ holds one, the skip lines and the line saying which attempt
    was kept and which ignored."""
    dest = course.submitted / student / lesson
    here = _rel(course, dest)
    present = {z.key for z in zips}
    again = False  # whether submitted/ holds one of these zips, to be collected again
    # A zip collected before is collected again with the time it has now (a corrected
    # first-seen.json, the LMS's times added), never filed as an earlier attempt of itself.
    for rel, origin in list(origins.items()):
        if origin.get("zip") in present:
            if rel == here:
                again = True
            else:
                shutil.rmtree(course.root / rel, ignore_errors=True)
            del origins[rel]
    current = read_stamp(dest) if dest.is_dir() and not again else None
    if (
        current is not None
        and origins.get(here, {}).get("source") == FIRST_SEEN
        and any(z.source == BY_LMS for z in zips)
    ):
        # The LMS lists each student's latest submission: it is newer than a zip whose time
        # was only when collect first saw it.
        rank_current = datetime.min
    else:
        rank_current = when(current) or datetime.min
    problems, usable = [], []
    newest_first = sorted(
        zips, key=lambda z: (when(z.stamp) or datetime.min, z.path.name), reverse=True
    )
    kept: str | None = None  # what submitted/ holds, in words
    older: list[str] = []
    for z in newest_first:
        shown_path = z.path.relative_to(course.root)
        newer_there = kept is not None or (
            current is not None and rank_current > (when(z.stamp) or datetime.min)
        )
        try:
            if newer_there:
                folder = attempt_folder(course, lesson, student, z.stamp)
                unpack(z.path, lesson, folder, z.stamp)
                origins[_rel(course, folder)] = {"zip": z.key, "source": z.source}
                older.append(f"{z.path.name} ({_shown(z.stamp)})")
            else:
                if current is not None and when(current) not in (None, when(z.stamp)):
                    # The submission this one replaces stays in the history as an attempt.
                    earlier = attempt_folder(course, lesson, student, current)
                    if earlier.exists():
                        shutil.rmtree(earlier)
                    earlier.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copytree(dest, earlier)
                    if here in origins:
                        origins[_rel(course, earlier)] = origins[here]
                unpack(z.path, lesson, dest, z.stamp)
                origins[here] = {"zip": z.key, "source": z.source}
                kept = f"{z.path.name} ({_shown(z.stamp)}), the newest"
            usable.append(z.path)
        except Unusable as error:
            problems.append(f"skipped {shown_path}: {error}")
    if kept is None and current is not None and older:
        kept = f"submitted/{student}/{lesson}/ ({_shown(current)}), collected before and newer"
    notes = []
    if older:
        notes.append(
            f"{student}/{lesson}: kept {kept}; ignored {', '.join(older)} as older "
            "(kept as earlier attempts, for the report's history only)"
        )
    return dest.is_dir() and bool(usable), problems, notes


def due_date(course: Course, lesson: str) -> datetime | None:
    """The lesson's due date in the gradebook (UTC), None when it has none (or no gradebook)."""
    rows = _gradebook_rows(
        course,
        "assignment",
        "SELECT duedate FROM assignment WHERE name = :name",
        {"name": lesson},
        "the due dates",
    )
    found = rows[0] if rows else None
    if not found or found[0] is None:
        return None
    due = found[0]
    return due.replace(tzinfo=None) if isinstance(due, datetime) else when(str(due))


def late_cost(course: Course, late: list[tuple[str, float]]) -> str:
    """What the course's late policy (nbgrader's plugin as the instructor configured it) takes
    from these (student, seconds late), in words."""
    from .late_penalty import late_penalty_plugin, penalty

    try:
        plugin = late_penalty_plugin(course)
        taken = {penalty(plugin, s, 100.0, seconds) or 0.0 for s, seconds in late}
    except SetupError as error:
        return f"lose what the late policy takes ({error})"
    except Exception as error:  # noqa: BLE001 - the instructor's plugin, in one line
        return f"lose what the late policy takes (its plugin failed: {one_line(error)})"
    if taken == {0.0}:
        return "lose nothing under the late policy"
    if taken == {100.0}:
        return "score 0 under the late policy"
    most = max(taken)
    return f"lose up to {most:g} of every 100 points under the late policy"


def _undated_line(course: Course, lesson: str, undated: list[tuple[str, Zip]], total: int) -> str:
    """The one line, before anything is graded, on the zips stamped from first-seen.json."""
    head = (
        f"{lesson}: {len(undated)} of {total} zip(s) carry no submission time (no date in "
        "their names, no LMS times beside them), so they are stamped when collect first saw "
        f"them (or as corrected in downloaded/{lesson}/archive/{FIRST_SEEN})"
    )
    fix = (
        f"put the LMS's submission times in downloaded/{lesson}/archive/ (Canvas: its API's "
        "submissions JSON; Moodle: the grading worksheet CSV; or a student,timestamp CSV), or "
        f"correct the times in {FIRST_SEEN}, and collect again"
    )
    due = due_date(course, lesson)
    if due is None:
        return (
            f"note: {head}; the lesson has no due date, so none is late (before it has one, {fix})"
        )
    late = [(s, z) for s, z in undated if (when(z.stamp) or datetime.min) > due]
    if not late:
        return f"note: {head}; none is after the due date, {_shown(due.strftime(STAMP))}"
    cost = late_cost(course, [(s, ((when(z.stamp) or due) - due).total_seconds()) for s, z in late])
    who = ", ".join(sorted({s for s, _ in late}))
    return (
        f"warning: {head}; {len(late)} of them after the due date, "
        f"{_shown(due.strftime(STAMP))}, would {cost} ({who}): if they were handed in "
        f"earlier, {fix}"
    )


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    atomic_write_bytes(path, json.dumps(data, indent=1, sort_keys=True).encode() + b"\n")


def collect(course: Course, lessons: list[str] | None = None) -> tuple[dict, list[str], list[str]]:
    """Collect every zip in downloaded/LESSON/archive/. Returns the students found per lesson,
    one line per file that was skipped, and the notes: the LMS times read, the zips that carry
    no time (one line per lesson, with what they cost when late), and one line per student
    whose older attempt was ignored (which was kept, and why)."""
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    notes: list[str] = []
    names = Names.of(course)
    for lesson in lessons or course.lessons():
        archive = course.downloaded / lesson / "archive"
        if not archive.is_dir():
            continue
        ledger_path = archive / FIRST_SEEN
        ledger = _read_json(ledger_path)
        reported, skipped, said = _lms_times(course, archive, names)
        problems += skipped
        notes += said
        by_student: dict[str, list[Zip]] = {}
        for path in sorted(p for p in archive.iterdir() if p.is_file() and p != ledger_path):
            if path.suffix.lower() in SUFFIXES or is_receipt(path):
                continue
            try:
                student, got = _zip_of(path, names, ledger, reported)
            except Unusable as error:
                problems.append(f"skipped {path.relative_to(course.root)}: {error}")
                continue
            by_student.setdefault(student, []).append(got)
        _write_json(ledger_path, ledger)
        undated = [(s, z) for s, zs in by_student.items() for z in zs if z.source == FIRST_SEEN]
        if undated:
            total = sum(len(zs) for zs in by_student.values())
            notes.append(_undated_line(course, lesson, undated, total))
        collected_path = course.downloaded / lesson / COLLECTED
        origins = _read_json(collected_path)
        students = []
        for student, zips in sorted(by_student.items()):
            entry = origins.setdefault(student, {})
            collected, skipped, said = _collect_student(course, lesson, student, zips, entry)
            problems += skipped
            notes += said
            if collected:
                students.append(student)
        _write_json(collected_path, origins)
        found[lesson] = students
    return found, problems, notes
