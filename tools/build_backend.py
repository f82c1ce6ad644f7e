"""The project's build backend: setuptools, for editable installs only.

The course's code reads the files beside it (``course/lessons.toml``, the pages, ``site/``), so
an installed copy of the packages alone would not run. ``pip install -e .`` keeps them where they
are; ``pip install .`` (a wheel) stops at once with one line saying so.
"""

from __future__ import annotations

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - every hook but the wheel's, unchanged

REFUSAL = (
    "gpt-from-the-ground-up runs from its repository: install it with `pip install -e .` "
    "(a wheel would leave course/ and site/ behind)"
)


def _refuse(*_args, **_kwargs):
    raise SystemExit(REFUSAL)


get_requires_for_build_wheel = _refuse
prepare_metadata_for_build_wheel = _refuse
build_wheel = _refuse
# The editable hooks stay setuptools' own.
build_editable = build_meta.build_editable
