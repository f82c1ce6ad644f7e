"""`nox -s compare`: a student's functions in the reference model, beside the reference."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _compare(target: Path, out: Path, corpus_args: list[str]) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "graders.compare",
            "--target",
            str(target),
            "--steps",
            "5",
            "--out",
            str(out),
            *corpus_args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _student_copy(tmp_path: Path, module: str, replace: tuple[str, str] | None = None) -> Path:
    """A student package: the exercises, with one module solved (maybe wrongly)."""
    target = tmp_path / "student"
    shutil.copytree(ROOT / "exercises", target)
    solved = (ROOT / "solutions" / f"{module}.py").read_text()
    if replace:
        assert replace[0] in solved
        solved = solved.replace(*replace)
    (target / f"{module}.py").write_text(solved)
    return target


def test_untouched_exercises_fall_back_and_agree(tmp_path: Path, small_corpus: Path) -> None:
    out = _compare(ROOT / "exercises", tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (0)" in out
    assert "training.train_step" in out and "Reference fallbacks (29)" in out
    assert "agree at every step" in out
    assert (tmp_path / "run" / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_correct_attention_is_used_and_agrees(tmp_path: Path, small_corpus: Path) -> None:
    out = _compare(
        _student_copy(tmp_path, "attention"), tmp_path / "run", ["--corpus", str(small_corpus)]
    )
    assert re.search(r"Your functions \(2\): attention\.causal_mask, attention\.attention", out)
    assert "agree at every step" in out


def test_wrong_attention_shows_where_the_curves_part(tmp_path: Path, small_corpus: Path) -> None:
    # Warmup that starts at 0: step 0 does not move the weights, so step 1 differs.
    wrong = _student_copy(
        tmp_path, "training", ("(step + 1) / warmup_steps", "step / warmup_steps")
    )
    out = _compare(wrong, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (4): training.lr_at" in out
    assert "first differ at step 1" in out
