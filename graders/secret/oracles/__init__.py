"""The checks' answers: what a correct implementation returns, and what each classic mistake
returns, for the diagnosis. Instructors' graders only, never released.

Independent of solutions/ wherever an independent oracle exists: PyTorch's own ops, tiktoken,
naive loops and formulas written out, and the trusted implementations of
graders/secret/trusted.py run through the worker's very scenarios. Many of these are full
implementations of exercises, so this folder is as secret as solutions/: the student release
leaves it out and replays the answers it recorded instead (graders/answers.py). Checks reach
these functions through ``graders.answers.oracle`` / ``later`` only, by name; every argument
and every answer is plain data, and a ``mistake`` argument (a key of the check's mistakes
table) asks for the answer that mistake gives.

One module per lesson, named after the lesson's module (``oracles/tokens.py``, ...):
``oracles.NAME`` is NAME from the lessons' modules, so a new lesson adds its own module and
touches nothing here.
"""

from __future__ import annotations

import importlib
from typing import Any


def unknown(mistake: str | None) -> ValueError:
    """The error for a ``mistake`` key an oracle has no answer for."""
    return ValueError(f"no oracle for the mistake {mistake!r}")


def __getattr__(name: str) -> Any:
    return named(name)


def named(name: str, lesson: str = "") -> Any:
    """The oracle ``name`` of the lessons' modules (of lesson module ``lesson`` alone, if
    given). Call this rather than ``oracles.NAME`` where NAME may also be a lesson's module
    (``attention``): once imported, that attribute is the module."""
    for module in lesson_modules():
        if lesson and module.__name__.rpartition(".")[2] != lesson:
            continue
        if not name.startswith("_") and hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"no oracle named {name!r} in any lesson's module")


def lesson_modules() -> list[Any]:
    """Every lesson's oracle module, imported on the first call (graders.answers.prepare makes
    that call before any student code runs, which could rewrite the files)."""
    if not _MODULES:
        from core.manifest import load_manifest

        for lesson in load_manifest().lessons:
            try:
                _MODULES.append(importlib.import_module(f"{__name__}.{lesson.module}"))
            except ModuleNotFoundError as error:
                if error.name != f"{__name__}.{lesson.module}":
                    raise
                # a lesson without oracles of its own
    return _MODULES


_MODULES: list[Any] = []
