"""``python -m instructor``: release, collect, autograde, feedback, export, report.

Exit status, the same for every command:

- 0 (``OK``): it ran. Submissions that could not be graded (an unreadable zip, a student id with
  other characters, a lesson that is not released) were skipped, each named in one line.
- 1 (``FAILED``): a grading run failed on its own, not by the student's doing; each is listed
  with the command that re-runs it.
- 2 (``USAGE``): it did not run: a bad option, an unknown or unreleased lesson, a gradebook of
  another course; one line says which.
- 3 (``SKIPPED``): with ``--strict``, what 0 is when a submission was skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from core.cli import Parser, no_fork_here

OK, FAILED, USAGE, SKIPPED = 0, 1, 2, 3


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        prog="python -m instructor",
        description="nbgrader tooling for the course's instructors",
    )
    # --course and --gradebook may come after the command too (`nox -s autograde -- --course D`).
    common = argparse.ArgumentParser(add_help=False)
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
            "$COURSE_GRADEBOOK_URL, else COURSE/gradebook.db)",
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
        help="the course site the notebooks link to (default: $COURSE_SITE_URL, else "
        "mkdocs.yml's site_url, http://127.0.0.1:8000/)",
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
        "--timeout",
        type=float,
        default=None,
        help="seconds for one submission's grading run (default: 900)",
    )
    auto.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="run student code without the sandbox (trusted submissions only)",
    )
    auto.add_argument("--no-collect", dest="collect", action="store_false")
    auto.add_argument("--no-feedback", dest="feedback", action="store_false")
    auto.add_argument("--no-export", dest="export", action="store_false")
    auto.add_argument(
        "--report", action="store_true", help="write the class mistakes report as well"
    )
    feedback = commands.add_parser(
        "feedback", parents=[common], help="feedback HTML (hidden tests stripped)"
    )
    feedback.add_argument("lessons", nargs="*", metavar="LESSON")
    export = commands.add_parser(
        "export", parents=[common], help="grades.csv and grades-by-check.csv"
    )
    export.add_argument("--to", type=Path, default=None, help="folder (default: the course)")
    report = commands.add_parser(
        "report", parents=[common], help="what the class gets wrong: mistakes.html and .csv"
    )
    report.add_argument("--to", type=Path, default=None, help="folder (default: the course)")
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
    if unsupported and args.command in ("release", "autograde", "grade-submission"):
        print(unsupported, file=sys.stderr)  # a release grades the reference to record answers
        return USAGE
    if args.gradebook:
        from .course import GRADEBOOK_ENV

        os.environ[GRADEBOOK_ENV] = args.gradebook  # nbgrader's own steps read it too
    from .course import Course, SetupError

    course = Course.at(args.course)
    try:
        return run(args, course)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE


def run(args: argparse.Namespace, course: object) -> int:
    from .course import Course

    assert isinstance(course, Course)
    if args.command == "release":
        from core.manifest import load_manifest

        from .release import is_local, release

        manifest = load_manifest()
        for name in args.lessons:
            try:
                manifest.lesson(name)
            except KeyError as unknown:
                print(f"error: {unknown.args[0]}", file=sys.stderr)
                return USAGE

        built = release(course, args.lessons or None, site=args.site_url)
        for slug in built:
            print(f"released {slug}: {course.release / slug}")
        from .release import course_site

        site = course_site(course)
        if is_local(site):
            print(
                f"note: the notebooks link to {site}, which only a student serving the site "
                "can open; publish the site and release with --site-url URL "
                "(or COURSE_SITE_URL)"
            )
        return OK
    from . import autograde as pipeline

    if args.command == "grade-submission":
        pipeline.grade_one(
            course,
            args.student,
            args.lesson,
            submission=args.submission,
            results=args.results,
            sandbox=args.sandbox,
        )
        return OK
    released = course.lessons()
    if not released and args.command != "report":
        print(
            f"error: nothing released in {course.root}: run `nox -s release` first", file=sys.stderr
        )
        return USAGE
    lessons = getattr(args, "lessons", None) or None
    unknown = [lesson for lesson in lessons or [] if lesson not in released]
    if unknown:
        print(
            f"error: {unknown[0]!r} is not a released lesson (released: {', '.join(released)})",
            file=sys.stderr,
        )
        return USAGE
    passed_over = failed = False  # a submission skipped; a grading run failed
    if args.command == "collect" or (args.command == "autograde" and args.collect):
        from .collect import collect

        found, problems = collect(course, lessons)
        for line in problems:
            print(line, file=sys.stderr)
        for lesson, students in found.items():
            print(f"collected {lesson}: {len(students)} submission(s)")
        passed_over = bool(problems)
    if args.command == "autograde":
        from .course import check_gradebook

        jobs, problems = pipeline.find_jobs(course, lessons, args.student)
        check_gradebook(course, released, {lesson for _, lesson in jobs})
        for line in problems:
            print(line, file=sys.stderr)
        waiting = {lesson for _, lesson in jobs}
        idle = [lesson for lesson in lessons or released if lesson not in waiting]
        if idle:
            print(f"no submissions for {', '.join(idle)}: skipped")
        extra = {"timeout": args.timeout} if args.timeout else {}
        outcomes = pipeline.autograde(
            course,
            jobs=jobs,
            workers=args.workers,
            sandbox=args.sandbox,
            engine=args.engine,
            scheduler=args.scheduler,
            **extra,
        )
        lost = [o for o in outcomes if not (o.recorded and o.graded)]
        print(
            f"autograded {len(outcomes) - len(lost)} of {len(outcomes)} submission(s); "
            f"gradebook: {course.gradebook_name()}"
        )
        for o in lost:
            print(
                f"grading failed: {o.student}/{o.lesson}: {'; '.join(o.notes)} (re-run: "
                f"nox -s autograde -- {o.lesson} --student {o.student})",
                file=sys.stderr,
            )
        failed, passed_over = bool(lost), passed_over or bool(problems)
    if args.command == "feedback" or (args.command == "autograde" and args.feedback):
        made, skipped = pipeline.feedback(course, lessons)
        if skipped:
            print(f"no autograded submissions for {', '.join(skipped)}: no feedback")
        print(f"feedback: {len(made)} file(s) in {course.feedback}")
    if args.command == "export" or (args.command == "autograde" and args.export):
        from .export import export

        for path in export(course, getattr(args, "to", None)):
            print(f"exported {path}")
    if args.command == "report" or (args.command == "autograde" and args.report):
        from .mistakes import write_report

        for path in write_report(course, getattr(args, "to", None)):
            print(f"wrote {path}")
    if failed:
        return FAILED
    return SKIPPED if passed_over and getattr(args, "strict", False) else OK


if __name__ == "__main__":
    sys.exit(main())
