"""nbgrader preprocessors that close two of its known holes.

``RebuildFromGradebook`` (autograde, first sanitizing step): the notebook that gets executed
is rebuilt from the source cells nbgrader recorded in the gradebook at release time, in their
order (every cell of a lesson notebook is a locked cell whose grade id starts with its index).
Whatever the student did to the notebook (cells added, deleted, edited, moved, retyped, given
forged nbgrader metadata or duplicate ids) is gone: their work lives in ``exercises/``, not in
the notebook, so nothing of value is lost. Hidden tests come back with the source cells.

``HideHiddenTests`` (generate_feedback): cells that hold a ``### BEGIN HIDDEN TESTS`` block
lose the block and every output except the number nbgrader scored, so the feedback HTML shows
a hidden check's points and nothing of what it tested.
"""

from __future__ import annotations

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
