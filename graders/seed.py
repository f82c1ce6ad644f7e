"""The seed a grading run draws its checks' inputs from (graders/answers.py, "Secret inputs").

A module of its own, without torch: ``python -m graders`` reads the seed before it has checked
its arguments, and a bad argument must not wait for torch to load."""

from __future__ import annotations

import os

PUBLIC_SEED = 0  # the inputs the release records and replays
SEED_VARIABLE = "COURSE_INPUT_SEED"  # a grading run's secret seed (instructor autograde)


def seed_from_environment() -> int:
    """The grading run's seed: ``COURSE_INPUT_SEED`` (removed from the environment, so no
    process started later inherits it), else ``PUBLIC_SEED``."""
    text = os.environ.pop(SEED_VARIABLE, "").strip()
    if not text:
        return PUBLIC_SEED
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE} must be an integer, not {text!r}") from None
