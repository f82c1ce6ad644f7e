"""``autograde``: grade submissions in parallel on a Dask cluster, record them in batches.

Two stages, overlapped:

1. *Grading* (parallel; no gradebook access): every submission ``submitted/STUDENT/LESSON/``
   becomes one task, :func:`.grading.grade_files` (a module light on imports, for the
   workers): the package as graded (:func:`notebook.student_files`: the released package
   with the student's lesson module), sent as bytes, is written to a
   private temporary folder on the worker and graded by the harness, ``python -m graders
   LESSON --target ... --hidden --sandbox --json ...``, in a process of its own with a
   wall-clock limit. The task returns the harness's report (complete, or as far as it got).
   Tasks run on Dask distributed: by default a ``LocalCluster`` of ``--workers`` threads of
   this process (no port: see :func:`local_cluster`); with ``--scheduler tcp://HOST:8786``,
   the workers of a cluster (each with this repository installed: they need the hidden
   graders, not the course folder). A worker that dies mid-task loses nothing: the scheduler
   runs its task again elsewhere, and nothing is recorded until a task has returned.
2. *Recording* (this process only, as results arrive): each batch of results that arrived
   together is written to ``results/STUDENT/LESSON.json`` and recorded in the gradebook in one
   transaction (:mod:`.gradebook`): the autograded notebook, each check's points, the
   per-check history the class report reads, and in :mod:`.gradings` the files and secret
   seed of the grade (``regrade --reproduce`` grades them again). A second ``autograde`` on the
   same course folder is kept off by a lock file, taken before anything is collected.

The run, :func:`autograde`, is these steps, each a function of its own: *find the work*
(:func:`find_jobs`, and :func:`changed_jobs` in the command), *plan* it (:func:`plan`: each
submission's files, fingerprint, time and secret seed as a :class:`Task`; :func:`plan_attempts`:
the earlier attempts), *grade* (:func:`engine_tasks` on the :class:`Engine`), *sort out* each
batch of results (:func:`sort_out`) and *record* it (:func:`record`); the command then feeds
back and exports. A submission's time is decided in :func:`submission_time` alone, the lock in
:func:`course_lock`, a late penalty in :mod:`.late_penalty`.

Only submissions new or changed since their grade are given (``changed_jobs``) unless all
are asked for. A timeout, crash or hostile submission costs only the checks it affects (the
harness fails those checks and goes on); a submission whose grading run died outright keeps
the checks its report already holds and gets 0 for the rest. A grading that graded nothing at
all failed by the grader's doing: it replaces no grade and is recorded as failed, with its
cause. Then the feedback (:mod:`.feedback`) and the exports.

Plain ``nbgrader autograde`` in the course folder still works: the notebook's cells then grade
the submission themselves (:mod:`.notebook`), one kernel per submission.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from core.cli import one_line
from core.fingerprint import files_digest, graders_digest
from core.manifest import load_manifest
from graders.notebook import student_files
from graders.report import write_json_atomic

from . import gradings
from .course import PACKAGE, Course
from .errors import SetupError
from .gradebook import Graded, Recorder
from .grading import (
    DEFAULT_TIMEOUT,
    RUN,
    grade_files,
    graded_any,
    remove_stale_scratch,
    scratch_prefix,
    secret_seed,
    stop_running,
)

if TYPE_CHECKING:
    from rich.progress import Progress

STUDENT_ID = re.compile(r"^[A-Za-z0-9][\w.@-]{0,127}$")  # what nbgrader and file names accept


@dataclass
class Outcome:
    student: str
    lesson: str
    graded: bool = False  # the harness produced a report
    recorded: bool = False  # the gradebook holds the grades
    points: float = 0.0  # as grades.csv has them: the late penalty taken
    max_points: float = 0.0
    raw: float | None = None  # before the late penalty (None: not recorded)
    seconds: float = 0.0  # the grading run's wall time
    recording: float = 0.0  # this submission's share of its batch's recording time
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


def submission_files(
    course: Course, student: str, lesson: str, folder: Path | None = None
) -> tuple[dict[str, bytes], str]:
    """The files a submission is graded with (relative path -> bytes) and their fingerprint."""
    module = load_manifest().lesson(lesson).module
    folder = folder or course.submitted / student / lesson
    paths = student_files(course.source / lesson / PACKAGE, folder / PACKAGE, module)
    return {rel: path.read_bytes() for rel, path in paths.items()}, files_digest(paths)


def save_result(
    results: Path, student: str, lesson: str, digest: str, graded: dict[str, Any], graders: str
) -> dict[str, Any]:
    """results/STUDENT/LESSON.json (and .log): what the notebook's cells and the report read;
    ``graders`` is the fingerprint of the graders that graded it (a notebook cell reuses the
    result only while it is unchanged)."""
    out = results / student
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{lesson}.log").write_text(graded.get("log", ""), encoding="utf-8")
    result = {
        "student": student,
        "lesson": lesson,
        "fingerprint": digest,
        "graders": graders,
        "error": graded["error"],
        "seconds": graded["seconds"],
        "report": graded["report"],
    }
    write_json_atomic(out / f"{lesson}.json", result)
    return result


def grade_one(
    course: Course,
    student: str,
    lesson: str,
    *,
    submission: Path | None = None,
    results: Path | None = None,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict | None:
    """Grade one submission here (what a plain ``nbgrader autograde`` cell asks for when no
    report is there yet): write and return results/STUDENT/LESSON.json, keeping the seed in
    :mod:`.gradings`. A grading that graded nothing writes no report: it is recorded as failed,
    and nbgrader then keeps the grade already there (:class:`.preprocessors.KeepGradeOnFailure`)."""
    files, digest = submission_files(course, student, lesson, submission)
    results = results or course.results
    # Where the report goes is made first: a folder that cannot be made (a path through a
    # file) fails the run now, not after a grading whose report it could not keep.
    (results / student).mkdir(parents=True, exist_ok=True)
    graded = grade_files(lesson, files, sandbox=sandbox, timeout=timeout)
    if not graded_any(graded["report"]):
        cause = graded["error"] or "the grading run graded no check"
        gradings.failed(course.root, student, lesson, digest, cause)
        return None
    graders = graders_digest()
    saved = save_result(results, student, lesson, digest, graded, graders)
    stamp = submission_time(course.submitted / student / lesson)
    gradings.graded(course.root, student, lesson, digest, stamp, graded["seed"], graders)
    return saved


# -- stage 2: recording, and the whole run -------------------------------------------------------


_held: set[Path] = set()  # the course folders whose lock this process holds


@contextlib.contextmanager
def course_lock(course: Course) -> Iterator[None]:
    """One autograde at a time per course directory (the gradebook has one writer), taken
    before anything is collected; the holder may take it again (collect, then grade)."""
    if course.root in _held:
        yield
        return
    course.root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(course.root / ".autograde.lock")
    holder = course.root / ".autograde.holder"  # who holds it, for the one who waits
    try:
        lock.acquire(timeout=0)
    except Timeout:
        try:
            who = holder.read_text(encoding="utf-8").strip()
        except OSError:
            who = ""
        raise SetupError(
            f"another autograde ({who or 'another process'}) is grading {course.root}: wait "
            "for it to end and run this one again (nothing was collected or graded)"
        ) from None
    try:
        holder.write_text(f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}\n")
        _held.add(course.root)
        yield
    finally:
        _held.discard(course.root)
        holder.unlink(missing_ok=True)
        lock.release()


def find_jobs(
    course: Course, lessons: list[str] | None = None, students: list[str] | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(student, lesson) of every submission to grade, and one line per folder of submitted/
    that cannot be graded (a student id with odd characters, a lesson not released)."""
    released = course.lessons()
    known = {lesson.slug for lesson in load_manifest().lessons}
    jobs: list[tuple[str, str]] = []
    problems: list[str] = []
    if not course.submitted.is_dir():
        return jobs, problems
    for folder in sorted(course.submitted.iterdir()):
        student = folder.name
        if not folder.is_dir() or (students and student not in students):
            continue
        if not STUDENT_ID.match(student):
            problems.append(
                f"skipped submitted/{student}/: the student id {student!r} may hold only "
                "letters, digits and . _ @ - (rename the folder to the roster's id)"
            )
            continue
        for sub in sorted(folder.iterdir()):
            lesson = sub.name
            if not sub.is_dir() or (lessons and lesson not in lessons):
                continue
            if lesson not in released:
                why = (
                    f"lesson {lesson!r} is not released (run `nox -s release -- {lesson}`)"
                    if lesson in known
                    else f"{lesson!r} is no lesson of this course "
                    f"(released: {', '.join(released) or 'none'})"
                )
                problems.append(f"skipped submitted/{student}/{lesson}/: {why}")
                continue
            jobs.append((student, lesson))
    return jobs, problems


