"""``collect``: submissions as zips (one per student, from an LMS) into ``submitted/``.

Put the zips in ``build/nbgrader/downloaded/LESSON/archive/``, one per student, named
``STUDENT.zip`` (or LMS-style ``anything_STUDENT_attempt_...zip``); each holds the lesson's
folder as released (``LESSON.ipynb`` and ``exercises/``), at its top level or inside one
folder. ``nbgrader zip_collect`` extracts them and :class:`SubmissionCollector` tells it whose
each file is and where it goes: only the notebook and the ``exercises/`` package are kept,
the rest of a submission is left out (autograde restores it from source/ anyway).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from nbgrader.plugins import FileNameCollectorPlugin

_STUDENT = re.compile(r"^[A-Za-z0-9][\w.@-]*$")


def student_of(archive: str) -> str | None:
    """``ann`` for ``ann`` (from ann.zip) and for ``hw1_ann_attempt_2026-01-30`` (LMS style)."""
    if "_attempt_" in archive:
        archive = archive.split("_attempt_")[0].rsplit("_", 1)[-1]
    return archive if _STUDENT.match(archive) else None


class SubmissionCollector(FileNameCollectorPlugin):
    """Student id from the archive's name; file id = path inside the lesson folder."""

    def collect(self, submitted_file: str) -> dict | None:
        parts = PurePosixPath(submitted_file.replace("\\", "/")).parts
        try:
            at = len(parts) - 1 - parts[::-1].index("extracted")
        except ValueError:
            return None
        inside = list(parts[at + 1 :])
        if len(inside) < 2:
            return None
        student = student_of(inside[0])
        if student is None:
            self.log.warning("Skipped %s: no student id in the archive name", submitted_file)
            return None
        files = inside[1:]
        # Accept the lesson's folder at the top of the zip (LESSON/...) as well.
        while len(files) > 1 and files[0] != "exercises" and not files[0].endswith(".ipynb"):
            files = files[1:]
        rel = "/".join(files)
        wanted = (len(files) == 1 and rel.endswith(".ipynb")) or (
            files[0] == "exercises" and rel.endswith(".py") and "__pycache__" not in files
        )
        if not wanted or any(part in ("", ".", "..") for part in files):
            return None
        return {"student_id": student, "file_id": rel}
