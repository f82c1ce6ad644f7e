"""Runs inside a page's kernel (``nox -s course``) before the page's first example.

``setup()`` does three things, all reversible by restarting the kernel:

- the chapters' examples import the lessons from ``gpt.chapter``: without ``exercises`` they
  are the reference's, as on the built page; with ``exercises`` set ("with my code") they are the
  student's, ``from gpt.chapter.embeddings import lookup`` then giving ``exercises/embeddings.py``
  (or the same module of another package directory), stubs included: a function not written
  yet raises, naming the section to read;
- an error shows as one line instead of a traceback: an unimplemented stub's
  ``NotImplementedError`` its message (which names the lesson section to read), any other error
  its type, message and place (the student's file and line, or the block's line), a
  ``SyntaxError`` in a student's module included;
- what a block prints is capped: past ``output_limit`` characters the block is stopped with a
  one-line message, so a runaway print loop cannot flood the page.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

from gpt.lessons import CHAPTER_ENV, REFERENCE

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
    """Make ``gpt.chapter.<lesson module>`` the same module of the package in ``directory``,
    its stubs left as they are; the lesson modules."""
    directory = directory.resolve()
    if not (directory / "__init__.py").is_file():
        raise ValueError(f"{directory} is not a package directory (no __init__.py)")
    os.environ[CHAPTER_ENV] = REFERENCE  # what gpt.chapter takes on import, filling nothing
    from gpt import chapter

    chapter.use(directory, fill=False)
    return list(lesson_modules())


def place(value: BaseException, tb: Any, package: Path | None) -> str:
    """Where an error happened, as " (file.py, line N)": in the student's package if it passed
    through it, else in the block ("this block"); "" when neither is known."""
    if isinstance(value, SyntaxError) and value.filename and value.lineno:
        return f" ({Path(value.filename).name}, line {value.lineno})"
    frames = traceback.extract_tb(tb)
    if package is not None:
        for frame in reversed(frames):
            if Path(frame.filename).resolve().is_relative_to(package):
                return f" ({Path(frame.filename).name}, line {frame.lineno})"
    for frame in reversed(frames):
        if frame.filename.startswith("<ipython-input") or "ipykernel_" in frame.filename:
            return f" (this block, line {frame.lineno})"
    return ""


def one_line_error(
    etype: type, value: BaseException, tb: Any, limit: int, package: Path | None
) -> str:
    """The one line a page shows for an error raised by a block."""
    if etype is OutputLimitExceeded:
        return f"Output stopped: this block printed more than {limit:,} characters."
    if etype is NotImplementedError:  # a stub: its message names the section to read
        return f"{etype.__name__}: {value}"
    message = value.msg if isinstance(value, SyntaxError) else str(value)
    line = f"{etype.__name__}: {message}{place(value, tb, package)}"
    if isinstance(value, NameError):
        line += "; an earlier block may have stopped before defining it"
    return line


def setup(exercises: str | None = None, output_limit: int = 500_000) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    limit = output_limit
    package = Path(exercises).resolve() if exercises is not None else None

    def one_line(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):
        # IPython ignores a custom handler's return value: show the one-line "traceback" as
        # the kernel's error message (the page and notebooks render it as such).
        shell._showtraceback(etype, value, [one_line_error(etype, value, tb, limit, package)])

    # Before the student's modules are imported, so that a SyntaxError in one is one line too.
    shell.set_custom_exc((Exception,), one_line)
    if package is not None:
        use_exercises(package)
    else:
        os.environ[CHAPTER_ENV] = REFERENCE  # as on the built page
    budget = {"left": limit}

    def reset(*args: Any) -> None:
        budget["left"] = limit

    shell.events.register("pre_run_cell", reset)
    sys.stdout = _CappedStream(sys.stdout, budget)
    sys.stderr = _CappedStream(sys.stderr, budget)
