"""A Gradescope autograder zip laid out as Gradescope lays it out, in a folder of the test's."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path


def lay_out(archive: Path, autograder: Path) -> Path:
    """Unpack ``archive`` into ``autograder/source`` with the modes it records, make the folders
    enterable (Gradescope's /autograder is), put run_autograder beside source/ and an empty
    submission/ folder; returns ``autograder``."""
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(autograder / "source")
        for info in opened.infolist():
            (autograder / "source" / info.filename).chmod(info.external_attr >> 16)
    for folder in [autograder.parent, autograder, *(autograder / "source").rglob("*")]:
        if folder.is_dir():
            folder.chmod(0o755)
    shutil.copy(autograder / "source" / "run_autograder", autograder / "run_autograder")
    (autograder / "submission").mkdir()
    return autograder