def submission_time(folder: Path) -> str | None:
    """When a submission was submitted: its folder's timestamp.txt as nbgrader reads it; None
    when it has none or one nbgrader cannot read. The one place autograde decides a
    submission's time: the grade, gradings.json and :func:`changed_jobs` take it from here."""
    try:
        text = (folder / "timestamp.txt").read_text().strip()
    except OSError:
        return None
    try:
        from nbgrader.utils import parse_utc

        parse_utc(text)
    except Exception:  # noqa: BLE001 - an unreadable timestamp is no timestamp
        return None
    return text or None


def local_cluster(workers: int) -> Any:
    """A Dask cluster that no other process or machine can use: its scheduler and ``workers``
    workers are threads of this process, talking in-process, with no port to reach (whoever
    reaches a scheduler runs code as the instructor). A task only waits on its grading run, a
    process of its own forked from this process's one warm grading host, so worker processes
    would add an interpreter and a grading host each and nothing else.

    Dask starts an HTTP server beside the scheduler and each worker whatever the dashboard
    options say, on every interface by default: its pages name the tasks (students and
    lessons), and it forwards requests to other ports. Here each serves nothing (no routes)
    and listens on the loopback interface only."""
    import logging

    import dask
    from distributed import LocalCluster

    nothing: dict[str, list[str]] = {
        "distributed.scheduler.http.routes": [],
        "distributed.worker.http.routes": [],
    }
    with dask.config.set(nothing):
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=False,
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        )


