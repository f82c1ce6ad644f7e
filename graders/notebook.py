"""What the lesson notebooks' test cells call: ``check(lesson, check_id)`` returns its points.

Every autograder cell of a lesson notebook is one line, ``check("embeddings", "lookup-...")``,
whose value (a number between 0 and the check's points) nbgrader records as the cell's partial
credit. The cell never imports the student's code: the grading harness (``python -m graders``)
runs it in a separate worker process, and this module only reads the harness's JSON report.
Nothing here writes to standard error and every warning is silenced, because nbgrader gives 0
to any test cell that prints to stderr; every failure ends as 0 points, never as no output
(which nbgrader would count as full marks).

Two modes:

* Student (the released notebook, opened in Jupyter): the first check runs the public graders
  shipped beside the notebook (``python -m graders LESSON --target exercises``) once, and
  again whenever ``exercises/`` changes; each cell prints its check's result, hint and link.
* Autograde (nbgrader sets ``NBGRADER_EXECUTION=autograde``): the notebook runs in
  ``autograded/STUDENT/LESSON`` of the course directory, and the result comes from
  ``results/STUDENT/LESSON.json``, which ``python -m instructor autograde`` writes
  by grading the same files (public and hidden checks, sandboxed) before nbgrader runs. The
  report is used only if its fingerprint matches the student's files in this folder and it
  was graded by the graders as they are now (:func:`core.fingerprint.graders_digest`); when it
  is missing or stale (plain ``nbgrader autograde``), the first cell grades the submission
  itself through ``python -m instructor grade-submission``. Hidden checks print
  nothing but their points.

This file ships to students (it holds nothing secret) and needs only the standard library.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.fingerprint import files_digest, graders_digest

from .report import NOT_GRADED, told_with

RESULTS_ENV = "COURSE_AUTOGRADE_RESULTS"  # folder of STUDENT/LESSON.json (instructors)
SITE_URL = ""  # the course site; the release writes it here, so links point to the lesson
PACKAGE = "exercises"  # the student's package, beside the notebook
GRADE_TIMEOUT = 1800  # seconds for one lesson's grading run

POLL = 0.05  # seconds between two reads of a running grading's report

_reports: dict[tuple, dict] = {}  # autograde: each result file's report, read once
_runs: dict[tuple, _Grading] = {}  # student: (folder, lesson, hidden) -> its latest grading


class NotGraded(RuntimeError):
    """The graders could not run here; the message is their one line on what to do."""


def check(lesson: str, check_id: str) -> float:
    """Points earned by one check (0 when it failed or could not be graded)."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        try:
            if os.environ.get("NBGRADER_EXECUTION") == "autograde":
                row, rows = _autograde_row(lesson, check_id)
            else:
                row, rows = _student_row(lesson, check_id)
        except NotGraded as error:
            print(f"✗ {check_id}: 0 points: {error}")
            return 0
        except Exception as error:  # noqa: BLE001 - a cell must end in a number, never a traceback
            print(f"✗ {check_id}: not graded ({_one_line(error)})")
            return 0
    return _show(row, rows)


