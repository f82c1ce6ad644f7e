"""``regrade --reproduce STUDENT LESSON``: grade a submission again exactly as it was graded.

A disputed grade is checked by grading the same files with the same secret seed (kept in
:mod:`.gradings`), and comparing each check's points and messages with the recorded report
(``results/STUDENT/LESSON.json``). Nothing is recorded: the gradebook keeps its grade.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import gradings
from .autograde import submission_files
from .course import Course
from .errors import SetupError
from .gradebook import rows_by_check
from .grading import DEFAULT_TIMEOUT, grade_files

COMPARED = ("points", "max_points", "passed", "hint", "detail")  # what a student is shown


@dataclass
class Reproduction:
    rows: list[dict[str, Any]]  # the checks as graded again
    differences: list[str]  # one line per check whose points or messages differ
    graded: str  # when the recorded grading ran


def reproduce(
    course: Course,
    student: str,
    lesson: str,
    *,
    sandbox: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    grader: Callable[..., dict[str, Any]] | None = None,
) -> Reproduction:
    """Grade ``submitted/STUDENT/LESSON`` again with its recorded seed and compare."""
    entry = gradings.entry(course.root, student, lesson)
    if not entry or "seed" not in entry:
        raise SetupError(
            f"no grading of {student}/{lesson} is on record in {gradings.path(course.root)}: "
            f"autograde it first (nox -s autograde -- {lesson} --student {student})"
        )
    if not (course.submitted / student / lesson).is_dir():
        raise SetupError(f"submitted/{student}/{lesson}/ is gone: nothing to grade again")
    files, digest = submission_files(course, student, lesson)
    if digest != entry["fingerprint"]:
        raise SetupError(
            f"submitted/{student}/{lesson}/ changed since its grade was recorded "
            f"({entry['graded']}): those files are no longer there to grade again"
        )
    try:
        recorded = json.loads((course.results / student / f"{lesson}.json").read_text())
    except (OSError, ValueError):
        raise SetupError(
            f"results/{student}/{lesson}.json, the recorded report, is missing or unreadable: "
            "there is nothing to compare with"
        ) from None
    grade = grader or grade_files
    again = grade(lesson, files, sandbox=sandbox, timeout=timeout, seed=entry["seed"])
    before = rows_by_check(recorded["report"], lesson)
    after = rows_by_check(again["report"], lesson)
    differences = []
    for check_id in sorted(before.keys() | after.keys()):
        old, new = before.get(check_id, {}), after.get(check_id, {})
        changed = [key for key in COMPARED if old.get(key) != new.get(key)]
        if changed:
            said = "; ".join(f"{key} {old.get(key)!r} then {new.get(key)!r}" for key in changed)
            differences.append(f"{check_id}: {said}")
    return Reproduction(list(after.values()), differences, entry["graded"])