TLS_SETTINGS = {  # Dask's configuration a client over TLS needs, and its variable
    "distributed.comm.tls.ca-file": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
    "distributed.comm.tls.client.cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
    "distributed.comm.tls.client.key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY",
}
DEFAULT_WAIT = 300.0  # seconds autograde waits for a cluster with no worker before it gives up
SAY_EVERY = 15.0  # seconds between the lines that say autograde is still waiting


def missing_tls_settings(address: str) -> list[str]:
    """The variables of :data:`TLS_SETTINGS` a ``tls://`` scheduler needs that Dask's
    configuration lacks (none for another protocol)."""
    if not address.startswith("tls://"):
        return []
    import dask

    return [var for key, var in TLS_SETTINGS.items() if not dask.config.get(key, None)]


class Engine:
    """Runs grading tasks and hands back their results in batches (those that finished
    together). ``dask``: a Dask distributed cluster (unless given a scheduler's address, a
    LocalCluster whose scheduler and workers are threads of this process); ``threads``: a
    thread pool in this process (no Dask needed). A cluster that has had no worker for ``wait``
    seconds (at the start or later) ends the run with one line; ``say`` gets a line every
    :data:`SAY_EVERY` seconds while it waits."""

    def __init__(
        self,
        kind: str = "dask",
        workers: int = 2,
        scheduler: str | None = None,
        *,
        wait: float = DEFAULT_WAIT,
        say: Callable[[str], None] = print,
    ):
        self.kind, self.workers, self.scheduler = kind, max(1, workers), scheduler
        self.wait, self.say = wait, say
        self.client: Any = None
        self.cluster: Any = None
        self.pool: Any = None

    def __enter__(self) -> Engine:
        if self.kind == "dask":
            try:
                from distributed import Client
            except ImportError:
                raise SetupError(
                    "Dask distributed is not installed: install the grading extra "
                    "(pip install -e '.[grading]') or grade with --engine threads"
                ) from None

            if self.scheduler:
                missing = missing_tls_settings(self.scheduler)
                if missing:
                    raise SetupError(
                        f"the scheduler {self.scheduler} speaks TLS and Dask has no credentials "
                        f"for it: set {', '.join(missing)} to the files of your cluster's CA, "
                        "certificate and key"
                    )
                self.say(f"connecting to the Dask scheduler {self.scheduler} (up to 30 s)")
                try:
                    self.client = Client(self.scheduler, timeout=30)
                except (OSError, TimeoutError, ValueError, TypeError) as error:
                    raise SetupError(
                        f"cannot reach the Dask scheduler {self.scheduler} ({one_line(error)}): "
                        "start it (`dask scheduler`) or grade here without --scheduler"
                    ) from None
            else:
                self.cluster = local_cluster(self.workers)
                self.client = Client(self.cluster)
        else:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        if self.pool is not None:
            # Interrupted: the running grading runs are stopped (autograde's scratch does it);
            # waiting for them here would wait their whole time limit.
            self.pool.shutdown(wait=exc[0] is None, cancel_futures=True)

    def _workers(self) -> int:
        return len(self.client.scheduler_info(n_workers=-1).get("workers", {}))

    def _waited(self, since: float, said: float) -> float:
        """While the cluster has no worker: a line now and then, and the end after ``wait``
        seconds. Returns when it last said something."""
        waited = time.monotonic() - since
        if waited >= self.wait:
            where = self.scheduler or "the local cluster"
            raise SetupError(
                f"no Dask worker joined {where} in {self.wait:g} s: start one "
                f"(`dask worker {where}`), or give --wait more seconds"
            )
        if time.monotonic() - said >= SAY_EVERY:
            self.say(
                f"waiting for a Dask worker on {self.scheduler or 'the local cluster'} "
                f"({waited:.0f} of {self.wait:g} s)"
            )
            return time.monotonic()
        return said

    def run(
        self, tasks: dict[Any, tuple[Callable, tuple, dict]]
    ) -> Iterator[list[tuple[Any, Any, BaseException | None]]]:
        """Yield lists of (key, result, error) as tasks finish."""
        if self.client is not None:
            from distributed import as_completed

            # In the order given (Dask's own order is its keys' hashes): the progress lines and
            # a rerun follow the submissions' order, and what is submitted first starts first.
            futures = {
                self.client.submit(
                    fn,
                    *args,
                    **kwargs,
                    key=f"grade-{key[0]}-{key[1]}-{key[2]}",
                    pure=False,
                    priority=len(tasks) - rank,
                ): key
                for rank, (key, (fn, args, kwargs)) in enumerate(tasks.items())
            }
            done = as_completed(list(futures), with_results=True, raise_errors=False)
            lonely, said = None, -SAY_EVERY  # since when the cluster has had no worker
            while not done.is_empty():
                batch = done.next_batch(block=False)
                if not batch:
                    if self._workers():
                        lonely = None
                    else:
                        lonely = lonely or time.monotonic()
                        said = self._waited(lonely, said)
                    time.sleep(0.5)
                    continue
                # A failed task's "result" is Dask's (type, exception, traceback) tuple.
                yield [
                    (futures[f], None, r[1]) if f.status == "error" else (futures[f], r, None)
                    for f, r in batch
                ]
            return
        from concurrent.futures import FIRST_COMPLETED, wait

        pending = {
            self.pool.submit(fn, *args, **kwargs): key for key, (fn, args, kwargs) in tasks.items()
        }
        while pending:
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            batch = []
            for future in finished:
                key = pending.pop(future)
                error = future.exception()
                batch.append((key, None if error else future.result(), error))
            yield batch


