"""The graders: checks, points, hints and links for the student's package.

    python -m graders [LESSON ...] [--target DIR] [--hidden] [--json PATH] [--sandbox]

or from Python (the nbgrader tooling does):

    import graders
    report = graders.grade("exercises", lessons=["embeddings"], hidden=False)

The lesson manifest (course/lessons.toml, read by ``core.manifest``) holds every check's
points, hint and link; graders/public and graders/hidden hold the pytest tests behind them;
the student's code runs only in a separate worker process, a fresh fork for every lesson
(graders/worker/, graders/client.py), which holds nothing trusted. The checks' expected
answers come from graders/secret/oracles/, a function's dependencies are answered by the
checker (graders/secret/dependencies.py, with graders/secret/trusted.py), and what only the
source of a "by hand" function shows is flagged for review by the checker's reading of the
student's code (graders/rules.py), which costs no point.
graders/secret/ implements exercises, so the student release leaves it out and replays answers
recorded at release time instead (graders/answers.py, instructor/release.py).
Importing this
package is cheap: torch and pytest load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .secret_half import installed_secret


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


__all__ = ["grade", "installed_secret"]
