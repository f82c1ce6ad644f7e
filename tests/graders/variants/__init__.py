"""Implementations for testing the graders: plausible wrong ones, correct-but-different ones.

One module per lesson, named after the lesson's module (``tokens.py``, ...), holds that lesson's
``WRONG`` and ``RIGHT`` variants; ``base`` what they share. A new lesson adds its own module and
touches nothing here.
"""

from __future__ import annotations

import importlib

from core.manifest import load_manifest

from .base import (
    BY_HAND,
    HARNESS,
    V,
    Variant,
    apart,
    assert_hints_name_the_mistake,
    build_target,
    mistake_hint,
    replace_definition,
    rounds,
)

_LESSONS = [
    importlib.import_module(f"{__name__}.{lesson.module}") for lesson in load_manifest().lessons
]
WRONG: list[Variant] = [variant for module in _LESSONS for variant in module.WRONG]
RIGHT: list[Variant] = [variant for module in _LESSONS for variant in module.RIGHT]

__all__ = [
    "BY_HAND",
    "HARNESS",
    "RIGHT",
    "WRONG",
    "V",
    "Variant",
    "apart",
    "assert_hints_name_the_mistake",
    "build_target",
    "mistake_hint",
    "replace_definition",
    "rounds",
]
