"""A student's package with the reference standing in for what is not done yet."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpt.lessons import fill_in, load

ROOT = Path(__file__).resolve().parents[2]


def test_a_stub_is_replaced_wherever_another_lesson_imported_it(tmp_path: Path) -> None:
    # block done, attention not: block.py's `from .attention import attention` held the stub.
    target = tmp_path / "fill_in_student"  # a package name no other test imports
    shutil.copytree(ROOT / "exercises", target)
    shutil.copy(ROOT / "solutions" / "block.py", target / "block.py")
    lessons, reference = load(target), load()
    yours, fallbacks = fill_in(lessons, reference)
    assert "block.self_attention" in yours and "attention.attention" in fallbacks
    assert lessons.block.attention is reference.attention.attention
    assert lessons.attention.attention is reference.attention.attention
    assert fill_in(lessons, reference) == (yours, fallbacks)  # again: the same answer
    mine, none = fill_in(reference, reference)  # the reference is all its own
    assert sorted(mine) == sorted(yours + fallbacks) and none == []