# -- the run: find the work, grade it, record it ------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One grading to run: the files of a submission, or of an earlier attempt of it, as sent."""

    student: str
    lesson: str
    digest: str  # the files' fingerprint
    stamp: str | None  # when it was submitted (:func:`submission_time`)
    files: dict[str, bytes] = field(repr=False)
    seed: int | None = None  # the secret input seed, kept in gradings.json (None: an attempt's)
    attempt: bool = False  # an earlier attempt collect kept: for the report's history only

    @property
    def job(self) -> tuple[str, str]:
        return (self.student, self.lesson)

    @property
    def key(self) -> tuple[str, str, str]:
        """The engine's key for it (a Dask task's name): two files of one job differ in it."""
        return (self.student, self.lesson, self.digest[:16])


@dataclass
class Run:
    """One autograde: what each submission came to, the tasks by key, and the fingerprint of
    the graders its grades are recorded as graded by."""

    course: Course
    outcomes: dict[tuple[str, str], Outcome]
    graders: str
    tasks: dict[tuple[str, str, str], Task] = field(default_factory=dict)

    @property
    def jobs(self) -> list[tuple[str, str]]:
        return list(self.outcomes)


@dataclass
class Sorted:
    """A batch of results sorted out: the submissions to record, the earlier attempts to add
    to the history, and the submissions the batch finished (recorded or not)."""

    ready: list[Graded] = field(default_factory=list)
    attempts: list[Graded] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)


