"""``grade()``: run the graders on a target package and return the report.

The same path serves students (``nox -s grade``), instructors (``--hidden``) and the nbgrader
tooling (which calls ``graders.grade``), so "passes here" means "passes there".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.manifest import (
    DEFAULT_REPORT,
    ROOT,
    Check,
    Lesson,
    Manifest,
    ManifestError,
    load_manifest,
)

from .report import Report
from .sandbox import worker_command
from .seed import PUBLIC_SEED, SEED_VARIABLE
from .worker_user import WorkerUserError, user_prefix

if TYPE_CHECKING:
    from .pool import WorkerPool

# torch, pytest and the harness load only once the arguments are known to be good, so that a
# usage error is reported at once.

GRADERS = Path(__file__).resolve().parent
DEFAULT_TARGET = ROOT / "exercises"


class GradingError(RuntimeError):
    """Grading itself could not run (bad arguments, missing graders, a broken grader)."""


def select_lessons(manifest: Manifest, names: Iterable[str] | None) -> list[Lesson]:
    """The chosen lessons in manifest order (all when ``names`` is empty)."""
    if not names:
        return list(manifest.lessons)
    chosen: list[Lesson] = []
    for name in names:
        try:
            lesson = manifest.lesson(str(name))
        except KeyError as error:
            raise GradingError(error.args[0]) from None
        if lesson not in chosen:
            chosen.append(lesson)
    return [lesson for lesson in manifest.lessons if lesson in chosen]


def check_target(target: Path, lessons: Iterable[Lesson]) -> Path:
    """The target directory, resolved, if it holds every chosen lesson's module."""
    target = Path(target).expanduser().resolve()
    if not target.is_dir():
        raise GradingError(f"--target {target} is not a directory")
    missing = [
        f"{lesson.module}.py"
        for lesson in lessons
        if not (target / f"{lesson.module}.py").is_file()
    ]
    if missing:
        raise GradingError(
            f"--target {target} does not hold the exercise modules: missing {', '.join(missing)}"
        )
    return target


def grader_files(lessons: Iterable[Lesson], hidden: bool, graders: Path = GRADERS) -> list[Path]:
    files: list[Path] = []
    for lesson in lessons:
        public = graders / "public" / f"test_{lesson.slug}.py"
        if not public.is_file():
            raise GradingError(f"no public grader for lesson {lesson.slug!r}: {public} is missing")
        files.append(public)
        if hidden and any(c.hidden for c in lesson.checks):
            secret = graders / "hidden" / f"test_{lesson.slug}.py"
            if not secret.is_file():
                raise GradingError(
                    f"the hidden graders are not installed here ({secret} is missing); "
                    "grade without --hidden"
                )
            files.append(secret)
    return files


@contextmanager
def _no_pytest_environment() -> Any:
    """PYTEST_ADDOPTS and friends of the caller must not change how graders run."""
    saved = {k: os.environ.pop(k) for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def grade(
    target: Path | str | None = None,
    lessons: Iterable[str] | None = None,
    hidden: bool = False,
    json_path: Path | str | None = None,
    sandbox: bool = False,
    *,
    functions: Iterable[str] | None = None,
    timeout_scale: float = 1.0,
    on_lesson: Callable[[dict], None] | None = None,
    on_check: Callable[[dict, dict], None] | None = None,
    manifest_path: Path | str | None = None,
    reveal_hidden: bool = False,
    input_seed: int = 0,
    pool: WorkerPool | None = None,
) -> dict:
    """Grade the package in ``target`` (default exercises/) and return the report dict.

    ``lessons``: slugs (or numbers) to grade, default all. ``hidden``: also the hidden checks.
    ``json_path``: where the report is (re)written after every check (default
    build/grading-report.json); the lessons it already holds of the same grading of
    ``target`` that this one leaves out are kept (graders/report.py). ``sandbox``: run the
    worker in the sandbox (graders/sandbox.py). ``functions``: grade only these functions'
    checks. ``timeout_scale`` multiplies every per-call timeout. ``on_lesson`` is called with a
    lesson's report entry as soon as its checks are done, ``on_check`` with the lesson's entry
    and the check's as soon as each check is (a later error-path check may still change a
    function's points: the lesson's entry is final). ``reveal_hidden`` keeps the details
    of failed hidden checks in the report: for debugging the graders, never for students.
    ``input_seed``: the seed every check's inputs are drawn from; 0, the public one, gives the
    release's inputs, another (instructor autograde's secret) inputs no release holds
    (graders/answers.py). ``pool``: where the grading's worker comes from and goes back to
    (graders/pool.py; default: the process-wide one).

    Raises GradingError when grading cannot run; a low score is not an error.
    """
    try:
        manifest = load_manifest(manifest_path)
    except ManifestError as error:
        raise GradingError(str(error)) from None
    chosen = select_lessons(manifest, lessons)
    target_dir = check_target(Path(target) if target is not None else DEFAULT_TARGET, chosen)
    if sandbox:
        try:
            worker_command([], target_dir, sandbox=True)
        except NotImplementedError as error:
            raise GradingError(str(error)) from None
    else:
        try:
            user_prefix()  # the user $COURSE_WORKER_USER names, if any (graders/worker_user.py)
        except WorkerUserError as error:
            raise GradingError(str(error)) from None
    wanted = set(functions) if functions is not None else None
    selected: list[tuple[Lesson, list[Check]]] = []
    for lesson in chosen:
        checks = [
            c for c in lesson.selected_checks(hidden) if wanted is None or c.function in wanted
        ]
        if checks:
            selected.append((lesson, checks))
    if not selected:
        raise GradingError("no checks to run: the manifest has none for this selection")
    files = grader_files([lesson for lesson, _ in selected], hidden)
    import pytest
    import torch

    from . import answers
    from .client import WorkerClient, checker_memory
    from .plugin import GradingPlugin

    answers.prepare()  # the oracles (or recorded answers) load before any student code runs
    if input_seed != PUBLIC_SEED and not answers.live():
        raise GradingError(
            f"{SEED_VARIABLE} needs the instructor's tree (graders/secret/): "
            "a release grades its recorded inputs only; unset it"
        )

    report_path = Path(json_path) if json_path is not None else DEFAULT_REPORT
    report = Report(
        target_dir,
        hidden,
        selected,
        report_path,
        reveal_hidden=reveal_hidden,
        order=[lesson.slug for lesson in manifest.lessons],
    )
    client = WorkerClient(target_dir, sandbox=sandbox, pool=pool)
    plugin = GradingPlugin(
        manifest=manifest,
        checks={c.id: c for _, checks in selected for c in checks},
        lessons={lesson.slug: lesson for lesson, _ in selected},
        client=client,
        report=report,
        timeout_scale=timeout_scale,
        on_lesson=on_lesson,
        on_check=on_check,
    )
    args = [
        *map(str, files),
        "-c",
        os.devnull,  # none of the project's pytest settings
        "--rootdir",
        str(GRADERS),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:unraisableexception",  # its full garbage collection costs a second with torch
        "-p",
        "no:terminal",  # failures would print hidden inputs; the report says enough
        "--assert=plain",
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only spin, on a busy machine badly
    try:
        with _no_pytest_environment(), checker_memory(), answers.secret_inputs(input_seed):
            code = pytest.main(args, plugins=[plugin])
    finally:
        torch.set_num_threads(threads)
        client.close()
    if plugin.errors:
        raise GradingError("\n".join(plugin.errors))
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise GradingError(f"the grader run ended abnormally (pytest exit code {int(code)})")
    report.finish()
    return report.data
