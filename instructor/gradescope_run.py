"""Gradescope's ``run_autograder`` for one lesson: grade the upload, write ``results.json``.

This file travels in the autograder zip that :mod:`.gradescope` builds and runs there, as a
script, from ``/autograder/source`` (the zip's contents): standard library only at import,
the course's graders at run time. Gradescope puts the student's upload in
``/autograder/submission/`` and reads ``/autograder/results/results.json``
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). The upload is the lesson's
module (``MODULE.py``, alone or inside the released ``exercises/`` folder); the rest of the
package is the released one, as in nbgrader autograde. Hidden checks are reported with
visibility ``after_published``: students see them once the instructor publishes the grades.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent
PACKAGE = "exercises"
TIMEOUT = 900  # seconds for the grading run (Gradescope's own limit is set on its page)


def results(report: dict[str, Any]) -> dict[str, Any]:
    """Gradescope's results.json from the harness's JSON report: a test per check."""
    tests = []
    for lesson in report.get("lessons", []):
        for row in lesson["checks"]:
            words = [] if row.get("passed") else [row.get("hint") or row.get("detail") or ""]
            where = row.get("url") or row.get("link")
            if where:
                words.append(f"Read: {where}")
            tests.append(
                {
                    "name": f"{row['id']} ({row['function']})",
                    "score": row["points"],
                    "max_score": row["max_points"],
                    "output": "\n".join(w for w in words if w),
                    "visibility": "after_published" if row.get("hidden") else "visible",
                }
            )
    return {"tests": tests, "stdout_visibility": "hidden"}


def failed(why: str) -> dict[str, Any]:
    """A run that graded nothing: 0 points, and what to do, as the whole result."""
    return {"score": 0, "output": why, "tests": [], "stdout_visibility": "hidden"}


def find_upload(submission: Path, module: str) -> Path | None:
    """The student's ``MODULE.py``: in the released folder layout or uploaded alone."""
    for candidate in (submission / PACKAGE / f"{module}.py", submission / f"{module}.py"):
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    found = sorted(
        p for p in submission.rglob(f"{module}.py") if p.is_file() and not p.is_symlink()
    )
    return found[0] if found else None


def grade(root: Path) -> dict[str, Any]:
    config = json.loads((SOURCE / "gradescope.json").read_text(encoding="utf-8"))
    lesson, module = config["lesson"], config["module"]
    upload = find_upload(root / "submission", module)
    if upload is None:
        return failed(
            f"no {module}.py in the submission: upload the lesson's module "
            f"({PACKAGE}/{module}.py) and submit again"
        )
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        target = Path(tmp) / PACKAGE
        shutil.copytree(SOURCE / PACKAGE, target)
        shutil.copyfile(upload, target / f"{module}.py")
        report_path = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "graders", lesson, "--target", str(target)]
        command += ["--hidden", "--json", str(report_path)]
        if shutil.which("bwrap"):  # setup.sh installs it; the worker is sandboxed with it
            command.append("--sandbox")
        env = dict(os.environ, PYTHONPATH=str(SOURCE), PYTHONSAFEPATH="1")
        env["COURSE_INPUT_SEED"] = str(secrets.randbelow(2**63 - 1) + 1)  # no release's inputs
        try:
            subprocess.run(command, cwd=SOURCE, env=env, stdin=subprocess.DEVNULL, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pass  # the report holds the checks graded so far
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return failed(
                "the grading run left no report (see the autograder's output); submit again, "
                "and tell the course staff if it happens twice"
            )
    return results(report)


def main() -> int:
    root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(grade(root), indent=1) + "\n"
    partial = out.with_name(".results.json.partial")
    partial.write_text(data, encoding="utf-8")
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
