"""A students' release as instructor/release.py lays it out (``RELEASE/SLUG/`` per lesson, the
student's package in ``RELEASE/SLUG/exercises/``), built from the repository without running
the release: enough for the code that runs in a lesson folder (gpt/, core/, the manifest)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns("__pycache__")


def block_beside_attention(tmp_path: Path) -> Path:
    """The block lesson's folder, holding solutions/block.py, and lesson 4's folder, in which
    the student wrote attention (solutions/attention.py); lesson 2's folder is not there yet.
    Returns the release's folder; there is no reference (solutions/) in it."""
    release = tmp_path / "release"
    for slug in ("block", "attention"):
        folder = release / slug
        shutil.copytree(ROOT / "exercises", folder / "exercises", ignore=IGNORED)
        shutil.copytree(ROOT / "gpt", folder / "gpt", ignore=IGNORED)
        shutil.copytree(ROOT / "core", folder / "core", ignore=IGNORED)
        (folder / "course").mkdir()
        shutil.copyfile(ROOT / "course" / "lessons.toml", folder / "course" / "lessons.toml")
    shutil.copyfile(ROOT / "solutions" / "block.py", release / "block" / "exercises" / "block.py")
    attention = release / "attention" / "exercises" / "attention.py"
    shutil.copyfile(ROOT / "solutions" / "attention.py", attention)
    return release
