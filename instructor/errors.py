"""The one error the instructor commands stop with: a setup that cannot work, in one line."""

from __future__ import annotations


class SetupError(Exception):
    """The command cannot run as set up (one line, naming the fix)."""
