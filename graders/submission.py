"""What a student submits for a lesson, as one zip: the lesson's graded module and its notebook.

``python -m graders LESSON --zip`` (or the notebook's last cell, ``submit("LESSON")``) writes
``LESSON-submission.zip`` in the lesson folder, holding ``exercises/MODULE.py`` and
``LESSON.ipynb`` and nothing else: not the graders, ``gpt/``, ``core/`` or the grading reports,
which the instructor has already (autograde restores them from the release). That is the layout
``python -m instructor collect`` reads. Standard library only: the notebook imports it.
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import Path

from core.atomic import atomic_write_bytes
from core.manifest import ROOT, load_manifest

from .where import SUBMISSION

PACKAGE = "exercises"


class SubmissionError(ValueError):
    """A submission that cannot be made; the message says what is missing and what to do."""


def submission_files(lesson: str, folder: Path | None = None) -> dict[str, Path]:
    """The files a submission of ``lesson`` holds: name in the zip -> file in ``folder``."""
    folder = Path(folder or ROOT)
    try:
        entry = load_manifest().lesson(lesson)
    except KeyError as unknown:
        raise SubmissionError(unknown.args[0]) from None
    files = {
        f"{PACKAGE}/{entry.module}.py": folder / PACKAGE / f"{entry.module}.py",
        f"{entry.slug}.ipynb": folder / f"{entry.slug}.ipynb",
    }
    missing = [name for name, path in files.items() if not path.is_file()]
    if missing:
        raise SubmissionError(
            f"no {' or '.join(missing)} in {folder}: run this in the lesson's folder, "
            f"the one the release gave you for {entry.slug}"
        )
    return files


def make_submission(lesson: str, folder: Path | None = None) -> Path:
    """Write ``LESSON-submission.zip`` in ``folder`` (atomically) and return its path."""
    folder = Path(folder or ROOT)
    files = submission_files(lesson, folder)
    slug = next(name for name in files if name.endswith(".ipynb"))[: -len(".ipynb")]
    target = folder / SUBMISSION.format(lesson=slug)
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in files.items():
            archive.write(path, name)
    atomic_write_bytes(target, buffer.getvalue())
    return target
