"""A student's package with the reference standing in for what is not done yet."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.release_folders import block_beside_attention

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


def test_in_the_release_an_earlier_lesson_comes_from_its_own_folder_or_says_where(tmp_path):
    """Running the block lesson's code in its release folder: attention is the student's own
    from the attention folder beside it; lookup, not written anywhere yet, raises one line that
    names it, its lesson and the file it belongs in."""
    import os
    import subprocess
    import sys

    release = block_beside_attention(tmp_path)
    script = """
import torch
from gpt.lessons import fill_in, load
lessons = load("exercises")
yours, fallbacks = fill_in(lessons)
assert fallbacks == [] and "block.gpt_logits" in yours and "attention.attention" in yours
C = 4
params = {"c_attn.weight": torch.randn(3 * C, C), "c_proj.weight": torch.eye(C)}
print(tuple(lessons.block.self_attention(torch.randn(1, 3, C), params, 2).shape))
try:
    wte = {"transformer.wte.weight": torch.eye(3, C)}
    lessons.block.gpt_logits(torch.tensor([[0, 1]]), wte, 2)
except NotImplementedError as error:
    print(error)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=release / "block",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shape, missing = done.stdout.strip().splitlines()
    assert shape == "(1, 3, 4)"
    where = release / "embeddings" / "exercises" / "embeddings.py"
    assert missing == f"lookup (lesson 2) is not written yet: write it in {where.resolve()}"
