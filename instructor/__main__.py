"""``python -m instructor``: release, collect, autograde, regrade, feedback, export, report,
gradescope, similarity; one function per command (:data:`COMMANDS`).

Exit status, the same for every command:

- 0 (``OK``): it ran. Submissions that could not be graded (an unreadable zip, a student id with
  other characters, a lesson that is not released) were skipped, each named in one line.
- 1 (``FAILED``): a grading run failed on its own, not by the student's doing; each is listed
  with the command that re-runs it.
- 2 (``USAGE``): it did not run: a bad option, an unknown or unreleased lesson, a gradebook of
  another course; one line says which.
- 3 (``SKIPPED``): with ``--strict``, what 0 is when a submission was skipped.
- 130 (``INTERRUPTED``): stopped by Ctrl-C; what was recorded stays, a rerun does the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.cli import Parser, no_fork_here

if TYPE_CHECKING:
    from .autograde import Outcome
    from .course import Course


OK, FAILED, USAGE, SKIPPED, INTERRUPTED = 0, 1, 2, 3, 130


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        prog="python -m instructor",
        description="nbgrader tooling for the course's instructors",
    )
    # --course and --gradebook may come after the command too (`nox -s autograde -- --course D`).
    common = Parser(add_help=False)
    for where in (parser, common):
        hide = where is common
        where.add_argument(
            "--course",
            type=Path,
            default=argparse.SUPPRESS if hide else None,
            help=argparse.SUPPRESS
            if hide
            else "the nbgrader course folder (default: build/nbgrader)",
        )
        where.add_argument(
            "--gradebook",
            metavar="URL",
            default=argparse.SUPPRESS if hide else None,
            help=argparse.SUPPRESS
            if hide
            else "the gradebook's SQLAlchemy URL, e.g. postgresql+psycopg://HOST/DB (default: "
            "$COURSE_GRADEBOOK_URL, else the one the course was released into, else "
            "COURSE/gradebook.db)",
        )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    release = commands.add_parser(
        "release", parents=[common], help="build source/ and release/ from the manifest"
    )
    release.add_argument("lessons", nargs="*", metavar="LESSON")
    release.add_argument(
        "--site-url",
        default=None,
        metavar="URL",
        help="the course site the notebooks, hints and feedback link to, recorded in the "
        "course folder at the first release and kept (default: the recorded one, else "
        "$COURSE_SITE_URL; the first release needs one)",
    )
    collect = commands.add_parser(
        "collect", parents=[common], help="zips in downloaded/LESSON/archive -> submitted/"
    )
    collect.add_argument("lessons", nargs="*", metavar="LESSON")
    strict = "exit with status 3 when a submission was skipped (0 otherwise)"
    collect.add_argument("--strict", action="store_true", help=strict)
    auto = commands.add_parser(
        "autograde", parents=[common], help="collect, grade, record, feedback and export"
    )
    auto.add_argument("lessons", nargs="*", metavar="LESSON")
    auto.add_argument("--strict", action="store_true", help=strict)
    auto.add_argument(
        "--student", action="append", default=None, metavar="ID", help="only this student"
    )
    auto.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="submissions graded at once on this machine (default: 2)",
    )
    auto.add_argument(
        "--engine",
        choices=["dask", "threads"],
        default="dask",
        help="dask: Dask distributed (a local cluster, or --scheduler's); threads: no Dask",
    )
    auto.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="grade on this Dask cluster (tcp://HOST:8786) instead of a local one",
    )
    auto.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="give up when the cluster has had no worker this long (default: 300)",
    )
    auto.add_argument(
        "--all",
        action="store_true",
        help="grade every submission again, not only those new or changed since their grade",
    )
    regrade = commands.add_parser(
        "regrade",
        parents=[common],
        help="grade a submission again as it was graded (its files, its secret seed)",
    )
    regrade.add_argument(
        "--reproduce",
        nargs=2,
        required=True,
        metavar=("STUDENT", "LESSON"),
        help="the submission whose recorded grading to reproduce",
    )
    for where in (auto, regrade):
        where.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="seconds for one submission's grading run (default: 900)",
        )
        where.add_argument(
            "--no-sandbox",
            dest="sandbox",
            action="store_false",
            help="run student code without the sandbox (trusted submissions only)",
        )
    auto.add_argument("--no-collect", dest="collect", action="store_false")
    auto.add_argument("--no-feedback", dest="feedback", action="store_false")
    auto.add_argument("--no-export", dest="export", action="store_false")
    auto.add_argument("--report", action="store_true", help="write the class report as well")
    feedback = commands.add_parser(
        "feedback", parents=[common], help="feedback HTML (hidden tests stripped)"
    )
    feedback.add_argument("lessons", nargs="*", metavar="LESSON")
    export = commands.add_parser(
        "export", parents=[common], help="grades.csv and grades-by-check.csv"
    )
    export.add_argument("--to", type=Path, default=None, help="folder (default: the course)")
    export.add_argument(
        "--format",
        choices=["nbgrader", "canvas", "moodle"],
        default="nbgrader",
        help="nbgrader: grades.csv and grades-by-check.csv; canvas or moodle: "
        "grades-canvas.csv or grades-moodle.csv, for the LMS's gradebook import",
    )
    export.add_argument(
        "--canvas-assignment",
        action="append",
        default=[],
        metavar="LESSON=ID",
        help="the Canvas assignment a lesson's grades fill (the ID in its address); "
        "without it Canvas offers to create an assignment named LESSON",
    )
    report = commands.add_parser(
        "report", parents=[common], help="what the class gets wrong: mistakes.html and .csv"
    )
    report.add_argument("--to", type=Path, default=None, help="folder (default: the course)")
    gradescope = commands.add_parser(
        "gradescope", parents=[common], help="a released lesson as a Gradescope autograder zip"
    )
    gradescope.add_argument("lessons", nargs="+", metavar="LESSON")
    gradescope.add_argument(
        "--to", type=Path, default=None, help="folder (default: COURSE/gradescope)"
    )
    similar = commands.add_parser(
        "similarity", parents=[common], help="similar submissions of a lesson (HTML, staff only)"
    )
    similar.add_argument("lessons", nargs="+", metavar="LESSON")
    similar.add_argument("--to", type=Path, default=None, help="folder (default: COURSE/reports)")
    one = commands.add_parser("grade-submission", parents=[common], help=argparse.SUPPRESS)
    one.add_argument("--student", required=True)
    one.add_argument("--lesson", required=True)
    one.add_argument("--from", dest="submission", type=Path, default=None)
    one.add_argument("--results", type=Path, default=None)
    one.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    unsupported = no_fork_here(f"python -m instructor {args.command}")
    if unsupported and args.command in ("release", "autograde", "regrade", "grade-submission"):
        print(unsupported, file=sys.stderr)  # a release grades the reference to record answers
        return USAGE
    from .course import Course
    from .errors import SetupError

    course = Course.at(args.course, args.gradebook)
    try:
        return COMMANDS[args.command](args, course)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(
            f"interrupted: {args.command} stopped; what it recorded stays and its temporary "
            "folders are removed; run it again to finish",
            file=sys.stderr,
        )
        return INTERRUPTED


def release(args: argparse.Namespace, course: Course) -> int:
    from core.manifest import load_manifest

    from .errors import SetupError
    from .release import NoSiteError, course_site, is_local, recorded_site, release

    manifest = load_manifest()
    for name in args.lessons:
        try:
            manifest.lesson(name)
        except KeyError as unknown:
            raise SetupError(unknown.args[0]) from None
    before = recorded_site(course)
    try:
        built = release(course, args.lessons or None, site=args.site_url)
    except NoSiteError as error:
        raise SetupError(str(error)) from None
    for slug in built:
        print(f"released {slug}: {course.release / slug}")
    print(f"gradebook: {course.gradebook_name()} (later commands use it without --gradebook)")
    site = course_site(course)
    if before and before != site:
        print(f"site: {site} (was {before}: every lesson released from now on links here)")
    else:
        print(f"site: {site} (kept for later releases; --site-url URL changes it)")
    if is_local(site):
        print(
            f"note: the notebooks link to {site}, which only a student serving the site "
            "can open; publish the site and release with --site-url URL"
        )
    return OK


def grade_submission(args: argparse.Namespace, course: Course) -> int:
    from .autograde import grade_one

    grade_one(
        course,
        args.student,
        args.lesson,
        submission=args.submission,
        results=args.results,
        sandbox=args.sandbox,
    )
    return OK


def released_lessons(args: argparse.Namespace, course: Course) -> list[str] | None:
    """The lessons a command works on (None: every released one), refusing lessons that were
    never released."""
    from .errors import SetupError

    released = course.lessons()
    if not released:
        raise SetupError(f"nothing released in {course.root}: run `nox -s release` first")
    lessons = getattr(args, "lessons", None) or None
    unknown = [lesson for lesson in lessons or [] if lesson not in released]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], released, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise SetupError(
            f"{unknown[0]!r} is not a released lesson ({guess}released: {', '.join(released)})"
        )
    return lessons


def collect(args: argparse.Namespace, course: Course) -> int:
    passed_over = collect_lessons(course, released_lessons(args, course))
    return SKIPPED if passed_over and args.strict else OK


def collect_lessons(course: Course, lessons: list[str] | None) -> bool:
    """Collect, saying what was found; whether a zip was skipped."""
    from .collect import collect

    found, problems, notes = collect(course, lessons)
    for line in problems:
        print(line, file=sys.stderr)
    for line in notes:
        print(line)
    for lesson, students in found.items():
        skipped = sum(line.startswith(f"skipped downloaded/{lesson}/") for line in problems)
        print(
            f"collected {lesson}: {len(students)} submission(s)"
            + (f", {skipped} file(s) skipped (each named above)" if skipped else "")
        )
    return bool(problems)


def rerun_line(outcome: Outcome, options: Sequence[str] = ()) -> str:
    """A submission autograde could not grade or record, with the command that retries it
    (with ``options``: how this run was told where to grade, see :func:`rerun_options`)."""
    command = " ".join(
        ["nox -s autograde --", outcome.lesson, "--student", outcome.student, *options]
    )
    return (
        f"grading failed: {outcome.student}/{outcome.lesson}: {'; '.join(outcome.notes)} "
        f"(re-run: {command})"
    )


def rerun_options(args: argparse.Namespace) -> list[str]:
    """The options of this autograde that a rerun needs to grade the same way, in the same
    place (the course, the gradebook's URL only when given as an option: it may hold a
    password)."""
    import shlex

    given: list[str] = []
    if args.course is not None:
        given += ["--course", str(args.course)]
    if args.engine != "dask":
        given += ["--engine", args.engine]
    if args.scheduler:
        given += ["--scheduler", args.scheduler]
    if args.timeout:
        given += ["--timeout", f"{args.timeout:g}"]
    if not args.sandbox:
        given.append("--no-sandbox")
    return [shlex.quote(word) for word in given]


def autograde(args: argparse.Namespace, course: Course) -> int:
    from . import autograde as pipeline

    lessons = released_lessons(args, course)
    course.check_gradebook()  # this course's, before anything is collected
    # before collect: a second run changes nothing
    with stopped_by_sigterm(), pipeline.course_lock(course):
        return _autograde(args, course, lessons)


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """A kill (SIGTERM) stops the command as Ctrl-C does: its grading runs are stopped and its
    scratch folders (student code) and lock removed, which Python's default for SIGTERM skips.
    Only in the main thread, where a signal handler may be set."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _autograde(args: argparse.Namespace, course: Course, lessons: list[str] | None) -> int:
    from . import autograde as pipeline

    passed_over = collect_lessons(course, lessons) if args.collect else False
    jobs, problems = pipeline.find_jobs(course, lessons, args.student)
    course.check_gradebook({lesson for _, lesson in jobs})
    for line in problems:
        print(line, file=sys.stderr)
    waiting = {lesson for _, lesson in jobs}
    idle = [lesson for lesson in lessons or course.lessons() if lesson not in waiting]
    if idle:
        print(f"no submissions for {', '.join(idle)}: skipped")
    if not args.all:
        jobs, current = pipeline.changed_jobs(course, jobs)
        if current:
            print(
                f"{len(current)} submission(s) unchanged since their grade (their files and "
                "the graders): not graded again (--all grades them again)"
            )
        regraded = pipeline.graded_by_other_graders(course, jobs)
        if regraded:
            print(
                f"{len(regraded)} submission(s) graded again: the graders changed since their grade"
            )
    extra = {"timeout": args.timeout} if args.timeout else {}
    if args.wait is not None:
        extra["wait"] = args.wait
    outcomes = pipeline.autograde(
        course,
        jobs=jobs,
        workers=args.workers,
        sandbox=args.sandbox,
        engine=args.engine,
        scheduler=args.scheduler,
        **extra,
    )
    failed = [o for o in outcomes if not (o.recorded and o.graded)]
    print(
        f"autograded {len(outcomes) - len(failed)} of {len(outcomes)} submission(s); "
        f"gradebook: {course.gradebook_name()}"
    )
    for outcome in failed:
        print(rerun_line(outcome, rerun_options(args)), file=sys.stderr)
    if args.feedback:
        make_feedback(course, lessons)
    if args.export:
        export_grades(course, None)
    if args.report:
        write_report(course, None)
    if failed:
        return FAILED
    return SKIPPED if (passed_over or problems) and args.strict else OK


