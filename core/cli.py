"""What every command line of the course shares: one-line errors, and dying with its parent."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line that points to ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def one_line(error: BaseException) -> str:
    """An exception as one line of a command's output: its type and first line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__


def die_with_parent() -> None:
    """End this process when its parent dies (PR_SET_PDEATHSIG, Linux only), so that a killed
    supervisor leaves no orphan behind; elsewhere the process simply outlives it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
