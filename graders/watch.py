"""``python -m graders --watch``: grade again, on every save, the lessons whose files changed.

One checker stays up for the whole session: Python, torch, pytest, the graders and the oracles
(or recorded answers) load once. Its worker is kept warm between gradings too
(the grading's WorkerPool keeps an idle worker for the next grading, graders/pool.py), so a
re-grading costs a fork of a fresh lesson process, the lesson's import and its checks. With
``--sandbox`` the kept worker stays in its sandbox, and the private copy of the package that
the sandbox shows it is made again from the files as they are before each grading
(graders/sandbox.py's ``refresh_copy``).

Every POLL_SECONDS the watch reads the modification times and sizes of the package's ``*.py``
files; when they change (and have stayed the same for another poll, so that a save in several
writes is seen whole), it re-grades each watched lesson whose fingerprint changed: its module
and the package's modules that one imports (core/fingerprint.py), so an edit of
attention.py re-grades block as well; an edit of the package's ``__init__.py`` re-grades
every watched lesson; a save that changes nothing grades nothing. Each grading rewrites its
lessons in the report and keeps the others (graders/report.py), which is what the progress
page follows. A module that fails to import is reported as in any grading; a grading that
cannot run (a module deleted mid-save) is one line, and the watch goes on. Ctrl-C ends it with
one line.
"""

from __future__ import annotations

import hashlib
import signal
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from core.fingerprint import fingerprint
from core.manifest import Lesson, ManifestError, load_manifest

from .pool import WorkerPool, default_pool
from .runner import DEFAULT_TARGET, GradingError, check_target, grade, select_lessons

POLL_SECONDS = 0.1

Snapshot = dict[str, tuple[int, int]]


def snapshot(target: Path) -> Snapshot:
    """Each ``*.py`` file of the package folder: its modification time and size."""
    seen: Snapshot = {}
    for path in target.glob("*.py"):
        try:
            status = path.stat()
        except OSError:
            continue  # gone between the listing and the look
        seen[path.name] = (status.st_mtime_ns, status.st_size)
    return seen


def version(target: Path, lesson: Lesson) -> str:
    """What a grading of ``lesson`` depends on in the package: its files' fingerprint, and the
    package's ``__init__.py``, which every lesson process imports first."""
    init = target / "__init__.py"
    return fingerprint(target, lesson.module) + (
        hashlib.sha256(init.read_bytes()).hexdigest() if init.is_file() else ""
    )


def changed(target: Path, lessons: Sequence[Lesson], graded: dict[str, str]) -> list[Lesson]:
    """The lessons whose ``version`` is not the one last graded."""
    return [lesson for lesson in lessons if version(target, lesson) != graded.get(lesson.slug)]


class _Interrupt:
    """Ctrl-C, remembered: pytest turns a KeyboardInterrupt into an exit code (which the runner
    reports as an error), so the watch asks this whether the user stopped it. Only the first
    one interrupts: a second (a key pressed twice) must not break the stopping."""

    def __init__(self) -> None:
        self.pressed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if not self.pressed:
            self.pressed = True
            raise KeyboardInterrupt


def watch(
    target: Path | None,
    names: Sequence[str],
    *,
    console: Any,
    ticker: Any = None,
    poll: float = POLL_SECONDS,
    pool: WorkerPool | None = None,
    **options: Any,
) -> int:
    """Grade the lessons ``names`` (default all) of the package folder ``target`` (default
    exercises/), then again each time their files change, until Ctrl-C (exit status 0).
    ``options`` go to every ``grade()`` (hidden, json_path, sandbox, input_seed, on_lesson,
    on_check), all with one ``pool`` (default: the process-wide one), whose idle worker
    serves the next grading; ``ticker`` (graders/terminal.py), if given, is stopped after each
    grading. Bad
    arguments and a first grading that cannot run raise GradingError; a later grading that
    cannot run is reported in one line and the watch goes on."""
    try:
        lessons = select_lessons(load_manifest(), names)
    except ManifestError as error:
        raise GradingError(str(error)) from None
    target = check_target(target if target is not None else DEFAULT_TARGET, lessons)
    pool = pool if pool is not None else default_pool()
    interrupt = _Interrupt()
    previous = signal.signal(signal.SIGINT, interrupt)
    graded: dict[str, str] = {}
    first = True
    try:
        state = snapshot(target)
        due = list(lessons)
        while True:
            if due:
                for lesson in due:
                    graded[lesson.slug] = version(target, lesson)
                try:
                    report = grade(
                        target, lessons=[lesson.slug for lesson in due], pool=pool, **options
                    )
                except GradingError as error:
                    if first and not interrupt.pressed:
                        raise
                    report, problem = None, str(error).splitlines()[0]
                finally:
                    if ticker is not None:
                        ticker.stop()
                if interrupt.pressed:  # however the grading took it
                    raise KeyboardInterrupt
                if report is None:
                    console.print(f"[red]error:[/red] {problem}")
                else:
                    console.print(
                        f"[dim]{datetime.now():%H:%M:%S}[/dim] graded "
                        f"{', '.join(lesson.slug for lesson in due)}: total "
                        f"{report['points']}/{report['max_points']} points. Watching "
                        f"{target} for saves (Ctrl-C stops)."
                    )
                console.file.flush()
                first = False
            time.sleep(poll)
            now = snapshot(target)
            if now == state:
                due = []
                continue
            while now != state:  # saved: wait until the files stay as they are for a poll
                state = now
                time.sleep(poll)
                now = snapshot(target)
            due = changed(target, lessons, graded)
    except KeyboardInterrupt:
        console.print("stopped watching (Ctrl-C)")
        console.file.flush()
        return 0
    finally:
        if not interrupt.pressed:  # stopped by Ctrl-C, the process ends: it stays ignored
            signal.signal(signal.SIGINT, previous)
