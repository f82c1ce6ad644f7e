"""``python -m graders``: grade the exercises and print points, hints and links.

    python -m graders                        # every lesson's public checks, on exercises/
    python -m graders embeddings windows     # some lessons
    python -m graders --target solutions     # another package directory
    python -m graders --hidden               # instructors: the hidden checks too
    python -m graders --watch windows        # grade again on every save, until Ctrl-C
    python -m graders windows --zip          # the submission: windows-submission.zip

Exit status 0 whenever grading ran, whatever the score (1 with --strict when a check failed);
2 with a one-line error when it could not (unknown lesson, a --target without the modules,
hidden graders not installed, a package this Python lacks: what to install).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.cli import Parser, no_fork_here

if TYPE_CHECKING:
    from .pool import WorkerPool


def parse(argv: list[str] | None) -> argparse.Namespace:
    from .runner import DEFAULT_REPORT

    parser = Parser(
        prog="python -m graders",
        description="Grade the course's exercises: points, a hint per failed check, and a "
        "link to the lesson section that explains it.",
    )
    parser.add_argument(
        "lessons",
        nargs="*",
        metavar="LESSON",
        help="lessons to grade, by slug or number (default: all)",
    )
    parser.add_argument(
        "--target",
        type=Path,
        default=None,
        help="the directory holding the exercise modules (default: exercises/)",
    )
    parser.add_argument(
        "--hidden", action="store_true", help="run the hidden checks as well (instructors)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"where to write the JSON report (default: {DEFAULT_REPORT})",
    )
    parser.add_argument(
        "--sandbox", action="store_true", help="run the student's code in the sandbox"
    )
    parser.add_argument(
        "--seed-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="read the secret seed of the checks' inputs from this file (instructors; "
        "instead of COURSE_INPUT_SEED)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 unless every check passed"
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="stay up and grade again, on every save, the lessons whose files changed "
        "(Ctrl-C stops)",
    )
    parser.add_argument(
        "--zip",
        action="store_true",
        help="grade nothing: write LESSON-submission.zip (the lesson's module and notebook, "
        "what you submit) in the lesson folder",
    )
    args = parser.parse_args(argv)
    if args.watch and args.strict:
        parser.error("--strict needs a grading that ends; leave it out with --watch")
    if args.zip and (len(args.lessons) != 1 or args.watch):
        parser.error("--zip makes one lesson's submission: python -m graders LESSON --zip")
    return args


def submit(lesson: str) -> int:
    """``--zip``: write the lesson's submission and say what it holds."""
    from .submission import SubmissionError, make_submission, submission_files

    try:
        path = make_submission(lesson)
    except SubmissionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    held = ", ".join(submission_files(lesson))
    print(f"wrote {path} ({held}): submit this file")
    return 0


def _traces(lessons: list[str] | None, target: Path) -> bool | None:
    """Whether a chosen lesson has a function graded on its operator graph (its worker readies
    the tracer while this process starts); None when a name or the target is bad, which the
    grading reports before any worker could serve it."""
    from core.manifest import load_manifest

    from .runner import GradingError, check_target, select_lessons

    try:
        chosen = select_lessons(load_manifest(), lessons)
        check_target(target, chosen)
    except GradingError:
        return None
    return any(lesson.traces for lesson in chosen)


def main(argv: list[str] | None = None, pool: WorkerPool | None = None) -> int:
    """The command line; ``pool`` holds the grading's workers (graders/pool.py; default: the
    process-wide one, so a process that grades again reuses the worker it kept)."""
    args = parse(argv)
    if args.zip:
        return submit(args.lessons[0])
    try:
        return grade_and_print(args, pool)
    except ModuleNotFoundError as error:  # the student's environment lacks a package
        from .where import missing_module

        print(f"error: {missing_module(error)}", file=sys.stderr)
        return 2


def grade_and_print(args: argparse.Namespace, pool: WorkerPool | None = None) -> int:
    unsupported = no_fork_here("grading")
    if unsupported:
        print(unsupported, file=sys.stderr)
        return 2
    from .pool import default_pool
    from .runner import DEFAULT_REPORT, DEFAULT_TARGET, GradingError, grade
    from .seed import seed_from_environment, seed_from_file

    try:
        # instructor autograde's secret (a file where the worker runs as another user), else
        # public; read (and taken out of the environment) before any worker starts
        input_seed = seed_from_file(args.seed_file) if args.seed_file else seed_from_environment()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # The worker starts now and imports torch while this process does, unless the pool keeps
    # one that will serve (graders/pool.py).
    pool = pool if pool is not None else default_pool()
    target = args.target if args.target is not None else DEFAULT_TARGET
    traces = _traces(args.lessons, target)
    if traces is not None:
        pool.start_early(target, sandbox=args.sandbox, trace=traces)
    from rich.console import Console

    from .terminal import Ticker, render_total

    # A console on its own copy of standard output: pytest's output capture does not touch it.
    console = Console(
        file=os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8"), highlight=False
    )
    json_path = args.json if args.json is not None else DEFAULT_REPORT
    ticker = Ticker(console)
    options: dict[str, Any] = {
        "hidden": args.hidden,
        "json_path": json_path,
        "sandbox": args.sandbox,
        "on_lesson": ticker.lesson,
        "on_check": ticker.check,
        "input_seed": input_seed,
        "pool": pool,
    }
    try:
        if args.watch:
            from .watch import watch

            return watch(args.target, args.lessons, console=console, ticker=ticker, **options)
        report = grade(args.target, lessons=args.lessons, **options)
    except GradingError as error:
        ticker.stop()
        console.file.flush()
        lines = str(error).splitlines() or ["grading failed"]
        print(f"error: {lines[0]}", file=sys.stderr)
        if len(lines) > 1:
            print("\n".join(lines[1:]), file=sys.stderr)
        return 2
    finally:
        ticker.stop()  # a grading that ended mid-lesson leaves no line behind
    render_total(console, report)
    console.print(f"[dim]report: {json_path}[/dim]")
    console.file.flush()
    full = report["complete"] and report["points"] == report["max_points"]
    return 1 if args.strict and not full else 0


if __name__ == "__main__":
    sys.exit(main())
