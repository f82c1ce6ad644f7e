"""The class report (``python -m instructor report``): what the class gets wrong, for the
instructor: ``reports/mistakes.html`` (with plots) and ``reports/mistakes.csv`` and
``reports/stuck.csv`` in the course folder.

It opens with *what to re-teach*: the mistakes of the students' latest submissions, ranked by
the number of students they affect, each with the section of the chapter to revisit (the
manifest's link). Then the code the checker's reading refused, for review by hand (a grading
report's ``flagged`` entries), and per lesson that anybody submitted (the others are named in
one line and left out, of the CSV too): the distribution of points as ``grades.csv`` has them
(late penalty included; the students' table shows the raw points beside), the students whose
module failed to import, once each with its cause, and per check the share of students whose
latest submission fails it and the mistakes the graders diagnosed, most common first, each
with its hint and a link to the section that explains it. Last, the students who are stuck:
failing the same check in their last two submissions or more, in the order submitted
(distinct submissions: regrading the same files does not count), the earlier attempts of one
LMS download included (:mod:`.collect` keeps them, autograde grades them into the history).

From the gradebook (scores, penalties), the per-check history autograde records
(:mod:`.gradebook`, ``course_check_history``) and the grading reports of the latest
submissions (``results/STUDENT/LESSON.json``: import errors, flagged code).

The report names hidden checks and their hints: it is for instructors, says so at the top, and
is written only to the course folder, never into release/ or feedback/.
"""

from __future__ import annotations

import base64
import io
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from core.atomic import atomic_write_bytes
from core.manifest import Check, Lesson, Manifest, load_manifest
from graders.hints import TIMED_OUT

from .course import COURSE_ID, Course
from .export import write_csv
from .gradebook import HARNESS_MISTAKES, HISTORY, NOT_IMPLEMENTED_KEY, UNNAMED
from .late_penalty import after_penalty

STUCK_AFTER = 2  # distinct submissions in a row failing the same check
RETEACH = 10  # mistakes listed under "what to re-teach"
IMPORT_FAILED = "import-failed"  # mistakes.csv's name for a module that failed to import
NOT_TAUGHT = {NOT_IMPLEMENTED_KEY, "not-graded"}  # failures that are no mistake to re-teach
MISTAKE_WORDS = {
    "not-graded": "not graded (the grading run ended first)",
    **{name: start for start, name in HARNESS_MISTAKES.items()},
}


@dataclass(frozen=True)
class Score:
    """A submission's points as grades.csv has them (late penalty included), and before it."""

    points: float
    max_points: float
    raw: float


@dataclass(frozen=True)
class Flag:
    """Code the checker's reading flagged for review by hand (a report's ``flagged`` entry)."""

    student: str
    lesson: str
    function: str
    file: str
    line: int | None
    reason: str


@dataclass(frozen=True)
class Reteach:
    """A mistake of the class, the students it affects and the check that diagnosed it."""

    check: Check
    key: str
    students: list[str]


@dataclass
class CheckStats:
    check: Check
    students: int = 0  # with a graded submission of the lesson
    failed: int = 0  # with a mistake (not counting those who have not implemented it yet)
    mistakes: dict[str, list[str]] = field(default_factory=dict)  # key -> its students
    not_implemented: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.failed / self.students if self.students else 0.0

    def most_common(self) -> list[tuple[str, list[str]]]:
        return sorted(self.mistakes.items(), key=lambda item: (-len(item[1]), item[0]))


@dataclass
class Stuck:
    student: str
    lesson: str
    check: str
    attempts: int
    mistake: str | None