def autograde(
    course: Course,
    lessons: list[str] | None = None,
    students: list[str] | None = None,
    *,
    workers: int = 2,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = True,
    engine: str = "dask",
    scheduler: str | None = None,
    grader: Callable[..., dict[str, Any]] | None = None,
    jobs: list[tuple[str, str]] | None = None,
    wait: float = DEFAULT_WAIT,
) -> list[Outcome]:
    """Grade (in parallel, on the engine) and record (in batches, here) the chosen submissions.
    ``grader`` replaces :func:`grade_files` (same signature), for tests and benchmarks.
    A grading that graded nothing (the grader's failure, not the student's) replaces no grade:
    it is recorded as failed in :mod:`.gradings`, with its cause."""
    from .release import course_site

    if jobs is None:
        jobs, _ = find_jobs(course, lessons, students)
    if not jobs:
        return []
    course.check_gradebook({lesson for _, lesson in jobs})
    with course_lock(course), _scratch(scheduler) as scratch:
        run = plan(course, jobs)
        options = {"sandbox": sandbox, "timeout": timeout, "scratch": scratch}
        with (
            Recorder(course, site=course_site(course)) as recorder,
            _Progress(len(jobs), enabled=progress) as bar,
        ):
            plan_attempts(run, recorder)
            # No more local workers than gradings: an idle one is a process started for nothing.
            size = min(workers, len(run.tasks))
            with Engine(engine, size, scheduler, wait=wait, say=bar.say) as pool:
                for batch in pool.run(engine_tasks(run, grader or grade_files, options)):
                    done = sort_out(run, batch)
                    for job in done.finished:
                        bar.graded("/".join(job))
                    record(run, recorder, done)
                    for job in done.finished:
                        bar.recorded(run.outcomes[job])
    return [run.outcomes[job] for job in jobs]


