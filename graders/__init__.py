"""The graders: checks, points, hints and links for the student's package.

    python -m graders [LESSON ...] [--target DIR] [--hidden] [--json PATH] [--sandbox]

or from Python (the nbgrader tooling does):

    import graders
    report = graders.grade("exercises", lessons=["embeddings"], hidden=False)

The lesson manifest (course/lessons.toml, read by ``core.manifest``) holds every check's
points, hint and link; graders/public and graders/hidden hold the pytest tests behind them;
the student's code runs only in a separate worker process, a fresh fork for every lesson
(graders/worker.py, graders/client.py), which holds nothing trusted. The checks' expected
answers come from graders/secret/oracles.py, a function's dependencies are answered by the
checker (graders/secret/dependencies.py, with graders/secret/trusted.py), and "by hand" rules
are read from the student's code in the checker (graders/rules.py) and watched in the worker.
graders/secret/ implements exercises, so the student release leaves it out and replays answers
recorded at release time instead (graders/answers.py, instructor/release.py).
Importing this
package is cheap: torch and pytest load on first use.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any


def grade(
    target: Path | str | None = None,
    lessons: list[str] | None = None,
    hidden: bool = False,
    json_path: Path | str | None = None,
    sandbox: bool = False,
    **options: Any,
) -> dict:
    """Grade ``target`` (default exercises/) and return the report; see graders.runner.grade."""
    from .runner import grade as run

    return run(target, lessons, hidden, json_path, sandbox, **options)


def installed_secret(name: str) -> ModuleType | None:
    """``graders.secret.NAME`` where the checker's secret half is installed (the instructor's
    tree), else None (the student release, which never ships graders/secret/). The one place
    that decides whether the oracles and the trusted dependencies are here."""
    full = f"{__name__}.secret.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as error:
        if error.name not in (full, f"{__name__}.secret"):  # a missing dependency of it: say so
            raise
        return None


__all__ = ["grade", "installed_secret"]
