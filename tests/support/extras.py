"""Skipping a test module whose optional Python package (an extra of pyproject.toml) is absent.

``pytest.importorskip`` imports the package to find out, and every pytest-xdist worker pays for
that at collection: ``import nbgrader`` alone takes 2 s (its server extensions come with it),
for test modules that import it only inside their tests. Here the package is looked up, not
imported.
"""

from __future__ import annotations

import importlib.util

import pytest


def require_extra(module: str, reason: str) -> None:
    """Skip the calling test module with ``reason`` unless ``module`` is installed."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(reason, allow_module_level=True)