def plan(course: Course, jobs: list[tuple[str, str]]) -> Run:
    """The work: each submission made safe to grade (:func:`sanitize_submission`, noted), its
    files, their fingerprint, its time and a secret seed of its own."""
    run = Run(course, {job: Outcome(*job) for job in jobs}, graders_digest())
    for student, lesson in jobs:
        run.outcomes[(student, lesson)].notes += sanitize_submission(course, student, lesson)
        files, digest = submission_files(course, student, lesson)
        stamp = submission_time(course.submitted / student / lesson)
        task = Task(student, lesson, digest, stamp, files, seed=secret_seed())
        run.tasks[task.key] = task
    return run


def plan_attempts(run: Run, recorder: Recorder) -> None:
    """Add the earlier attempts collect kept for these submissions (see :mod:`.collect`) that
    the history does not hold yet: they are graded for the class report's history only."""
    from .collect import attempts

    for student, lesson in run.jobs:
        for folder in attempts(run.course, lesson, student):
            files, digest = submission_files(run.course, student, lesson, folder)
            task = Task(student, lesson, digest, submission_time(folder), files, attempt=True)
            if task.key in run.tasks or recorder.has_history(student, lesson, digest):
                continue  # the submission itself, or an attempt graded before
            run.tasks[task.key] = task


def engine_tasks(
    run: Run, grader: Callable[..., dict[str, Any]], options: dict[str, Any]
) -> dict[tuple[str, str, str], tuple[Callable, tuple, dict]]:
    """What the engine runs for each task, in the order planned: the grader on its files, with
    the submission's seed (an attempt's grader draws one of its own)."""
    return {
        key: (
            grader,
            (task.lesson, task.files),
            options if task.seed is None else {**options, "seed": task.seed},
        )
        for key, task in run.tasks.items()
    }


def sort_out(run: Run, batch: list[tuple[Any, Any, BaseException | None]]) -> Sorted:
    """Decide what each result of a batch is: an attempt for the history; a grading that
    failed by the grader's doing (recorded as failed, the grade left alone); a submission
    that changed while it was graded (not recorded); else a grade to record, its report
    saved in results/."""
    done = Sorted()
    for key, result, error in batch:
        task = run.tasks[key]
        outcome = run.outcomes[task.job]
        why = one_line(error) if error is not None else (result["error"] or None)
        if task.attempt:
            if why:
                outcome.notes.append(f"earlier attempt ({task.stamp}): {why}")
            if error is None:
                done.attempts.append(Graded(*task.job, task.digest, result["report"], task.stamp))
            continue
        done.finished.append(task.job)
        _files, digest = submission_files(run.course, *task.job)  # as it is now
        if error is not None or not graded_any(result["report"]):
            _failed(run.course, outcome, digest, why or "the grading run graded no check")
            continue
        outcome.graded = True
        outcome.seconds = result["seconds"]
        if result["error"]:
            outcome.notes.append(result["error"])
        if digest != task.digest:
            outcome.notes.append("the submission changed while it was graded")
            outcome.graded = False
            continue
        save_result(run.course.results, *task.job, digest, result, run.graders)
        done.ready.append(Graded(*task.job, digest, result["report"], task.stamp, result["error"]))
    return done


def record(run: Run, recorder: Recorder, done: Sorted) -> None:
    """Record a batch's grades in the gradebook in one transaction, keep each recorded grade's
    files and seed in gradings.json (for ``regrade --reproduce``), then add the attempts to
    the history."""
    _record(recorder, done.ready, run.outcomes)
    for graded in done.ready:
        task = run.tasks[(graded.student, graded.lesson, graded.fingerprint[:16])]
        if run.outcomes[task.job].recorded and task.seed is not None:  # a submission's: it has one
            gradings.graded(
                run.course.root,
                graded.student,
                graded.lesson,
                graded.fingerprint,
                graded.timestamp,
                task.seed,
                run.graders,
            )
    _record_attempts(recorder, done.attempts, run.outcomes)


def _failed(course: Course, outcome: Outcome, digest: str, cause: str) -> None:
    """A grading that failed by the grader's doing: recorded as such, the grade left alone."""
    gradings.failed(course.root, outcome.student, outcome.lesson, digest, cause)
    outcome.notes.append(f"{cause}; the grade already recorded (if any) stands")


