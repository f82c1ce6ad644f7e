"""The pytest plugin that turns grader tests into checks, points, hints and a report.

Every grader test carries ``@pytest.mark.check("id")`` naming a check of the manifest, in the
lesson its file is for (graders/public/test_<slug>.py, graders/hidden/test_<slug>.py). It gets
the ``student`` fixture, its only way to reach the student's code (in the worker process):

    student.call("lookup", table, ids)          # embeddings.lookup(table, ids), as plain data
    student.error("add_positions", v, table)    # the StudentError it raised (or the check fails)
    student.scenario("train_step", model=..., optimizer=..., steps=[...])

A check passes when all its tests pass. A failure's hint is, in order: the harness's own (not
implemented, timed out, crashed, not plain data, changed its input), the diagnosed mistake's
(``CheckFailed(detail, mistake)``: from the check's own mistakes table, or for a public check
from those of the function's other checks), the manifest's default.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.manifest import Check, Lesson, Manifest, ManifestError, Rule

from . import answers, graph
from .checking import CheckFailed, GraderUnavailable, same
from .client import StudentError, WorkerClient, WorkerUnavailable
from .hints import ERROR_PATH, IN_PLACE
from .report import Report
from .rules import Flag, Package
from .worker.protocol import GENERATOR

NOT_RUN = "not run (module failed to import)"


def seeded(seed: int) -> dict:
    """An argument the student's function receives as ``torch.Generator().manual_seed(seed)``."""
    return {GENERATOR: seed}


