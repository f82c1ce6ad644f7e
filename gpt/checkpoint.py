"""Checkpoints written atomically, and read back with a clear error when damaged.

A checkpoint is written to a temporary file in the same directory, flushed to disk, then
renamed over the old one: a run killed at any moment leaves either the previous checkpoint
or the new one, never half of one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from core.atomic import atomic_write


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message says which file and what to do."""


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
    except Exception as error:  # noqa: BLE001 - torch.load's errors share no base class
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a checkpoint ({type(error).__name__}); "
            "delete it, or start over with --fresh"
        ) from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(
            f"checkpoint {path} holds no model state; delete it, or start over with --fresh"
        )
    return state
