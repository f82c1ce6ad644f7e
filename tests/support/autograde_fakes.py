"""A stand-in for the grading harness in tests of the autograde pipeline's own work (engine,
recording, exports, report): the submission's lesson module says, in comments, which checks it
fails and with which diagnosed mistake, and the fake reports exactly that, as the harness's
JSON report would. Importable by Dask's worker processes (they get the test run's sys.path).

    # FAIL lookup-matches-indexing=off-by-one     fails the check with that mistake
    # FAIL nearest-cosine                         fails it with the check's general hint
    # FAIL nearest-cosine=not-implemented         fails it as a stub still in place
    # FAIL nearest-cosine=timed-out               fails it as the harness's time limit does
    # IMPORT-ERROR SyntaxError: ... (line 3)      the module fails to import: no check runs
    # SLEEP 1.5                                   takes that long (a task still in flight)
    # RAISE                                       the grading task itself raises
    # BROKEN                                      the harness grades nothing (its own failure)

The seed it is given shows in every failed check's detail (``seed N``), as a drawn input would.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

MARK = re.compile(r"^#\s*FAIL\s+([\w.-]+)(?:=([\w.-]+))?\s*$", re.M)
SLEEP = re.compile(r"^#\s*SLEEP\s+([\d.]+)\s*$", re.M)
RAISE = re.compile(r"^#\s*RAISE\s*$", re.M)
IMPORT_ERROR = re.compile(r"^#\s*IMPORT-ERROR\s+(.+)$", re.M)
BROKEN = re.compile(r"^#\s*BROKEN\s*$", re.M)


class GradingTaskError(RuntimeError):
    """What a grading task that breaks down raises (the fake's stand-in for any error)."""


def marks(fails: dict[str, str | None], sleep: float = 0.0) -> str:
    """The comments that make the fake fail ``fails`` (check id -> mistake key or None)."""
    lines = [f"# FAIL {check}" + (f"={key}" if key else "") for check, key in fails.items()]
    if sleep:
        lines.append(f"# SLEEP {sleep}")
    return "\n" + "\n".join(lines) + "\n"


def submit(
    course: Path, student: str, fails: dict, *, lesson: str = "embeddings", sleep: float = 0.0
) -> Path:
    """``submitted/STUDENT/LESSON/`` of the course folder ``course``: the released lesson, its
    module marked to fail ``fails`` (see :func:`marks`). Returns the folder."""
    from core.manifest import load_manifest

    dest = course / "submitted" / student / lesson
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(course / "release" / lesson, dest)
    module = dest / "exercises" / f"{load_manifest().lesson(lesson).module}.py"
    module.write_text(module.read_text() + marks(fails, sleep))
    return dest


def fake_grade(
    lesson: str,
    files: dict[str, bytes],
    *,
    sandbox: bool = True,
    timeout: float = 900.0,
    seed: int | None = None,
    scratch: str | None = None,
) -> dict[str, Any]:
    from core.manifest import load_manifest

    about = load_manifest().lesson(lesson)
    text = files[f"{about.module}.py"].decode()
    fails = {check: key or None for check, key in MARK.findall(text)}
    if RAISE.search(text):
        raise GradingTaskError(f"the grading task for {lesson} broke down")
    sleep = SLEEP.search(text)
    if sleep:
        time.sleep(float(sleep.group(1)))
    from graders.hints import NOT_IMPLEMENTED, TIMED_OUT

    seed = seed or 1
    import_error = IMPORT_ERROR.search(text)
    if import_error:
        fails = dict.fromkeys((c.id for c in about.checks), "import")
    broken = bool(BROKEN.search(text))
    rows = []
    for check in about.checks:
        passed = check.id not in fails
        if passed or fails[check.id] == "import":
            hint = None
        elif fails[check.id] == "not-implemented":
            hint = NOT_IMPLEMENTED
        elif fails[check.id] == "timed-out":
            hint = TIMED_OUT.format(seconds=check.timeout)
        else:
            hint = check.mistake_hint(fails[check.id], about.mistakes(check.function))
        rows.append(
            {
                "id": check.id,
                "function": check.function,
                "points": check.points if passed else 0,
                "max_points": check.points,
                "passed": passed,
                "hint": hint,
                "link": check.link,
                "url": check.url,
                "detail": (
                    "not run (module failed to import)"
                    if import_error
                    else "not graded"
                    if broken
                    else None
                    if passed
                    else f"seed {seed}"
                ),
                "hidden": check.hidden,
            }
        )
    points = sum(row["points"] for row in rows)
    most = sum(check.points for check in about.checks)
    report = {
        "target": "fake",
        "hidden": True,
        "complete": True,
        "points": points,
        "max_points": most,
        "lessons": [
            {
                "slug": lesson,
                "title": about.title,
                "points": points,
                "max_points": most,
                "import_error": import_error.group(1) if import_error else None,
                "checks": rows,
            }
        ],
    }
    if broken:
        for row in rows:
            row.update(points=0, passed=False, hint=None)
        report.update(points=0, complete=False)
        report["lessons"][0]["points"] = 0
        error = "the grading run exited with status 1"
        return {"report": report, "error": error, "seconds": 0.0, "log": "", "seed": seed}
    return {"report": report, "error": None, "seconds": 0.0, "log": "", "seed": seed}
