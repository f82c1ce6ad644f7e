"""nbgrader preprocessors that close two of its known holes.

``RebuildFromGradebook`` (autograde, first sanitizing step): the notebook that gets executed
is rebuilt from the source cells nbgrader recorded in the gradebook at release time, in their
order (every cell of a lesson notebook is a locked cell whose grade id starts with its index).
Whatever the student did to the notebook (cells added, deleted, edited, moved, retyped, given
forged nbgrader metadata or duplicate ids) is gone: their work lives in ``exercises/``, not in
the notebook, so nothing of value is lost. Hidden tests come back with the source cells.

``KeepGradeOnFailure`` (autograde, right after the Execute step): a grading that failed by
the grader's own doing (a cell that raised, such as a kernel without the graders; no report
of these very files; a report that graded no check) stops nbgrader before it saves grades, so
the grade already there stays; the failure and its cause go to :mod:`.gradings`.

``HideHiddenTests`` (generate_feedback): cells that hold a ``### BEGIN HIDDEN TESTS`` block
lose the block and every output except the number nbgrader scored, so the feedback HTML shows
a hidden check's points and nothing of what it tested.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nbformat import from_dict
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

BEGIN_HIDDEN = "BEGIN HIDDEN TESTS"
END_HIDDEN = "END HIDDEN TESTS"


def released_cells(gb: Gradebook, notebook_name: str, assignment: str) -> list[Any]:
    """The notebook's cells as released, rebuilt from the source cells nbgrader recorded in the
    gradebook, in grade-id order (every cell of a lesson notebook is locked and its grade id
    starts with its index)."""
    notebook = gb.find_notebook(notebook_name, assignment)
    points = {cell.name: float(cell.max_score) for cell in notebook.grade_cells}
    sources = sorted(
        (
            (cell.name, cell.cell_type, cell.source, cell.locked, cell.checksum)
            for cell in notebook.source_cells
        ),
        key=lambda row: row[0],
    )
    cells = []
    for name, cell_type, source, locked, checksum in sources:
        meta: dict[str, Any] = {
            "grade": name in points,
            "grade_id": name,
            "locked": bool(locked),
            "schema_version": 3,
            "solution": False,
            "task": False,
            "checksum": checksum,
        }
        if name in points:
            meta["points"] = points[name]
        make = new_code_cell if cell_type == "code" else new_markdown_cell
        cell = make(
            source=source, metadata={"nbgrader": meta, "deletable": False, "editable": False}
        )
        cell.pop("id", None)  # nbformat 4.5 ids are optional; the source ones are unknown
        cells.append(cell)
    return cells


class RebuildFromGradebook(NbGraderPreprocessor):
    """Replace the submitted notebook's cells with the released ones, from the gradebook."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            cells = released_cells(gb, info["notebook"], info["assignment"])
        dropped = len(nb.cells) - len(cells)
        if dropped > 0:
            self.log.warning("Dropped %d cell(s) that are not in the released notebook", dropped)
        nb.cells = cells
        nb.nbformat_minor = min(nb.get("nbformat_minor", 4), 4)
        return nb, resources


class GradingFailed(Exception):
    """A grading failed by the grader's doing; nbgrader saves no grade for it."""


class KeepGradeOnFailure(NbGraderPreprocessor):
    """Stop nbgrader before it saves the grades of a grading that failed by its own doing."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources["nbgrader"]
        here = Path(resources["metadata"]["path"])  # COURSE/autograded/STUDENT/LESSON
        student, lesson = info["student"], info["assignment"]
        cause = failure(nb, here, student, lesson)
        if cause:
            from . import gradings

            gradings.failed(here.parents[2], student, lesson, _fingerprint(here, lesson), cause)
            raise GradingFailed(
                f"grading {student}/{lesson} failed ({cause}): its grade was not replaced; "
                "run nbgrader autograde again once the cause is fixed"
            )
        return nb, resources


def failure(nb: Any, here: Path, student: str, lesson: str) -> str | None:
    """Why the grading of the notebook ``nb``, executed in ``here``, is not the grader's
    verdict on these files (None when it is)."""
    from graders.notebook import RESULTS_ENV

    from .grading import graded_any

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"
    results = Path(os.environ.get(RESULTS_ENV) or here.parents[2] / "results")
    try:
        result = json.loads((results / student / f"{lesson}.json").read_text("utf-8"))
    except (OSError, ValueError):
        return "no grading report was written"
    if result.get("fingerprint") != _fingerprint(here, lesson):
        return "the grading report is not of these files"
    if not graded_any(result.get("report")):
        return result.get("error") or "the grading run graded no check"
    return None


def _fingerprint(here: Path, lesson: str) -> str:
    """The fingerprint of the submission's files in ``here`` (as the notebook's cells and
    autograde compute it)."""
    from core.fingerprint import files_digest
    from core.manifest import load_manifest
    from graders.notebook import student_files

    from .course import PACKAGE

    source = here.parents[2] / "source" / lesson / PACKAGE
    module = load_manifest().lesson(lesson).module
    return files_digest(student_files(source, here / PACKAGE, module))


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden test blocks, and every output but the score, from feedback notebooks."""

    begin = Unicode(BEGIN_HIDDEN).tag(config=True)
    end = Unicode(END_HIDDEN).tag(config=True)

    def preprocess_cell(self, cell: Any, resources: dict, index: int) -> tuple[Any, dict]:
        source = cell.get("source", "")
        if self.begin not in source:
            return cell, resources
        kept, inside = [], False
        for line in source.split("\n"):
            if self.begin in line:
                inside = True
            elif self.end in line:
                inside = False
            elif not inside:
                kept.append(line)
        cell.source = "\n".join(kept).rstrip("\n")
        if cell.get("cell_type") == "code":
            cell.outputs = [
                from_dict(
                    {**out, "data": {"text/plain": out["data"]["text/plain"]}, "metadata": {}}
                )
                for out in cell.get("outputs", [])
                if out.get("output_type") == "execute_result"
                and "text/plain" in out.get("data", {})
            ][:1]
        return cell, resources
