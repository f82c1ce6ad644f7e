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
  was graded by the graders as they are now (:func:`.fingerprint.graders_digest`); when it
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
import warnings
from pathlib import Path
from typing import Any

from .fingerprint import files_digest, graders_digest

RESULTS_ENV = "COURSE_AUTOGRADE_RESULTS"  # folder of STUDENT/LESSON.json (instructors)
SITE_URL = ""  # the course site; the release writes it here, so links point to the lesson
PACKAGE = "exercises"  # the student's package, beside the notebook
GRADE_TIMEOUT = 1800  # seconds for one lesson's grading run

_reports: dict[tuple, dict] = {}


def check(lesson: str, check_id: str) -> float:
    """Points earned by one check (0 when it failed or could not be graded)."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        try:
            if os.environ.get("NBGRADER_EXECUTION") == "autograde":
                row = _autograde_row(lesson, check_id)
            else:
                row = _student_row(lesson, check_id)
        except Exception as error:  # noqa: BLE001 - a cell must end in a number, never a traceback
            print(f"✗ {check_id}: not graded ({_one_line(error)})")
            return 0
    return _show(row)


def _show(row: dict[str, Any]) -> float:
    autograde = os.environ.get("NBGRADER_EXECUTION") == "autograde"
    text, points = render(row, autograde=autograde, site=_site())
    if text:
        print(text, end="")
    return points


def render(row: dict[str, Any], *, autograde: bool, site: str = "") -> tuple[str, float]:
    """What a check's cell prints, and its value (the points nbgrader records): the result,
    and for a failed check its hint, what happened and where to read; at autograde, a hidden
    check shows nothing but its points."""
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
        for key, label in (("hint", "hint"), ("detail", "what happened")):
            if row.get(key):
                lines.append(f"  {label}: {row[key]}")
        where = site + row["url"] if site and row.get("url") else row.get("link")
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


def _student_row(lesson: str, check_id: str) -> dict:
    here = Path.cwd()
    key = ("student", str(here), lesson, _stamp(here / PACKAGE))
    for hidden in (False, True):  # hidden only when previewing the instructors' source notebook
        report = _reports.get((*key, hidden))
        if report is None:
            report = _run_graders(here, lesson, hidden)
            _reports[(*key, hidden)] = report
        row = _find(report, lesson, check_id)
        if row is not None:
            return row
    raise LookupError(f"the graders know no check {check_id!r} in lesson {lesson!r}")


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


def _run_graders(here: Path, lesson: str, hidden: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        report_path = Path(tmp) / "report.json"
        command = harness_command(lesson, here / PACKAGE, report_path, hidden=hidden)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(here), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        done = subprocess.run(
            command,
            cwd=here,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GRADE_TIMEOUT,
        )
        if not report_path.exists():
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise RuntimeError(message[-1] if message else f"graders exited {done.returncode}")
        return json.loads(report_path.read_text(encoding="utf-8"))


# -- autograde mode ----------------------------------------------------------------------------


def _autograde_row(lesson: str, check_id: str) -> dict:
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
    return row


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
