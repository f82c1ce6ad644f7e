"""Atomic writes: the whole file or the old one, with the mode the user's umask gives."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from core.atomic import atomic_write, atomic_write_bytes

posix = pytest.mark.skipif(sys.platform == "win32", reason="Windows files have no such modes")


@posix
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_the_file_gets_the_mode_the_umask_gives(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "report.json", b"{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"old")

    def half_then_fail(f) -> None:
        f.write(b"ne")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