@dataclass
class ClassReport:
    lessons: list[Lesson]  # those anybody submitted, in course order
    scores: dict[str, list[float]]  # lesson -> each submission's points (penalty included)
    max_points: dict[str, float]
    checks: dict[str, list[CheckStats]]  # lesson -> its checks, most failed first
    stuck: list[Stuck]
    site: str
    # student -> lesson -> its score; a lesson missing: not submitted
    students: dict[str, dict[str, Score]] = field(default_factory=dict)
    unsubmitted: list[Lesson] = field(default_factory=list)  # released, nobody submitted
    import_failed: dict[str, dict[str, str]] = field(default_factory=dict)  # lesson -> who, why
    flagged: list[Flag] = field(default_factory=list)

    def not_submitted(self, lesson: str) -> list[str]:
        return sorted(s for s, done in self.students.items() if lesson not in done)

    def link(self, check: Check) -> str:
        return self.site + check.url if self.site else check.link

    def reteach(self) -> list[Reteach]:
        """The class's mistakes, most students first: one per function and mistake (a
        mistake no check names, per check), stubs and ungraded checks left out."""
        found: dict[tuple[str, str, str], Reteach] = {}
        for lesson in self.lessons:
            for stats in self.checks.get(lesson.slug, []):
                for key, who in stats.mistakes.items():
                    if key in NOT_TAUGHT:
                        continue
                    where = stats.check.id if key == UNNAMED else stats.check.function
                    item = found.setdefault(
                        (lesson.slug, where, key), Reteach(stats.check, key, [])
                    )
                    item.students[:] = sorted(set(item.students) | set(who))
        order = {lesson.slug: n for n, lesson in enumerate(self.lessons)}
        return sorted(
            found.values(),
            key=lambda r: (-len(r.students), order[r.check.lesson], r.check.id, r.key),
        )


def gather(course: Course, manifest: Manifest | None = None) -> ClassReport:
    """Read the gradebook, the history and the latest reports into the report's numbers."""
    from nbgrader.api import Gradebook
    from sqlalchemy import select

    from .release import course_site

    manifest = manifest or load_manifest()
    scores: dict[str, list[float]] = defaultdict(list)
    max_points: dict[str, float] = {}
    with Gradebook(course.db_url, course_id=COURSE_ID) as gb:
        names = {a.name for a in gb.assignments}
        students: dict[str, dict[str, Score]] = {s.id: {} for s in gb.students}
        for assignment in gb.assignments:
            most = float(assignment.max_score)
            max_points[assignment.name] = most
            for sub in assignment.submissions:
                raw = float(sub.score)
                points = after_penalty(raw, sub.late_submission_penalty)
                scores[assignment.name].append(points)
                students.setdefault(sub.student.id, {})[assignment.name] = Score(points, most, raw)
        HISTORY.create(gb.engine, checkfirst=True)
        rows = gb.db.execute(
            select(HISTORY).order_by(HISTORY.c.graded, HISTORY.c.fingerprint)
        ).fetchall()
    released = [lesson for lesson in manifest.lessons if lesson.slug in names]  # course order
    lessons = [lesson for lesson in released if scores.get(lesson.slug)]
    import_failed: dict[str, dict[str, str]] = {}
    flagged: list[Flag] = []
    for lesson in lessons:
        for student in sorted(s for s, done in students.items() if lesson.slug in done):
            entry = latest_report(course, student, lesson.slug)
            if entry.get("import_error"):
                import_failed.setdefault(lesson.slug, {})[student] = str(entry["import_error"])
            flagged += flags(entry, student, lesson.slug)
    # Each student's submissions of a lesson: fingerprint -> check rows.
    history: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        history[(row.student, row.lesson)].setdefault(row.fingerprint, {})[row.check_id] = row
    checks: dict[str, list[CheckStats]] = {}
    stuck: list[Stuck] = []
    for lesson in lessons:
        stats = {c.id: CheckStats(c) for c in lesson.checks}
        failed_import = import_failed.get(lesson.slug, {})
        for (student, slug), submissions in sorted(history.items()):
            if slug != lesson.slug or student in failed_import:
                continue  # said once, with its cause, not as a failure of every check
            attempts = sorted(submissions.values(), key=_submitted)
            latest = attempts[-1]
            for check_id, row in latest.items():
                if check_id not in stats:
                    continue
                stats[check_id].students += 1
                if row.mistake == NOT_IMPLEMENTED_KEY:
                    stats[check_id].not_implemented.append(student)
                elif not row.passed:
                    stats[check_id].failed += 1
                    stats[check_id].mistakes.setdefault(row.mistake or UNNAMED, []).append(student)
                    run = 0
                    for attempt in reversed(attempts):
                        if check_id in attempt and not attempt[check_id].passed:
                            run += 1
                        else:
                            break
                    if run >= STUCK_AFTER:
                        stuck.append(Stuck(student, slug, check_id, run, row.mistake))
        checks[lesson.slug] = sorted(stats.values(), key=lambda s: (-s.share, s.check.id))
    return ClassReport(
        lessons,
        dict(scores),
        max_points,
        checks,
        stuck,
        course_site(course),
        students,
        unsubmitted=[lesson for lesson in released if lesson not in lessons],
        import_failed=import_failed,
        flagged=flagged,
    )