@contextlib.contextmanager
def _scratch(scheduler: str | None) -> Iterator[str | None]:
    """A folder of this run's own for the submissions being graded on this machine (none for
    a remote cluster's workers, which clean up after each task), only this user's (0700):
    removed however the run ends, an interrupted one included; a run killed outright leaves
    it, and the next run removes it (:func:`.grading.remove_stale_scratch`)."""
    if scheduler:
        yield None
        return
    remove_stale_scratch()  # what a killed run left: student code, in the temporary directory
    folder = tempfile.mkdtemp(prefix=scratch_prefix(RUN))  # 0700: this user's alone
    try:
        yield folder
    finally:
        stop_running()  # an interrupted run's grading runs in this process (threads engine)
        shutil.rmtree(folder, ignore_errors=True)


def changed_jobs(
    course: Course, jobs: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The submissions whose files or timestamp differ from those of their recorded grade,
    graded by other graders than these (a hidden check fixed since), or whose last grading
    failed; and the others (already graded as they are, by these graders)."""
    todo, current = [], []
    graders = graders_digest()
    for student, lesson in jobs:
        _files, digest = submission_files(course, student, lesson)
        stamp = submission_time(course.submitted / student / lesson)
        if gradings.is_current(course.root, student, lesson, digest, stamp, graders):
            current.append((student, lesson))
        else:
            todo.append((student, lesson))
    return todo, current


def graded_by_other_graders(course: Course, jobs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The submissions among ``jobs`` whose recorded grade other graders gave."""
    graders = graders_digest()
    return [
        job
        for job in jobs
        if (gradings.entry(course.root, *job) or {}).get("graders") not in (None, graders)
    ]


def _record_attempts(recorder: Recorder, attempts: list[Graded], outcomes: dict) -> None:
    if not attempts:
        return
    try:
        recorder.record_attempts(attempts)
    except Exception as error:  # noqa: BLE001 - the history misses them; the grades stand
        for graded in attempts:
            outcomes[(graded.student, graded.lesson)].notes.append(
                f"recording an earlier attempt failed: {one_line(error)}"
            )


def _record(recorder: Recorder, ready: list[Graded], outcomes: dict) -> None:
    if not ready:
        return
    started = time.monotonic()
    scores, errors = recorder.record_batch(ready)
    share = (time.monotonic() - started) / len(ready)
    for graded in ready:
        outcomes[(graded.student, graded.lesson)].recording = share
    for job, error in errors.items():
        outcomes[job].notes.append(f"recording failed: {one_line(error)}")
    for job, (points, most, raw) in scores.items():
        outcome = outcomes[job]
        outcome.points, outcome.max_points, outcome.raw = points, most, raw
        outcome.recorded = True


class _Progress:
    """Two bars (graded, recorded) on the terminal; one line per submission otherwise."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = enabled
        self.total = total
        self.progress: Progress | None = None

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

    def say(self, line: str) -> None:
        """A line between the bars (a wait, a warning), whatever the terminal."""
        (self.progress.console if self.progress is not None else self.console).print(line)

    def recorded(self, outcome: Outcome) -> None:
        line = f"{outcome.student}/{outcome.lesson}: {outcome.points:g} of {outcome.max_points:g}"
        if outcome.raw is not None and outcome.raw > outcome.points:  # a late penalty took some
            line += f" (raw {outcome.raw:g}, late -{outcome.raw - outcome.points:g})"
        if not outcome.recorded:  # a grading that failed (a killed worker): no score to show
            line = f"{outcome.student}/{outcome.lesson}: not graded"
        if outcome.notes:
            line += f"  ({'; '.join(outcome.notes)})"
        if self.progress is not None:
            self.progress.update(self.recording, advance=1, last=line)
            self.progress.console.print(line)
        elif self.enabled:
            self.console.print(line)
