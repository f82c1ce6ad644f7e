"""What the test run builds once for every pytest-xdist worker: a folder made under a file lock.

The workers of one run share its temporary folder (the one above each worker's own); the
first to ask builds the folder and marks it done, the others wait on the lock and then read
it. A build that failed left no mark, so the next to ask builds it again (and fails the
same way, with the build's own message). Tests read what is shared or copy it, never change
it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The folder ``name`` of this test run, made by ``build(folder)`` once per run."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's folder, above every worker's own
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
