"""Files written atomically: a reader sees the old file or the whole new one, never a part.

The bytes go to a temporary file in the same directory, are flushed and fsynced, and the file
is renamed over the target with ``os.replace``; then the directory is fsynced where the
platform allows, so the rename itself survives a crash. On any failure the temporary file is
removed and the target is left as it was. The file gets the mode a plain ``open`` would give it
(0666 less the umask), not mkstemp's private 0600: a checkpoint, a plot or a report is for a
teaching assistant or a web server to read too. Checkpoints, the corpus cache, the grading
reports and the instructors' exports all write through here. Standard library only: cheap to
import.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _umask() -> int:
    """The process's umask; Linux shows it in /proc, elsewhere it is set and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through ``write(file)`` so that it appears complete or not at all
    (what ``write`` returns, such as ``f.write``'s byte count, is ignored)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # Windows has no such modes
                os.fchmod(f.fileno(), 0o666 & ~_umask())
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
