"""What each grading of a submission was: its files, its secret seed, and whether it failed.

``COURSE/gradings.json`` (beside the gradebook; mode 0600, for it holds the secret seeds that
decide every submission's inputs; written atomically under a lock file) holds one entry per
``STUDENT/LESSON``:

    {"fingerprint": ..., "timestamp": ..., "seed": ..., "graders": ..., "graded": ISO time,
     "failed": {"cause": ..., "at": ISO time, "fingerprint": ...}}   (only after a failure)

The first five describe the grading whose grades the gradebook holds; ``autograde`` grades a
submission again only when its files, its timestamp or the graders' fingerprint
(:func:`core.fingerprint.graders_digest`) differ from them (or when asked for all),
and ``regrade --reproduce`` grades the same files again with the same seed. A grading that
failed by the grader's own doing (it graded nothing) leaves them as they were, the grade it
did not replace, and says why under ``failed``; the next ``autograde`` tries it again.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from filelock import FileLock

from core.atomic import atomic_write

FILE = "gradings.json"


def path(root: Path) -> Path:
    return root / FILE


def read(root: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def entry(root: Path, student: str, lesson: str) -> dict[str, Any] | None:
    return read(root).get(f"{student}/{lesson}")


def is_current(
    root: Path, student: str, lesson: str, fingerprint: str, timestamp: str | None, graders: str
) -> bool:
    """Whether the gradebook's grade for this submission comes from these very files and
    timestamp, graded by these graders, and no later grading of them failed."""
    found = entry(root, student, lesson) or {}
    return (
        found.get("fingerprint") == fingerprint
        and found.get("timestamp") == timestamp
        and found.get("graders") == graders
        and "failed" not in found
    )


def graded(
    root: Path,
    student: str,
    lesson: str,
    fingerprint: str,
    timestamp: str | None,
    seed: int,
    graders: str,
) -> None:
    """Record the grading whose grades the gradebook now holds (``graders``: the graders'
    fingerprint)."""
    with _updating(root) as data:
        data[f"{student}/{lesson}"] = {
            "fingerprint": fingerprint,
            "timestamp": timestamp,
            "seed": seed,
            "graders": graders,
            "graded": _now(),
        }


def failed(root: Path, student: str, lesson: str, fingerprint: str, cause: str) -> None:
    """Record a grading that failed by the grader's doing; the grade it did not replace (and
    that grade's seed) stays."""
    with _updating(root) as data:
        data.setdefault(f"{student}/{lesson}", {})["failed"] = {
            "cause": cause,
            "at": _now(),
            "fingerprint": fingerprint,
        }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextlib.contextmanager
def _updating(root: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """Read, change and write the file back, one writer at a time (a plain ``nbgrader
    autograde`` may grade beside ``autograde``)."""
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f".{FILE}.lock"):
        data = read(root)
        yield data
        text = json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"

        def owner_only(f: IO[bytes]) -> None:
            os.fchmod(f.fileno(), 0o600)  # before a seed is in it
            f.write(text)

        atomic_write(path(root), owner_only)
