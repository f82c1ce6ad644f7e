"""Whether the checker's secret half (``graders/secret/``) is here: the one place that decides.

A module of its own, not the package's ``__init__``, so that the checker's modules can ask
without importing the package that imports them (no import cycle).
"""

from __future__ import annotations

import importlib
from types import ModuleType


def installed_secret(name: str) -> ModuleType | None:
    """``graders.secret.NAME`` where the checker's secret half is installed (the instructor's
    tree), else None (the student release, which never ships graders/secret/)."""
    full = f"{__package__}.secret.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as error:
        if error.name not in (full, f"{__package__}.secret"):  # a missing dependency of it: say so
            raise
        return None
