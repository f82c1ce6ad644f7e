"""Where a long command is: a bar on a terminal, a plain line every few seconds elsewhere.

On a terminal rich draws a bar that updates in place. Where the output is a log, CI or
``nohup`` a bar would show nothing until the end, so a plain line says where the command is
at the first update, then every ``COURSE_PROGRESS_SECONDS`` seconds (default 5; 0 writes a line
at every update), and once more at the end:

    training: step 12/400, loss 5.123, 3,104 tok/s, 0:00:12 elapsed
"""

from __future__ import annotations

import math
import os
import sys
import time
from datetime import timedelta
from types import TracebackType
from typing import Any, TextIO

INTERVAL_VARIABLE = "COURSE_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 5.0


def interval() -> float:
    """Seconds between plain progress lines: $COURSE_PROGRESS_SECONDS, else 5. A value that
    is not a number of seconds is said in one line and the default used."""
    value = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not value:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not (math.isfinite(seconds) and seconds >= 0):
        print(
            f"warning: {INTERVAL_VARIABLE}={value!r} is not a number of seconds (0 or more); "
            f"using {DEFAULT_INTERVAL:g}",
            file=sys.stderr,
        )
        return DEFAULT_INTERVAL
    return seconds


def _is_terminal(stream: TextIO) -> bool:
    """The stream's own answer (FORCE_COLOR, which CI services set for colours, does not
    turn a log into a terminal)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


class Progress:
    """``with Progress("training", 400, unit="step") as bar: bar.update(note="loss 5.1")``.

    ``completed``: where a resumed command starts. ``enabled=False`` shows nothing.
    ``stream``: standard output by default (standard error for a command whose output is
    its result, such as generated text).
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "",
        completed: int = 0,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.completed = completed
        self.note = ""
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stdout
        self._bar: Any = None  # rich's Progress, on a terminal
        self._task: Any = None
        self._interval = 0.0
        self._started = self._last = 0.0
        self._shown: int | None = None  # the count the last plain line showed

    def __enter__(self) -> Progress:
        if not self.enabled:
            return self
        if _is_terminal(self.stream):
            from rich.console import Console
            from rich.markup import escape
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn(f"[bold]{escape(self.label)} {escape(self.unit)}".rstrip()),
                TextColumn("{task.completed}/{task.total}"),
                BarColumn(),
                TextColumn("{task.fields[note]}", markup=False),
                TimeRemainingColumn(),
                console=Console(file=self.stream, force_terminal=True),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(
                self.label, total=self.total, completed=self.completed, note=""
            )
        else:
            self._interval = interval()
            self._started = time.monotonic()
            self._last = -math.inf
        return self

    def update(self, advance: int = 1, note: str | None = None) -> None:
        """``advance`` more done; ``note``: what to show beside the count (the loss, ...)."""
        self.completed += advance
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, note=self.note)
            return
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self._line(now)

    def _line(self, now: float) -> None:
        self._shown = self.completed
        count = f"{self.unit} {self.completed}/{self.total}".lstrip()
        elapsed = timedelta(seconds=round(now - self._started))
        parts = [count, self.note, f"{elapsed} elapsed"]
        print(f"{self.label}: " + ", ".join(p for p in parts if p), file=self.stream, flush=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self._shown != self.completed:
            self._line(time.monotonic())  # where it ended (or stopped)
