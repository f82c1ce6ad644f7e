"""``python -m graders.instructor``: release, collect, autograde, feedback, export."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graders.instructor",
        description="nbgrader tooling for the course's instructors",
    )
    parser.add_argument(
        "--course",
        type=Path,
        default=None,
        help="the nbgrader course directory (default: build/nbgrader)",
    )
    # --course may come after the command too (`nox -s autograde -- --course DIR`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True)
    release = commands.add_parser(
        "release", parents=[common], help="build source/ and release/ from the manifest"
    )
    release.add_argument("lessons", nargs="*", metavar="LESSON")
    collect = commands.add_parser(
        "collect", parents=[common], help="zips in downloaded/LESSON/archive -> submitted/"
    )
    collect.add_argument("lessons", nargs="*", metavar="LESSON")
    auto = commands.add_parser(
        "autograde", parents=[common], help="grade, record, feedback and export"
    )
    auto.add_argument("lessons", nargs="*", metavar="LESSON")
    auto.add_argument(
        "--student",
        action="append",
        default=None,
        metavar="ID",
        help="only this student (repeatable)",
    )
    auto.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="submissions graded at once (default: 2)",
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
    auto.add_argument(
        "--no-collect",
        dest="collect",
        action="store_false",
        help="skip zip_collect of downloaded/LESSON/archive",
    )
    auto.add_argument("--no-feedback", dest="feedback", action="store_false")
    auto.add_argument("--no-export", dest="export", action="store_false")
    feedback = commands.add_parser(
        "feedback", parents=[common], help="feedback HTML (hidden tests stripped)"
    )
    feedback.add_argument("lessons", nargs="*", metavar="LESSON")
    export = commands.add_parser(
        "export", parents=[common], help="grades.csv and grades-by-check.csv"
    )
    export.add_argument("--to", type=Path, default=None, help="folder (default: the course)")
    one = commands.add_parser("grade-submission", parents=[common], help=argparse.SUPPRESS)
    one.add_argument("--student", required=True)
    one.add_argument("--lesson", required=True)
    one.add_argument("--from", dest="submission", type=Path, default=None)
    one.add_argument("--results", type=Path, default=None)
    one.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    args = parser.parse_args(argv)

    from .course import Course

    course = Course.at(args.course)
    if args.command == "release":
        from .release import release as run

        for slug in run(course, args.lessons or None):
            print(f"released {slug}: {course.release / slug}")
        return 0
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
        return 0
    if not course.lessons():
        print(
            f"error: nothing released in {course.root}: run `nox -s release` first", file=sys.stderr
        )
        return 2
    if args.command == "collect" or (args.command == "autograde" and args.collect):
        for lesson, students in pipeline.collect(course, args.lessons or None).items():
            print(f"collected {lesson}: {len(students)} submission(s)")
    if args.command == "autograde":
        extra = {"timeout": args.timeout} if args.timeout else {}
        outcomes = pipeline.autograde(
            course,
            args.lessons or None,
            args.student,
            workers=args.workers,
            sandbox=args.sandbox,
            **extra,
        )
        if not outcomes:
            print(f"no submissions in {course.submitted}")
        failed = [o for o in outcomes if not (o.recorded and o.graded)]
        print(
            f"autograded {len(outcomes) - len(failed)} of {len(outcomes)} submission(s); "
            f"gradebook: {course.gradebook}"
        )
        for o in failed:
            print(
                f"  grading failed: {o.student}/{o.lesson}: {'; '.join(o.notes)} (re-run: "
                f"nox -s autograde -- {o.lesson} --student {o.student})",
                file=sys.stderr,
            )
        status = 1 if failed else 0
    else:
        status = 0
    if args.command == "feedback" or (args.command == "autograde" and args.feedback):
        made = pipeline.feedback(course, args.lessons or None)
        print(f"feedback: {len(made)} file(s) in {course.feedback}")
    if args.command == "export" or (args.command == "autograde" and args.export):
        for path in pipeline.export(course, getattr(args, "to", None)):
            print(f"exported {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
