"""Fixtures of the site's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.run_once import built_once
from support.side_site import build_side_site


@pytest.fixture(scope="session")
def side_site(tmp_path_factory) -> Path:
    """What the student site (tests/conftest.py's ``site``) does not show, built once per run
    for test_site.py's instructor checks and test_gpt2_pages.py (support/side_site.py). Tests
    read it, never change it."""
    return built_once(tmp_path_factory, "side-site", build_side_site) / "mini" / "out"
