"""Files written atomically: a reader sees the old file or the whole new one, never a part.

The bytes go to a temporary file in the same directory, are flushed and fsynced, and the file
is renamed over the target with ``os.replace``; then the directory is fsynced where the
platform allows, so the rename itself survives a crash. On any failure the temporary file is
removed and the target is left as it was. Checkpoints, the corpus cache and the grading
reports all write through here. Standard library only: cheap to import.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


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
    try:
        directory = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``data`` into ``path``, atomically."""
    atomic_write(path, lambda f: f.write(data))
