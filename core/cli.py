"""What every command line of the course shares: one-line errors, and dying with its parent."""

from __future__ import annotations

import argparse
import os
import socket
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line that points to ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def one_line(error: BaseException, limit: int = 300) -> str:
    """An exception as one line of a command's output: its type and first line, a long one
    shortened at a word's end (never mid-word) with an ellipsis."""
    lines = str(error).strip().splitlines()
    if not lines:
        return type(error).__name__
    first = lines[0]
    if len(first) > limit:
        cut = first.rfind(" ", 0, limit)
        first = first[: cut if cut > 0 else limit] + " …"
    return f"{type(error).__name__}: {first}"


def die_with_parent() -> None:
    """End this process when its parent dies (PR_SET_PDEATHSIG, Linux only), so that a killed
    supervisor leaves no orphan behind; elsewhere the process simply outlives it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def no_fork_here(what: str) -> str | None:
    """The one-line error for ``what`` (a command that grades) on a system without ``fork`` and
    Unix sockets, which the grader's workers need (Windows); None where they exist."""
    if hasattr(os, "fork") and hasattr(socket, "AF_UNIX"):
        return None
    return (
        f"error: {what} needs fork and Unix sockets, which this system lacks; on Windows run it "
        "in WSL2 (the README's table of systems says which commands run where)"
    )