def submit(lesson: str) -> None:
    """The notebook's last cell: write LESSON-submission.zip in this folder (the lesson's module
    and the notebook, graders/submission.py) and say so; nothing at autograde."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return
    from .submission import SubmissionError, make_submission, submission_files

    try:
        path = make_submission(lesson, Path.cwd())
    except SubmissionError as error:
        print(f"✗ no submission written: {error}")
        return
    held = " and ".join(submission_files(lesson, Path.cwd()))
    print(f"✓ wrote {path.name} ({held}): hand in this file. Save the notebook first (Ctrl-S)")
    print("  if you want its outputs in it; only your module is graded.")


def _show(row: dict[str, Any], rows: Mapping[str, dict[str, Any]]) -> float:
    autograde = os.environ.get("NBGRADER_EXECUTION") == "autograde"
    text, points = render(row, autograde=autograde, site=_site(), rows=rows)
    if text:
        print(text, end="")
    return points


def render(
    row: dict[str, Any],
    *,
    autograde: bool,
    site: str = "",
    rows: Mapping[str, dict[str, Any]] | None = None,
) -> tuple[str, float]:
    """What a check's cell prints, and its value (the points nbgrader records): the result,
    and for a failed check its hint, what happened and where to read; at autograde, a hidden
    check shows nothing but its points. A failure that an earlier one explains (its
    ``explained_by``, looked up in ``rows``: the lesson's rows by id) is told as the terminal
    tells it: under that one mistake, with its hint and its section (graders/report.py)."""
    try:
        points = float(row.get("points") or 0)
        most = float(row.get("max_points") or 0)
    except (TypeError, ValueError):
        return "", 0
    points = _number(min(max(points, 0.0), most))
    if row.get("hidden") and autograde:
        return "", points
    mark = "✓" if row.get("passed") else "✗"
    lines = [f"{mark} {row.get('id')}: {points} of {_number(most)} points"]
    if not row.get("passed"):
        first = (rows or {}).get(row.get("explained_by") or "")
        if first is not None and not first.get("hidden"):
            lines.append(f"  {first['id']} failed first: {told_with(first, [row])}")
            shown, about = first, f" ({first['id']})"
        else:
            shown, about = row, ""
        if shown.get("hint"):
            lines.append(f"  hint{about}: {shown['hint']}")
        if row.get("detail"):
            lines.append(f"  what happened: {row['detail']}")
        where = site + shown["url"] if site and shown.get("url") else shown.get("link")
        if where:
            lines.append(f"  read: {where}")
    return "\n".join(lines) + "\n", points


def _site() -> str:
    if SITE_URL or os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return SITE_URL
    try:  # instructors: the address the release used, in COURSE/release.json
        course = Path.cwd().parents[2]  # COURSE/autograded/STUDENT/LESSON
        return str(json.loads((course / "release.json").read_text())["site_url"])
    except Exception:  # noqa: BLE001
        return ""


def _number(value: float) -> float:
    return int(value) if float(value).is_integer() else value


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def _find(report: dict, lesson: str, check_id: str) -> dict | None:
    """The check's row (:func:`with_cause`)."""
    for entry in report.get("lessons", []):
        if entry.get("slug") == lesson or lesson in (None, ""):
            for row in entry.get("checks", []):
                if row.get("id") == check_id:
                    return with_cause(entry, row)
    return None


def with_cause(entry: dict, row: dict) -> dict:
    """A check's row of the report's lesson ``entry``; one its failed import kept from running
    says why (the exception's last line, file and line in the student's code)."""
    cause = entry.get("import_error")
    if cause and not row.get("passed"):
        return {**row, "detail": f"not run: the module failed to import: {cause}"}
    return row


# -- student mode ------------------------------------------------------------------------------


def _student_row(lesson: str, check_id: str) -> tuple[dict, dict[str, dict]]:
    here = Path.cwd()
    stamp = _stamp(here / PACKAGE)
    for hidden in (False, True):  # hidden only when previewing the instructors' source notebook
        key = (str(here), lesson, hidden)
        run = _runs.get(key)
        if run is None or run.stamp != stamp:  # the package changed: grade it again
            if run is not None:
                run.stop()
            run = _runs[key] = _Grading(here, lesson, hidden, stamp)
        found = run.wait_for(lesson, check_id)
        if found is not None:
            return found
    raise LookupError(f"the graders know no check {check_id!r} in lesson {lesson!r}")


class _Grading:
    """One run of the graders on the package, in the background: ``python -m graders`` rewrites
    its JSON report after every check, so a cell shows its check as soon as it and the checks
    before it are graded (the first cell comes as soon as the terminal's first verdict would),
    while the run goes on for the cells after it."""

    def __init__(self, here: Path, lesson: str, hidden: bool, stamp: tuple) -> None:
        self.stamp = stamp
        self._tmp = tempfile.TemporaryDirectory(prefix="course-check-")
        self.report_path = Path(self._tmp.name) / "report.json"
        self._stderr = open(Path(self._tmp.name) / "stderr.txt", "wb")  # the run writes to it
        command = harness_command(lesson, here / PACKAGE, self.report_path, hidden=hidden)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(here), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        self.process = subprocess.Popen(
            command,
            cwd=here,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        self.started = time.monotonic()

    def wait_for(self, lesson: str, check_id: str) -> tuple[dict, dict[str, dict]] | None:
        """The check's row once it, and every check the report lists before it, is graded (an
        earlier failure may explain it); None when the run does not know the check."""
        while True:
            ended = self.process.poll() is not None
            report = self._read()
            if report is not None:
                for entry in report.get("lessons", []):
                    if entry.get("slug") != lesson:
                        continue
                    rows = entry.get("checks", [])
                    ids = [row.get("id") for row in rows]
                    if check_id not in ids:
                        return None  # every check of the lesson is listed from the start
                    before = rows[: ids.index(check_id) + 1]
                    if (
                        ended
                        or report.get("complete")
                        or all(row.get("detail") != NOT_GRADED for row in before)
                    ):
                        return rows[ids.index(check_id)], {row["id"]: row for row in rows}
                if ended or report.get("complete"):
                    return None
            if ended:
                self._stderr.flush()
                said = (Path(self._tmp.name) / "stderr.txt").read_bytes()
                message = said.decode("utf-8", "replace").strip().splitlines()
                last = message[-1] if message else f"graders exited {self.process.returncode}"
                raise NotGraded(last.removeprefix("error: "))
            if time.monotonic() - self.started > GRADE_TIMEOUT:
                self.stop()
                raise TimeoutError(f"grading took longer than {GRADE_TIMEOUT} s")
            time.sleep(POLL)

    def _read(self) -> dict | None:
        try:  # written atomically: the old report or the new one, never a part
            data = json.loads(self.report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._stderr.close()
        self._tmp.cleanup()


def _stamp(package: Path) -> tuple:
    """Changes whenever a file of the package does (a new grading run then starts)."""
    return tuple(
        sorted(
            (str(p), p.stat().st_mtime_ns, p.stat().st_size)
            for p in package.rglob("*.py")
            if p.is_file()
        )
    )


def harness_command(
    lesson: str, target: Path, report: Path, *, hidden: bool, sandbox: bool = False
) -> list[str]:
    """The grading harness's command line: ``python -m graders LESSON`` on the package
    ``target``, its JSON report written to ``report`` (the notebook's cells and instructor
    autograde both run it)."""
    flags = (["--hidden"] if hidden else []) + (["--sandbox"] if sandbox else [])
    return [
        sys.executable,
        "-m",
        "graders",
        lesson,
        "--target",
        str(target),
        "--json",
        str(report),
    ] + flags


# -- autograde mode ----------------------------------------------------------------------------


def _autograde_row(lesson: str, check_id: str) -> tuple[dict, dict[str, dict]]:
    here = Path.cwd()  # COURSE/autograded/STUDENT/LESSON
    student, course = here.parent.name, here.parents[2]
    results = Path(os.environ.get(RESULTS_ENV) or course / "results")
    path = results / student / f"{lesson}.json"
    key = ("autograde", str(path))
    report = _reports.get(key)
    if report is None:
        from core.manifest import load_manifest

        module = load_manifest().lesson(lesson).module
        source = course / "source" / lesson / PACKAGE
        expected = files_digest(student_files(source, here / PACKAGE, module))
        report = _read_result(path, expected)
        if report is None:  # missing or stale: grade now, in a process of its own
            command = [
                sys.executable,
                "-m",
                "instructor",
                "grade-submission",
                "--course",
                str(course),
                "--student",
                student,
                "--lesson",
                lesson,
                "--from",
                str(here),
                "--results",
                str(results),
            ]
            subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=GRADE_TIMEOUT,
                cwd=_instructor_root(),
            )
            report = _read_result(path, expected) or {
                "failed": f"grading {student}/{lesson} left no report"
            }
        _reports[key] = report  # a failure too: the other cells do not grade again
    if "failed" in report:
        raise RuntimeError(report["failed"])
    row = _find(report, lesson, check_id)
    if row is None:
        raise LookupError(f"no result for check {check_id!r}")
    rows = next(e["checks"] for e in report["lessons"] if row in e.get("checks", []))
    return row, {each["id"]: each for each in rows}


def _instructor_root() -> str:
    import graders

    return str(Path(graders.__file__).resolve().parents[1])


def _read_result(path: Path, expected: str) -> dict | None:
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("fingerprint") != expected:
        return None
    if result.get("graders") != graders_digest():
        return None  # graded by other graders (a check fixed since): grade again
    report = result.get("report")
    return report if isinstance(report, dict) else None


def student_files(source: Path, submission: Path, module: str) -> dict[str, Path]:
    """The package as graded: every ``.py`` file of the released package (``source``) except
    the lesson's module, which comes from the submission (the released stub if it is
    missing), plus the submission's own extra ``.py`` files. Symbolic links never count.
    This mirrors what nbgrader's autograde leaves in ``autograded/`` (where only the module
    is excluded from overwriting), so both sides grade and fingerprint the same files."""

    def python_files(folder: Path) -> dict[str, Path]:
        found: dict[str, Path] = {}
        if not folder.is_dir() or folder.is_symlink():
            return found
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(
                d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(root, d))
            )
            for name in files:
                path = Path(root) / name
                if name.endswith(".py") and not path.is_symlink() and path.is_file():
                    found[path.relative_to(folder).as_posix()] = path
        return found

    released, submitted = python_files(source), python_files(submission)
    mine = f"{module}.py"
    files = {rel: path for rel, path in submitted.items() if rel not in released}
    files.update({rel: path for rel, path in released.items() if rel != mine})
    files[mine] = submitted.get(mine) or released[mine]
    return dict(sorted(files.items()))