def latest_report(course: Course, student: str, lesson: str) -> dict[str, Any]:
    """The lesson's entry in the grading report of the student's latest submission
    (``results/STUDENT/LESSON.json``), or {} when there is none to read."""
    try:
        result = json.loads((course.results / student / f"{lesson}.json").read_text("utf-8"))
        entries = result["report"]["lessons"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return next((e for e in entries if isinstance(e, dict) and e.get("slug") == lesson), {})


def flags(entry: dict[str, Any], student: str, lesson: str) -> list[Flag]:
    """A report entry's ``flagged`` list: {function, file, line, reason} each."""
    found = []
    for item in entry.get("flagged") or []:
        if not isinstance(item, dict):
            continue
        line = item.get("line")
        found.append(
            Flag(
                student,
                lesson,
                str(item.get("function") or ""),
                str(item.get("file") or ""),
                line if isinstance(line, int) and not isinstance(line, bool) else None,
                str(item.get("reason") or ""),
            )
        )
    return found


def _submitted(attempt: dict[str, Any]) -> tuple[datetime, datetime]:
    """When an attempt was submitted (its timestamp; graded then, when it had none): earlier
    attempts of one download are graded with the newest, so grading order is no guide."""
    row = next(iter(attempt.values()))
    return (row.submitted or row.graded, row.graded)


def mistake_text(check: Check, key: str, manifest: Manifest) -> str:
    """A diagnosed mistake in words: its hint from the manifest, else what it names."""
    known = {**manifest.lesson(check.lesson).mistakes(check.function), **check.mistakes}
    if key in known:
        return known[key]
    if key == UNNAMED:
        return f"no specific mistake recognised; the check's hint: {check.hint}"
    if key == "timed-out":
        return TIMED_OUT.format(seconds=check.timeout)
    return MISTAKE_WORDS.get(key, key)


# -- plots -----------------------------------------------------------------------------------


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def plot_points(scores: list[float], most: float, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(5, 2.4))
    axes = figure.subplots()
    bins = max(1, min(int(most) + 1, 25))
    axes.hist(scores, bins=bins, range=(0, most or 1), color="#3f6ec6", edgecolor="white")
    axes.set_xlabel(f"points (of {most:g})")
    axes.set_ylabel("students")
    axes.set_title(title, fontsize=10)
    locator = axes.yaxis.get_major_locator()
    if isinstance(locator, MaxNLocator):  # the default AutoLocator is one
        locator.set_params(integer=True)
    return _png(figure)


def plot_failures(stats: list[CheckStats], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    shown = [s for s in stats if s.failed][:20]  # most failed first
    figure = Figure(figsize=(6, 0.3 * len(shown) + 1.0))
    axes = figure.subplots()
    names = [s.check.id + (" (hidden)" if s.check.hidden else "") for s in shown][::-1]
    axes.barh(names, [100 * s.share for s in shown][::-1], color="#c6513f")
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of students failing (latest submission)")
    axes.set_title(title, fontsize=10)
    axes.tick_params(axis="y", labelsize=8)
    return _png(figure)


# -- the files -------------------------------------------------------------------------------


def render_html(report: ClassReport, manifest: Manifest) -> str:
    """The page, from ``templates/class_report.html``: this gathers what each section shows,
    the template lays it out and escapes every value."""
    from .rendering import render

    return render(
        "class_report.html",
        report=report,
        unsubmitted=[f"{lesson.number}. {lesson.slug}" for lesson in report.unsubmitted],
        reteach=reteach_items(report, manifest),
        lessons=[lesson_view(report, manifest, lesson) for lesson in report.lessons],
        students=[
            (student, [done.get(lesson.slug) for lesson in report.lessons])
            for student, done in sorted(report.students.items())
        ],
        stuck_after=STUCK_AFTER,
    )


def reteach_items(report: ClassReport, manifest: Manifest) -> list[dict[str, Any]]:
    """The first :data:`RETEACH` mistakes of the class, each with the section to revisit."""
    items = []
    for item in report.reteach()[:RETEACH]:
        items.append(
            {
                "check": item.check,
                "students": item.students,
                "lesson": manifest.lesson(item.check.lesson),
                "where": item.check.id if item.key == UNNAMED else item.check.function,
                "text": mistake_text(item.check, item.key, manifest),
                "link": report.link(item.check),
            }
        )
    return items


def lesson_view(report: ClassReport, manifest: Manifest, lesson: Lesson) -> dict[str, Any]:
    """A lesson's section: its points (with plots), who did not submit or failed to import,
    and per check the mistakes, most common first."""
    scores = report.scores.get(lesson.slug, [])
    most = report.max_points.get(lesson.slug, 0.0)
    stats = report.checks.get(lesson.slug, [])
    late = [
        s
        for s, done in report.students.items()
        if lesson.slug in done and done[lesson.slug].points < done[lesson.slug].raw
    ]
    return {
        "slug": lesson.slug,
        "number": lesson.number,
        "title": lesson.title,
        "submissions": len(scores),
        "mean": sum(scores) / len(scores),
        "most": most,
        "full": sum(s >= most for s in scores),
        "late": len(late),
        "missing": report.not_submitted(lesson.slug),
        "import_failed": sorted(report.import_failed.get(lesson.slug, {}).items()),
        "points_plot": plot_points(scores, most, f"{lesson.slug}: points"),
        "failures_plot": (
            plot_failures(stats, f"{lesson.slug}: checks failed")
            if any(s.failed for s in stats)
            else None
        ),
        "checks": [
            {
                "stats": s,
                "link": report.link(s.check),
                "mistakes": [
                    {"key": key, "students": who, "text": mistake_text(s.check, key, manifest)}
                    for key, who in s.most_common()
                ],
            }
            for s in stats
            if s.students
        ],
    }


def mistake_rows(report: ClassReport, manifest: Manifest) -> list[dict[str, str]]:
    rows = []
    for lesson in report.lessons:
        failed_import = report.import_failed.get(lesson.slug, {})
        for student, cause in sorted(failed_import.items()):
            rows.append(
                dict.fromkeys(MISTAKE_COLUMNS, "")
                | {
                    "lesson": lesson.slug,
                    "mistake": IMPORT_FAILED,
                    "count": "1",
                    "who": student,
                    "hint": cause,
                }
            )
        for s in report.checks.get(lesson.slug, []):
            link = report.link(s.check)
            base = {
                "lesson": lesson.slug,
                "check": s.check.id,
                "hidden": "yes" if s.check.hidden else "no",
                "function": s.check.function,
                "students": str(s.students),
                "failed": str(s.failed),
                "failed_share": f"{s.share:.3f}",
                "not_implemented": " ".join(s.not_implemented),
                "link": link,
            }
            for key, who in s.most_common() or [("", [])]:
                rows.append(
                    {
                        **base,
                        "mistake": key,
                        "count": str(len(who)),
                        "who": " ".join(who),
                        "hint": mistake_text(s.check, key, manifest) if key else "",
                    }
                )
    return rows


MISTAKE_COLUMNS = [
    "lesson",
    "check",
    "hidden",
    "function",
    "students",
    "failed",
    "failed_share",
    "not_implemented",
    "mistake",
    "count",
    "who",
    "hint",
    "link",
]
STUCK_COLUMNS = ["student", "lesson", "check", "attempts", "mistake"]


def write_report(course: Course, to: Path | None = None) -> list[Path]:
    """Write mistakes.html, mistakes.csv and stuck.csv (default: COURSE/reports/)."""
    manifest = load_manifest()
    report = gather(course, manifest)
    folder = Path(to) if to else course.root / "reports"
    paths = [folder / "mistakes.html", folder / "mistakes.csv", folder / "stuck.csv"]
    atomic_write_bytes(paths[0], render_html(report, manifest).encode("utf-8"))
    write_csv(paths[1], MISTAKE_COLUMNS, iter(mistake_rows(report, manifest)))
    write_csv(
        paths[2],
        STUCK_COLUMNS,
        iter(
            {
                "student": s.student,
                "lesson": s.lesson,
                "check": s.check,
                "attempts": str(s.attempts),
                "mistake": s.mistake or "",
            }
            for s in report.stuck
        ),
    )
    return paths