def regrade(args: argparse.Namespace, course: Course) -> int:
    from graders.notebook import render

    from .regrade import reproduce
    from .release import course_site

    student, lesson = args.reproduce
    released_lessons(argparse.Namespace(lessons=[lesson]), course)
    extra = {"timeout": args.timeout} if args.timeout else {}
    done = reproduce(course, student, lesson, sandbox=args.sandbox, **extra)
    for row in done.rows:
        print(render(row, autograde=False, site=course_site(course))[0], end="")
    if done.differences:
        print(f"{student}/{lesson}: NOT reproduced; differences from the grading of {done.graded}:")
        for line in done.differences:
            print(f"  {line}")
        return FAILED
    print(
        f"{student}/{lesson}: reproduced: the same points and messages as the grading of "
        f"{done.graded}"
    )
    return OK


def feedback(args: argparse.Namespace, course: Course) -> int:
    make_feedback(course, released_lessons(args, course))
    return OK


def make_feedback(course: Course, lessons: list[str] | None) -> None:
    from .feedback import feedback

    made, skipped = feedback(course, lessons)
    if skipped:
        print(f"no autograded submissions for {', '.join(skipped)}: no feedback")
    print(f"feedback: {len(made)} file(s) in {course.feedback}")


def export(args: argparse.Namespace, course: Course) -> int:
    released_lessons(args, course)
    course.check_gradebook(course.lessons())
    if args.format == "nbgrader":
        export_grades(course, args.to)
        return OK
    from .lms_export import export_lms, parse_assignment_ids

    path, warnings = export_lms(
        course, args.format, args.to, parse_assignment_ids(args.canvas_assignment)
    )
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(
        f"exported {path} (late penalties applied; import it in {args.format.title()}'s gradebook)"
    )
    return OK