def _as_sent(obj: Any) -> Any:
    """What the worker sends back for unchanged inputs (generators become None)."""
    if isinstance(obj, dict):
        if set(obj) == {GENERATOR}:
            return None
        return {k: _as_sent(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_as_sent(v) for v in obj]
    return obj


class Student:
    """The student's lesson module, reached through the worker, for one check."""

    def __init__(
        self,
        client: WorkerClient,
        check: Check,
        lesson: Lesson,
        timeout: float,
    ):
        self._client = client
        self.check = check
        self.lesson = lesson
        self.module = lesson.module
        self.timeout = timeout
        self._fatal: CheckFailed | None = None  # a crash or timeout ends the check

    def _guard(self, run: Callable[[], Any], function: str) -> Any:
        if self._fatal is not None:
            raise self._fatal
        try:
            return run()
        except CheckFailed as failure:
            if failure.hint is not None:
                self._fatal = failure
            raise

    def _traced(self, function: str) -> Rule | None:
        """The rule of a function graded on its operator graph (one with an allowlist)."""
        rule = self.lesson.rule(function)
        return rule if rule is not None and rule.traced else None

    def _trace(self, function: str, args: list, kwargs: dict) -> tuple[Any, Any]:
        """(the value's skeleton, its operator graph), and the inputs after the call."""
        name = f"{self.module}.{function}"
        return self._guard(
            lambda: self._client.call(name, args, kwargs, self.timeout, trace=True), function
        )

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """``module.function(*args, **kwargs)`` in the worker; fails if it changed its inputs.
        A by-hand function's value is the checker's run of its graph (graders/graph.py)."""
        name = f"{self.module}.{function}"
        traced = self._traced(function)
        if traced is not None:
            value, inputs = self._trace(function, list(args), kwargs)
            value = self._guard(
                lambda: graph.graded_value(
                    value,
                    traced,
                    list(args),
                    kwargs,
                    graph.Budget.of(self.timeout),
                    _oracle(function),
                ),
                function,
            )
        else:
            value, inputs = self._guard(
                lambda: self._client.call(name, list(args), kwargs, self.timeout),
                function,
            )
        if not same(inputs, [_as_sent(list(args)), _as_sent(kwargs)], rtol=0.0, atol=0.0):
            raise CheckFailed(f"{function} changed its input in place", hint=IN_PLACE)
        return value

    def error(self, function: str, *args: Any, **kwargs: Any) -> StudentError:
        """The exception the call raises; the check fails if it returns normally."""
        try:
            value = self.call(function, *args, **kwargs)
        except StudentError as error:
            if error.hint is not None:  # not implemented, sys.exit, out of memory
                raise
            return error
        from .checking import describe

        raise CheckFailed(f"{function} returned {describe(value)} instead of raising")

    def scenario(self, name: str, function: str | None = None, **config: Any) -> Any:
        """A trusted scenario (graders/worker/scenarios.py) around ``function`` (default: the
        check's)."""
        function = function or self.check.function
        target = f"{self.module}.{function}"
        traced = self._traced(function)
        if traced is not None and name == "grad":  # the checker's own autograd, on its graph
            args, wrt = list(config["args"]), list(config["wrt"])
            value, _ = self._trace(function, args, dict(config.get("kwargs") or {}))
            return self._guard(
                lambda: graph.graded_gradients(
                    value, traced, args, wrt, config.get("weights"), graph.Budget.of(self.timeout)
                ),
                function,
            )
        return self._guard(
            lambda: self._client.scenario(name, target, config, self.timeout),
            function,
        )


def _oracle(function: str) -> Callable[..., Any] | None:
    """The oracle of a by-hand function, for the second draw of its graph; None in the student
    release (no oracles: its answers are recorded for the check's own inputs only)."""
    from .secret_half import installed_secret

    oracles = installed_secret("oracles")
    if oracles is None:
        return None
    try:
        return oracles.named(function)
    except AttributeError:
        return None


def _import_failure(module: str, error: StudentError | CheckFailed) -> str:
    """One line: where the import failed and why ("objective.py, line 9: SyntaxError: ...")."""
    if isinstance(error, CheckFailed):  # it hung or crashed the worker
        return f"{module}.py: {error.detail}"
    where = error.where if isinstance(error.where, str) else f"{module}.py"
    message = error.message.replace(f" ({where})", "")  # a SyntaxError repeats its place
    return f"{where}: {error.type_name}: {message}" if message else f"{where}: {error.type_name}"


def _unwrap(error: BaseException) -> BaseException:
    """The harness's own exception inside hypothesis' wrappers (Flaky, exception groups)."""
    if isinstance(error, CheckFailed | StudentError | GraderUnavailable):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _unwrap(inner)
            if isinstance(found, CheckFailed | StudentError | GraderUnavailable):
                return found
    return error


class GradingPlugin:
    """Maps tests to checks, runs them against the worker and records the report."""

    def __init__(
        self,
        *,
        manifest: Manifest,
        checks: dict[str, Check],
        lessons: dict[str, Lesson],
        client: WorkerClient,
        report: Report,
        timeout_scale: float = 1.0,
        on_lesson: Callable[[dict], None] | None = None,
        on_check: Callable[[dict, dict], None] | None = None,
    ) -> None:
        self.every = {c.id: c for c in manifest.checks}
        self.checks = checks  # the selected checks, by id
        self.lessons = lessons  # the selected lessons, by slug
        self.client = client
        self.report = report
        self.timeout_scale = timeout_scale
        self.on_lesson = on_lesson
        self.on_check = on_check
        self.errors: list[str] = []
        self._item_check: dict[str, Check] = {}
        self._remaining: dict[str, int] = {}  # check id -> tests not finished
        # check id -> (hint, detail, the section of a diagnosed mistake's rule)
        self._failure: dict[str, tuple[str | None, str, str | None]] = {}
        self._lesson_left: dict[str, int] = {}
        self._lesson_now: str | None = None  # the lesson whose worker is running
        self._unreadable: dict[str, Flag] = {}  # lesson -> a file its import reads, unparsable

    # -- collection ---------------------------------------------------------------------------

    @pytest.hookimpl
    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "check(id): the manifest check this test grades")
        # A failure's traceback as Python prints it: pytest's own rendering parses every source
        # file of the traceback (a tenth of a second a failure, half the time of grading a
        # stub). Nothing shows it (no terminal); the report says what failed.
        config.option.tbstyle = "native"

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._read_package()  # before any of the student's code runs
        try:
            self.client.start()  # Python and torch load in the worker while pytest collects
        except WorkerUnavailable as error:
            self.errors.append(str(error))

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(f"cannot load grader {report.nodeid}:\n{report.longreprtext}")

    @pytest.hookimpl
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep: list[pytest.Item] = []
        deselected: list[pytest.Item] = []
        for item in items:
            check = self._check_for(item)
            if check is None:
                continue
            if check.id not in self.checks:
                deselected.append(item)
                continue
            self._item_check[item.nodeid] = check
            self._remaining[check.id] = self._remaining.get(check.id, 0) + 1
            keep.append(item)
        for check_id, check in self.checks.items():
            if check_id not in self._remaining:
                self.errors.append(f"check {check_id!r} ({check.lesson}) has no grader test")
        if self.errors:
            deselected += keep
            keep = []
        for check in self.checks.values():
            self._lesson_left[check.lesson] = self._lesson_left.get(check.lesson, 0) + 1
        items[:] = keep
        if deselected:
            config.hook.pytest_deselected(items=deselected)

    def _check_for(self, item: pytest.Item) -> Check | None:
        marker = item.get_closest_marker("check")
        where = item.nodeid
        if marker is None or len(marker.args) != 1 or not isinstance(marker.args[0], str):
            self.errors.append(f"{where}: needs exactly one @pytest.mark.check('id')")
            return None
        path = Path(str(item.path))
        slug = path.stem.removeprefix("test_")
        hidden = path.parent.name == "hidden"
        check_id = marker.args[0]
        check = self.every.get(check_id)
        if check is None:
            self.errors.append(f"{where}: check {check_id!r} is not in the manifest")
            return None
        if check.lesson != slug or check.hidden != hidden:
            self.errors.append(
                f"{where}: check {check_id!r} belongs to lesson {check.lesson!r} "
                f"({'hidden' if check.hidden else 'public'}), not this file"
            )
            return None
        return check

    def _read_package(self) -> None:
        """Every selected lesson's files, read as its import reads them (graders/rules.py): what
        only the source shows of its by-hand functions is flagged for review in the report with
        file and line, and no point rests on it; a file Python cannot parse is kept for the
        lesson's import error."""
        package = Package.read(self.client.target)
        for slug, lesson in self.lessons.items():
            self.report.flag(slug, package.review(lesson.module, lesson.rules))
            unreadable = package.cannot_import(lesson.module)
            if unreadable is not None:
                self._unreadable[slug] = unreadable

    # -- the fixture --------------------------------------------------------------------------

    @pytest.fixture
    def student(self, request: pytest.FixtureRequest) -> Student:
        check = self._item_check[request.node.nodeid]
        if check.id in self._failure:  # an earlier test of this check failed: it has 0 points
            pytest.skip("check already failed")
        lesson = self.lessons[check.lesson]
        timeout = check.timeout * self.timeout_scale
        if check.lesson != self._lesson_now:
            # Every lesson in a fresh process: what one lesson's code did to its process
            # (a patched torch, say) cannot reach another lesson's checks.
            self._lesson_now = check.lesson
            self.client.fresh()
        try:
            self.client.ensure_module(lesson.module, timeout)
        except (StudentError, CheckFailed) as error:
            # A file Python cannot parse: the reading's line names it and the cause, whatever
            # the import did with it (a MemoryError may end the lesson process).
            unreadable = self._unreadable.get(lesson.slug)
            message = (
                _import_failure(lesson.module, error) if unreadable is None else str(unreadable)
            )
            self.report.import_failed(lesson.slug, message)
            self._failure[check.id] = (None, NOT_RUN, None)
            pytest.skip("the module failed to import")
        return Student(self.client, check, lesson, timeout)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        check = self._item_check.get(item.nodeid)
        with answers.lesson(check.lesson if check is not None else None):
            yield  # the answers this test asks for belong to its lesson (when recording them)

    # -- results ------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        outcome = yield
        result = outcome.get_result()
        check = self._item_check.get(item.nodeid)
        if check is None or check.id in self._failure:
            return
        if result.skipped:
            self._failure[check.id] = (check.hint, "the grader skipped this check", None)
        elif result.failed:
            error = _unwrap(call.excinfo.value) if call.excinfo is not None else None
            if isinstance(error, GraderUnavailable):
                self.errors.append(str(error))
                item.session.shouldstop = "the graders cannot run"
            self._failure[check.id] = self._judge(check, error)

    def _judge(self, check: Check, error: BaseException | None) -> tuple[str, str, str | None]:
        if isinstance(error, CheckFailed):
            if error.hint is not None:
                return error.hint, error.detail, None
            if check.hidden and error.mistake not in check.mistakes:
                # Random inputs: an answer that matches a mistake on one (often degenerate)
                # example is weak evidence; a hidden check names only the mistakes it declares.
                return check.hint, error.detail, None
            lesson = self.lessons[check.lesson]
            try:
                hint = check.mistake_hint(error.mistake, lesson.mistakes(check.function))
            except ManifestError as problem:
                return check.hint, f"{error.detail} (grader problem: {problem})", None
            return hint, error.detail, lesson.mistake_section(check, error.mistake)
        if isinstance(error, StudentError):
            return error.hint or check.hint, error.detail, None
        if error is None:
            return check.hint, "the check failed", None
        message = str(error).splitlines()[0] if str(error) else ""
        return (
            check.hint,
            f"the grader could not judge the answer ({type(error).__name__}: {message[:300]})",
            None,
        )

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        check = self._item_check.get(report.nodeid)
        if check is None:
            return
        self._remaining[check.id] -= 1
        if self._remaining[check.id] > 0:
            return
        failure = self._failure.get(check.id)
        if failure is None:
            self.report.record(check, True, None, None)
        else:
            self.report.record(check, False, *failure)
        if self.on_check is not None:
            self.on_check(self.report.lesson(check.lesson), self.report.row(check.id))
        self._lesson_left[check.lesson] -= 1
        if self._lesson_left[check.lesson] == 0:
            self._gate_error_paths(check.lesson)
            if self.on_lesson is not None:
                self.on_lesson(self.report.lesson(check.lesson))

    def _gate_error_paths(self, slug: str) -> None:
        """An error check ("raises ValueError ...") keeps its points only when every other
        selected check of its function passed: an error raised by a stub earns nothing. It
        fails with the hint of its function's first failed check, the mistake to fix first."""
        checks = [c for c in self.checks.values() if c.lesson == slug]
        # function -> the hint of its first failed check, and the section that teaches it
        first: dict[str, tuple[str | None, str | None]] = {}
        for check in checks:
            if not check.error_path and check.id in self._failure:
                hint, _, section = self._failure[check.id]
                first.setdefault(check.function, (hint, section or check.section))
        for check in checks:
            if check.error_path and check.id not in self._failure and check.function in first:
                hint, section = first[check.function]
                hint = hint or check.hint
                detail = ERROR_PATH.format(function=check.function)
                self._failure[check.id] = (hint, detail, section)
                self.report.record(check, False, hint, detail, section)

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.client.close()
