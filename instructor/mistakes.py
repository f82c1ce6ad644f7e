"""``report``: what the class gets wrong, for the instructor: ``reports/mistakes.html`` (with
plots) and ``reports/mistakes.csv`` and ``reports/stuck.csv`` in the course folder.

From the gradebook: per lesson, the distribution of points over the students' submissions.
From the per-check history autograde records (:mod:`.gradebook`, ``course_check_history``):
per check, the share of students whose latest submission fails it and the mistakes the graders
diagnosed, most common first, each with its hint and a link to the chapter section that
explains it; and the students who are stuck: failing the same check in their last two
submissions or more, in the order submitted (distinct submissions: regrading the same files
does not count), the earlier attempts of one LMS download included (:mod:`.collect` keeps
them, autograde grades them into the history).

The report names hidden checks and their hints: it is for instructors, says so at the top, and
is written only to the course folder, never into release/ or feedback/.
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from core.atomic import atomic_write_bytes
from core.manifest import Check, Lesson, Manifest, load_manifest

from .course import COURSE_ID, Course
from .export import write_csv
from .gradebook import HARNESS_MISTAKES, HISTORY, NOT_IMPLEMENTED_KEY, UNNAMED

STUCK_AFTER = 2  # distinct submissions in a row failing the same check
NOT_SUBMITTED = "&ndash;"  # a lesson's cell in the students' table, explained above it
MISTAKE_WORDS = {
    "not-graded": "not graded (the grading run ended first)",
    **{name: start for start, name in HARNESS_MISTAKES.items()},
}


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
    lessons: list[Lesson]
    scores: dict[str, list[float]]  # lesson -> each submission's points
    max_points: dict[str, float]
    checks: dict[str, list[CheckStats]]  # lesson -> its checks, most failed first
    stuck: list[Stuck]
    site: str
    # student -> lesson -> (points, max points); a lesson missing: not submitted
    students: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)

    def not_submitted(self, lesson: str) -> list[str]:
        return sorted(s for s, done in self.students.items() if lesson not in done)


def gather(course: Course, manifest: Manifest | None = None) -> ClassReport:
    """Read the gradebook and the history into the report's numbers."""
    from nbgrader.api import Gradebook
    from sqlalchemy import select

    from .release import course_site

    manifest = manifest or load_manifest()
    scores: dict[str, list[float]] = defaultdict(list)
    max_points: dict[str, float] = {}
    with Gradebook(course.db_url, course_id=COURSE_ID) as gb:
        names = {a.name for a in gb.assignments}
        students: dict[str, dict[str, tuple[float, float]]] = {s.id: {} for s in gb.students}
        for assignment in gb.assignments:
            max_points[assignment.name] = float(assignment.max_score)
            for sub in assignment.submissions:
                scores[assignment.name].append(float(sub.score))
                students.setdefault(sub.student.id, {})[assignment.name] = (
                    float(sub.score),
                    float(assignment.max_score),
                )
        HISTORY.create(gb.engine, checkfirst=True)
        rows = gb.db.execute(
            select(HISTORY).order_by(HISTORY.c.graded, HISTORY.c.fingerprint)
        ).fetchall()
    lessons = [lesson for lesson in manifest.lessons if lesson.slug in names]  # course order
    # Each student's submissions of a lesson: fingerprint -> check rows.
    history: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        history[(row.student, row.lesson)].setdefault(row.fingerprint, {})[row.check_id] = row
    checks: dict[str, list[CheckStats]] = {}
    stuck: list[Stuck] = []
    for lesson in lessons:
        stats = {c.id: CheckStats(c) for c in lesson.checks}
        for (student, slug), submissions in sorted(history.items()):
            if slug != lesson.slug:
                continue
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
        lessons, dict(scores), max_points, checks, stuck, course_site(course), students
    )


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

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; }
.notice { background: #fff3cd; border: 1px solid #e0c060; padding: .6rem 1rem; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; width: 100%; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #ddd;
         vertical-align: top; }
