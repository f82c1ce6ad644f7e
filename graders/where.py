"""Where the graders run: the course's repository, or a lesson folder of the student release.

A released lesson folder has ``release.json`` at its root (instructor/release.py writes it:
the course site's address and the lesson); the repository has none. What a student is told
depends on it: the command that grades (``nox -s grade -- LESSON`` in the repository,
``python -m graders LESSON`` in a release, which has no noxfile), the address of a section
(the site the release recorded), and what to install when a package is missing.
Standard library only: the notebook's cell side imports it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from core.manifest import ROOT

RELEASE_FILE = "release.json"  # at the root of a released lesson folder
REQUIREMENTS = "requirements.txt"  # beside it: what the lesson needs installed
SUBMISSION = "{lesson}-submission.zip"  # what `python -m graders LESSON --zip` writes


def release_info(root: Path | None = None) -> dict[str, Any] | None:
    """The released lesson folder's ``release.json``, or None in the repository."""
    try:
        data = json.loads((Path(root or ROOT) / RELEASE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def in_release(root: Path | None = None) -> bool:
    """True in a lesson folder of the student release."""
    return release_info(root) is not None


def released_site(root: Path | None = None) -> str | None:
    """The course site's address a release recorded (ending in /), if any."""
    site = (release_info(root) or {}).get("site_url")
    return site.rstrip("/") + "/" if isinstance(site, str) and site else None


def grade_command(lesson: str = "", *, watch: bool = False, root: Path | None = None) -> str:
    """The command that grades ``lesson`` where the reader stands."""
    words = (["--watch"] if watch else []) + ([lesson] if lesson else [])
    if in_release(root):
        return " ".join(["python", "-m", "graders", *words])
    return " ".join(["nox", "-s", "grade", *(["--", *words] if words else [])])


def missing_module(error: ModuleNotFoundError, root: Path | None = None) -> str:
    """One line for a package the graders need and this Python lacks: what to install."""
    name = (error.name or str(error)).partition(".")[0]
    if in_release(root):
        fix = (
            f"install what this lesson needs, in the lesson folder: pip install -r {REQUIREMENTS} "
            f"(its first lines say how, GPT-2's ranks package included)"
        )
    else:
        fix = "grade with `nox -s grade`, which installs the course's environment"
    return f"this Python ({sys.executable}) has no package {name!r}, which grading needs: {fix}"
