"""The seed a grading run draws its checks' inputs from (graders/answers.py, "Secret inputs").

A module of its own, without torch: ``python -m graders`` reads the seed before it has checked
its arguments, and a bad argument must not wait for torch to load."""

from __future__ import annotations

import os
from pathlib import Path

PUBLIC_SEED = 0  # the inputs the release records and replays
SEED_VARIABLE = "COURSE_INPUT_SEED"  # a grading run's secret seed (instructor autograde)


def seed_from_environment() -> int:
    """The grading run's seed: ``COURSE_INPUT_SEED`` (removed from the environment, so no
    process started later inherits it), else ``PUBLIC_SEED``."""
    text = os.environ.pop(SEED_VARIABLE, "").strip()
    if not text:
        return PUBLIC_SEED
    return _integer(text, SEED_VARIABLE)


def seed_from_file(path: Path) -> int:
    """The grading run's seed from the file at ``path`` (``python -m graders --seed-file``):
    where the worker runs as another user (the Gradescope autograder's fallback), a file only
    the checker's user can read keeps the seed from it, as an environment variable would not
    (a process's environment is readable by every process of its user)."""
    if os.environ.pop(SEED_VARIABLE, "").strip():
        raise ValueError(f"give the seed once: --seed-file {path} or {SEED_VARIABLE}, not both")
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ValueError(f"--seed-file {path}: {error.strerror or error}") from None
    return _integer(text, f"the seed in {path}")


def _integer(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{where} must be an integer, not {text!r}") from None