th.n, td.n { text-align: right; }
td.n, td.id { white-space: nowrap; }
td { overflow-wrap: anywhere; }
td.missing { color: #888; }
.scroll { overflow-x: auto; }  /* a wide table scrolls in its place, never widens the page */
img { max-width: 100%; }
"""


def render_html(report: ClassReport, manifest: Manifest) -> str:
    e = html.escape
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>What the class gets wrong (instructors only)</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>What the class gets wrong</h1>",
        "<p class='notice' id='instructors-only'><strong>For instructors only.</strong> This "
        "report names the hidden checks and what they test: do not share it with students.</p>",
    ]
    if not report.lessons:
        out.append("<p>No lesson has been autograded yet.</p>")
    for lesson in report.lessons:
        scores = report.scores.get(lesson.slug, [])
        most = report.max_points.get(lesson.slug, 0.0)
        stats = report.checks.get(lesson.slug, [])
        out.append(
            f"<section id='{e(lesson.slug)}'><h2>Lesson {lesson.number}: {e(lesson.title)}</h2>"
        )
        if not scores:
            out.append("<p>No submissions yet.</p></section>")
            continue
        mean = sum(scores) / len(scores)
        missing = report.not_submitted(lesson.slug)
        out.append(
            f"<p>{len(scores)} submission(s); mean {mean:.1f} of {most:g} points; "
            f"{sum(s >= most for s in scores)} with full marks.</p>"
            + (
                f"<p class='missing'>Not submitted ({len(missing)}): {e(', '.join(missing))}</p>"
                if missing
                else ""
            )
        )
        out.append(
            f"<img alt='points of {e(lesson.slug)}' "
            f"src='{plot_points(scores, most, f'{lesson.slug}: points')}'>"
        )
        if any(s.failed for s in stats):
            out.append(
                f"<img alt='checks failed in {e(lesson.slug)}' "
                f"src='{plot_failures(stats, f'{lesson.slug}: checks failed')}'>"
            )
        out.append(
            "<div class='scroll'><table><tr><th>check</th><th>function</th>"
            "<th class='n'>failed</th>"
            "<th>mistakes, most common first, with who made them</th>"
            "<th>not implemented yet</th></tr>"
        )
        for s in stats:
            if not s.students:
                continue
            link = report.site + s.check.url if report.site else s.check.link
            items = "".join(
                f"<li>{len(who)} &times; <strong>{e(key)}</strong>: "
                f"{e(mistake_text(s.check, key, manifest))} "
                f"(<a href='{e(link)}'>read</a>)<br><span class='who'>{e(', '.join(who))}"
                "</span></li>"
                for key, who in s.most_common()
            )
            out.append(
                f"<tr><td>{e(s.check.id)}{' (hidden)' if s.check.hidden else ''}</td>"
                f"<td>{e(s.check.function)}</td>"
                f"<td class='n'>{s.failed} of {s.students} ({100 * s.share:.0f}%)</td>"
                f"<td><ul>{items}</ul></td>"
                f"<td class='who'>{e(', '.join(s.not_implemented))}</td></tr>"
            )
        out.append("</table></div></section>")
    out += student_table(report)
    out.append("<section id='stuck'><h2>Students who are stuck</h2>")
    if report.stuck:
        out.append(
            f"<p>Failing the same check in their last {STUCK_AFTER} submissions or more.</p>"
            "<div class='scroll'><table><tr><th>student</th><th>lesson</th><th>check</th>"
            "<th class='n'>submissions failing it</th><th>latest mistake</th></tr>"
        )
        for stuck in report.stuck:
            out.append(
                f"<tr><td>{e(stuck.student)}</td><td>{e(stuck.lesson)}</td><td>{e(stuck.check)}</td>"
                f"<td class='n'>{stuck.attempts}</td><td>{e(stuck.mistake or '')}</td></tr>"
            )
        out.append("</table></div>")
    else:
        out.append("<p>Nobody: no check failed twice in a row by the same student.</p>")
    out.append("</section></body></html>\n")
    return "\n".join(out)


def student_table(report: ClassReport) -> list[str]:
    """A row per student, a column per lesson (course order): points, or not submitted."""
    if not report.students:
        return []
    e = html.escape
    out = [
        "<section id='students'><h2>Students</h2>",
        f"<p>Points per lesson; {NOT_SUBMITTED} not submitted.</p>",
        "<div class='scroll'><table><tr><th>student</th>",
        *(f"<th class='n'>{lesson.number}. {e(lesson.slug)}</th>" for lesson in report.lessons),
        "</tr>",
    ]
    for student, done in sorted(report.students.items()):
        cells = [
            f"<td class='n'>{done[lesson.slug][0]:g} of {done[lesson.slug][1]:g}</td>"
            if lesson.slug in done
            else f"<td class='n missing' title='not submitted'>{NOT_SUBMITTED}</td>"
            for lesson in report.lessons
        ]
        out.append(f"<tr><td class='id'>{e(student)}</td>{''.join(cells)}</tr>")
    out.append("</table></div></section>")
    return out


def mistake_rows(report: ClassReport, manifest: Manifest) -> list[dict[str, str]]:
    rows = []
    for lesson in report.lessons:
        for s in report.checks.get(lesson.slug, []):
            link = report.site + s.check.url if report.site else s.check.link
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
