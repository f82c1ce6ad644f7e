"""Runs inside a page's kernel (``nox -s course``) before the page's first example.

``setup()`` does three things, all reversible by restarting the kernel:

- with ``exercises`` set ("with my code"), the lesson modules of ``solutions`` become the
  student's: ``import solutions.embeddings`` then gives ``exercises/embeddings.py`` (or the
  same module of another package directory), so the chapter's examples call the student's
  functions, and so does provided code that imports them;
- an unimplemented stub's ``NotImplementedError`` shows its one-line message (which names the
  lesson section to read) instead of a traceback;
- what a block prints is capped: past ``output_limit`` characters the block is stopped with a
  one-line message, so a runaway print loop cannot flood the page.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).resolve().parents[1] / "course" / "lessons.toml"


class OutputLimitExceeded(Exception):
    """A block printed more than the page shows."""


class _CappedStream:
    """A text stream that counts what one block writes and stops the block past a limit."""

    def __init__(self, stream: Any, budget: dict[str, int]) -> None:
        self._stream = stream
        self._budget = budget

    def write(self, text: str) -> int:
        left = self._budget["left"]
        if left <= 0:
            raise OutputLimitExceeded()
        self._budget["left"] = left - len(text)
        if len(text) > left:
            self._stream.write(text[:left])
            raise OutputLimitExceeded()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def lesson_modules() -> list[str]:
    from core.manifest import load_manifest

    return [lesson.module for lesson in load_manifest(MANIFEST).lessons]


def use_exercises(directory: Path) -> list[str]:
    """Alias ``solutions.<lesson module>`` to the same module of the package in ``directory``."""
    directory = directory.resolve()
    if not (directory / "__init__.py").is_file():
        raise ValueError(f"{directory} is not a package directory (no __init__.py)")
    if str(directory.parent) not in sys.path:
        sys.path.insert(0, str(directory.parent))
    import solutions

    aliased = []
    for module in lesson_modules():
        theirs = importlib.import_module(f"{directory.name}.{module}")
        sys.modules[f"solutions.{module}"] = theirs
        setattr(solutions, module, theirs)
        aliased.append(module)
    return aliased


def setup(exercises: str | None = None, output_limit: int = 500_000) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if exercises is not None:
        use_exercises(Path(exercises))
    limit = output_limit

    def one_line(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):
        if etype is OutputLimitExceeded:
            line = f"Output stopped: this block printed more than {limit:,} characters."
        else:
            line = f"{etype.__name__}: {value}"
        # IPython ignores a custom handler's return value: show the one-line "traceback" as
        # the kernel's error message (the page and notebooks render it as such).
        shell._showtraceback(etype, value, [line])

    shell.set_custom_exc((NotImplementedError, OutputLimitExceeded), one_line)
    budget = {"left": limit}

    def reset(*args: Any) -> None:
        budget["left"] = limit

    shell.events.register("pre_run_cell", reset)
    sys.stdout = _CappedStream(sys.stdout, budget)
    sys.stderr = _CappedStream(sys.stderr, budget)
