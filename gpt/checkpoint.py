"""Checkpoints written atomically, and read back with a clear error when damaged.

A checkpoint is written to a temporary file in the same directory, flushed to disk, then
renamed over the old one: a run killed at any moment leaves either the previous checkpoint
or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message says which file and what to do."""


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(file)`` so that it appears complete or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(path: Path, state: dict[str, Any]) -> None:
    """Save a checkpoint dict (tensors, numbers, strings, lists, dicts) atomically."""
    atomic_write(Path(path), lambda f: torch.save(state, f))


def load(path: Path) -> dict[str, Any]:
    """Load a checkpoint saved by ``save``; ``CheckpointError`` if it is missing or damaged."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a checkpoint ({type(error).__name__}); "
            "delete it, or start over with --fresh"
        ) from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(
            f"checkpoint {path} holds no model state; delete it, or start over with --fresh"
        )
    return state