def export_grades(course: Course, to: Path | None) -> None:
    from .export import export

    for path in export(course, to):
        print(f"exported {path}")


def report(args: argparse.Namespace, course: Course) -> int:
    course.check_gradebook(course.lessons())
    write_report(course, args.to)
    return OK


def write_report(course: Course, to: Path | None) -> None:
    from .class_report import write_report

    for path in write_report(course, to):
        print(f"wrote {path}")


def gradescope(args: argparse.Namespace, course: Course) -> int:
    from .gradescope import build

    for lesson in released_lessons(args, course) or []:
        print(
            f"wrote {build(course, lesson, args.to)} (instructors only: it holds the hidden "
            "graders)"
        )
    return OK


def similarity(args: argparse.Namespace, course: Course) -> int:
    from .similarity import DISPLAY_AT, compare

    for lesson in released_lessons(args, course) or []:
        path, pairs = compare(course, lesson, args.to)
        for pair in [p for p in pairs if p.share >= DISPLAY_AT][:5]:
            print(f"{lesson}: {pair.first} and {pair.second}: {pair.share:.0%} similar")
        print(f"wrote {path} (instructors only: it names students)")
    return OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Course], int]] = {
    "release": release,
    "collect": collect,
    "autograde": autograde,
    "regrade": regrade,
    "feedback": feedback,
    "export": export,
    "report": report,
    "gradescope": gradescope,
    "similarity": similarity,
    "grade-submission": grade_submission,
}


def with_console_scripts() -> None:
    """This process's PATH with its environment's console scripts: nbgrader runs ``alembic``
    to create a gradebook. Only the command's own process; :func:`main` changes no
    environment, for callers that run it in theirs."""
    scripts = os.path.dirname(sys.executable)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])


if __name__ == "__main__":
    with_console_scripts()
    sys.exit(main())
