"""``autograde``: grade every submission in parallel, record it with nbgrader, one writer.

Two stages, overlapped:

1. *Grading* (parallel, ``--workers`` at a time; no gradebook access): for each submission
   ``submitted/STUDENT/LESSON/``, the package as graded (:func:`notebook.student_files`: the
   released package with the student's lesson module) is copied to a private temporary folder
   and graded by the harness, ``python -m graders LESSON --target ... --hidden --sandbox
   --json ...``, in a process of its own with a wall-clock limit; its report (complete, or as
   far as it got: the harness rewrites it after every check) lands in
   ``results/STUDENT/LESSON.json`` with a fingerprint of the graded files.
2. *Recording* (this process only, one submission at a time, as soon as each is graded):
   nbgrader's own autograde (``NbGraderAPI.autograde``) copies the submission to
   ``autograded/``, rebuilds the notebook from the gradebook and executes it; each test cell
   reads its check's points from the report (after checking the fingerprint), and nbgrader's
   SaveAutoGrades writes them to the SQLite gradebook. Only this thread ever opens the
   gradebook, and a lock file keeps a second ``autograde`` off the same course directory.

A timeout, crash or hostile submission costs only the checks it affects (the harness fails
those checks and goes on); a submission whose grading run died outright keeps the checks its
report already holds and gets 0 for the rest. Then ``generate_feedback`` and the exports.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.manifest import ROOT, load_manifest

from .course import PACKAGE, Course, api
from .notebook import fingerprint, student_files

DEFAULT_TIMEOUT = 900.0  # seconds for one submission's grading run (all its checks)
ATTEMPTS = 2  # a grading run that graded nothing at all is tried again once


@dataclass
class Outcome:
    student: str
    lesson: str
    graded: bool = False  # the harness produced a report
    recorded: bool = False  # nbgrader wrote the grades
    points: float = 0.0
    max_points: float = 0.0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


# -- stage 1: grading ---------------------------------------------------------------------------


def sanitize_submission(course: Course, student: str, lesson: str) -> list[str]:
    """Remove symbolic links and special files from a submission (nbgrader would follow a link
    to, say, solutions/ when copying it to autograded/), and give a submission without the
    notebook the released one (the notebook is rebuilt from the gradebook anyway)."""
    notes = []
    folder = course.submitted / student / lesson
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                path.unlink()
                notes.append(f"removed {path.relative_to(folder)} (not a regular file)")
        dirs[:] = [d for d in dirs if (Path(root) / d).is_dir()]
    notebook = folder / f"{lesson}.ipynb"
    if not notebook.is_file():
        shutil.copyfile(course.release / lesson / f"{lesson}.ipynb", notebook)
        notes.append("no notebook submitted: the released one was used")
    return notes


def grade_one(
    course: Course,
    student: str,
    lesson: str,
    *,
    submission: Path | None = None,
    results: Path | None = None,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict:
    """Grade one submission with the harness; write and return results/STUDENT/LESSON.json."""
    manifest = load_manifest()
    module = manifest.lesson(lesson).module
    submission = submission or course.submitted / student / lesson
    results = results or course.results
    files = student_files(course.source / lesson / PACKAGE, submission / PACKAGE, module)
    digest = fingerprint(files)
    out = results / student
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    error = None
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        target = Path(tmp) / PACKAGE
        for rel, path in files.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / rel)
        for root, _dirs, names in os.walk(tmp):  # readable by the sandbox's own user
            os.chmod(root, 0o755)
            for name in names:
                os.chmod(Path(root) / name, 0o644)
        report_path = Path(tmp) / "report.json"
        command = [
            sys.executable,
            "-m",
            "graders",
            lesson,
            "--target",
            str(target),
            "--hidden",
            "--json",
            str(report_path),
        ] + (["--sandbox"] if sandbox else [])
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH",)}
        env["PYTHONPATH"] = str(ROOT)
        for attempt in range(1, ATTEMPTS + 1):
            error, report = None, None
            with open(out / f"{lesson}.log", "ab" if attempt > 1 else "wb") as log:
                try:
                    proc = subprocess.run(
                        command,
                        cwd=ROOT,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        timeout=timeout,
                        start_new_session=True,
                    )
                    if proc.returncode != 0:
                        error = f"the grading run exited with status {proc.returncode}"
                except subprocess.TimeoutExpired:
                    error = f"the grading run took longer than {timeout:g} s and was stopped"
            try:
                report = json.loads(report_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                report = None
            # A run that graded nothing failed for reasons of its own (the worker could not
            # start, the machine was out of memory): that is not the student's doing.
            if error is None or "took longer" in error or _graded_any(report):
                break
    if report is None:
        error = error or "the grading run left no report"
        report = {"lessons": [], "points": 0, "max_points": 0, "complete": False}
    result = {
        "student": student,
        "lesson": lesson,
        "fingerprint": digest,
        "error": error,
        "seconds": round(time.monotonic() - started, 2),
        "report": report,
    }
    _write_json(out / f"{lesson}.json", result)
    return result


def _graded_any(report: dict | None) -> bool:
    rows = [row for lesson in (report or {}).get("lessons", []) for row in lesson["checks"]]
    return any(row.get("passed") or row.get("detail") != "not graded" for row in rows)


def _write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# -- stage 2: recording, and the whole run -------------------------------------------------------


@contextlib.contextmanager
def course_lock(course: Course) -> Iterator[None]:
    """One autograde at a time per course directory (the gradebook has one writer)."""
    course.root.mkdir(parents=True, exist_ok=True)
    with open(course.root / ".autograde.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another autograde is running on {course.root}") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record(nbgrader: Any, course: Course, outcome: Outcome) -> None:
    """nbgrader autograde for one submission (this thread only), then read its score."""
    from nbgrader.api import Gradebook, MissingEntry

    for attempt in range(2):
        result = nbgrader.autograde(outcome.lesson, outcome.student, force=True, create=True)
        if result.get("success"):
            break
        outcome.notes.append(f"nbgrader autograde failed (attempt {attempt + 1})")
    else:
        log = (result.get("error") or result.get("log") or "").strip().splitlines()
        outcome.notes.append(log[-1] if log else "nbgrader autograde failed")
        return
    with Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission(outcome.lesson, outcome.student)
        except MissingEntry:
            outcome.notes.append("not in the gradebook after autograde")
            return
        outcome.points, outcome.max_points = submission.score, submission.max_score
    outcome.recorded = True


def autograde(
    course: Course,
    lessons: list[str] | None = None,
    students: list[str] | None = None,
    *,
    workers: int = 2,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = True,
) -> list[Outcome]:
    """Grade (in parallel) and record (one at a time) every chosen submission."""
    lessons = lessons or course.lessons()
    jobs = [
        (student, lesson)
        for lesson in lessons
        for student in course.students(lesson)
        if not students or student in students
    ]
    outcomes = {job: Outcome(*job) for job in jobs}
    if not jobs:
        return []
    with course_lock(course):
        for student, lesson in jobs:
            outcomes[(student, lesson)].notes += sanitize_submission(course, student, lesson)
        nbgrader = api(course)  # sets the kernels' environment too
        done: queue.Queue = queue.Queue()

        def grade_job(job: tuple[str, str]) -> None:
            outcome = outcomes[job]
            try:
                result = grade_one(course, *job, sandbox=sandbox, timeout=timeout)
                outcome.graded = _graded_any(result["report"])
                outcome.seconds = result["seconds"]
                if result["error"]:
                    outcome.notes.append(result["error"])
            except Exception as error:  # noqa: BLE001 - one submission's failure stays its own
                outcome.notes.append(f"grading failed: {error}")
            done.put(job)

        with (
            _Progress(len(jobs), enabled=progress) as bar,
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
        ):
            for job in jobs:
                pool.submit(grade_job, job)
            for _ in jobs:
                job = done.get()
                bar.graded(f"{job[0]}/{job[1]}")
                try:
                    record(nbgrader, course, outcomes[job])
                except Exception as error:  # noqa: BLE001
                    outcomes[job].notes.append(f"recording failed: {error}")
                bar.recorded(outcomes[job])
    return [outcomes[job] for job in jobs]


class _Progress:
    """Two bars (graded, recorded) on the terminal; one line per submission otherwise."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = enabled
        self.total = total
        self.progress = None

    def __enter__(self) -> _Progress:
        if self.enabled and self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[last]}"),
                console=self.console,
            )
            self.progress.start()
            self.grading = self.progress.add_task("graded", total=self.total, last="")
            self.recording = self.progress.add_task("recorded", total=self.total, last="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def graded(self, name: str) -> None:
        if self.progress is not None:
            self.progress.update(self.grading, advance=1, last=name)

    def recorded(self, outcome: Outcome) -> None:
        line = f"{outcome.student}/{outcome.lesson}: {outcome.points:g} of {outcome.max_points:g}"
        if outcome.notes:
            line += f"  ({'; '.join(outcome.notes)})"
        if self.progress is not None:
            self.progress.update(self.recording, advance=1, last=line)
            self.progress.console.print(line)
        elif self.enabled:
            self.console.print(line)


def feedback(course: Course, lessons: list[str] | None = None) -> list[str]:
    """nbgrader generate_feedback for every autograded submission; hidden tests stripped."""
    nbgrader = api(course)
    made = []
    for lesson in lessons or course.lessons():
        result = nbgrader.generate_feedback(lesson, force=True)
        if not result.get("success"):
            raise RuntimeError(
                f"nbgrader generate_feedback {lesson} failed:\n"
                f"{result.get('error') or result.get('log')}"
            )
        made += [str(p) for p in sorted(course.feedback.glob(f"*/{lesson}/*.html"))]
    return made


def export(course: Course, to: Path | None = None) -> list[Path]:
    """grades.csv (nbgrader's, per student and lesson) and grades-by-check.csv (per check)."""
    from nbgrader.api import Gradebook
    from nbgrader.apps.exportapp import ExportApp  # noqa: F401 - the plugins' home
    from nbgrader.plugins import CsvExportPlugin

    from .export import ChecksCsvExportPlugin

    folder = Path(to) if to else course.root
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "grades.csv", folder / "grades-by-check.csv"]
    with Gradebook(course.db_url) as gb:
        CsvExportPlugin(to=str(paths[0])).export(gb)
        ChecksCsvExportPlugin(to=str(paths[1])).export(gb)
    return paths


def collect(course: Course, lessons: list[str] | None = None) -> dict[str, list[str]]:
    """``nbgrader zip_collect LESSON --force`` (in the course folder, so with its config) for
    every lesson with files in downloaded/LESSON/archive/; returns the students found."""
    found = {}
    for lesson in lessons or course.lessons():
        archive = course.downloaded / lesson / "archive"
        if not archive.is_dir() or not any(archive.iterdir()):
            continue
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", "zip_collect", lesson, "--force"],
            cwd=course.root,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader zip_collect {lesson} failed:\n{done.stderr[-3000:]}")
        found[lesson] = course.students(lesson)
    return found
