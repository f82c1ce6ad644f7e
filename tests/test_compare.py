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


def test_untouched_exercises_fall_back_and_claim_nothing(
    tmp_path: Path, small_corpus: Path
) -> None:
    out = _compare(ROOT / "exercises", tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (0)" in out
    assert "training.train_step" in out and "Reference fallbacks (29)" in out
    assert "none of your functions took part" in out
    assert (tmp_path / "run" / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_correct_attention_is_used_and_agrees(tmp_path: Path, small_corpus: Path) -> None:
    out = _compare(
        _student_copy(tmp_path, "attention"), tmp_path / "run", ["--corpus", str(small_corpus)]
    )
    assert re.search(r"Your functions \(2\): attention\.causal_mask, attention\.attention", out)
    assert "Attention: lesson" in out
    assert re.search(r"attention\.attention +took part \(\d+ calls\)", out)
    assert "agree at every step" in out and "took part: attention.causal_mask" in out


def test_wrong_attention_shows_where_the_curves_part(tmp_path: Path, small_corpus: Path) -> None:
    # Warmup that starts at 0: step 0 does not move the weights, so step 1 differs.
    wrong = _student_copy(
        tmp_path, "training", ("(step + 1) / warmup_steps", "step / warmup_steps")
    )
    out = _compare(wrong, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (4): training.lr_at" in out
    assert "first differ at step 1" in out
    assert re.search(r"training\.fit +did not run", out)  # the CLI has its own loop
    assert "Not measured here (training never calls them): training.fit" in out


def test_your_loss_is_what_your_run_trains_with(tmp_path: Path, small_corpus: Path) -> None:
    """A cross_entropy that returns a constant must not pass for one that agrees."""
    constant = _student_copy(
        tmp_path,
        "objective",
        (
            "    return (log_norm - picked).sum() / keep.sum()",
            "    return (log_norm - picked).sum() * 0 + 1.0",
        ),
    )
    out = _compare(constant, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "loss: lesson" in out
    assert re.search(r"objective\.cross_entropy +took part", out)
    assert "agree at every step" not in out
    assert "first differ at step 0" in out


def test_correct_loss_takes_part_and_agrees(tmp_path: Path, small_corpus: Path) -> None:
    out = _compare(
        _student_copy(tmp_path, "objective"), tmp_path / "run", ["--corpus", str(small_corpus)]
    )
    assert re.search(r"objective\.lm_loss +took part", out)
    assert re.search(r"objective\.cross_entropy +took part", out)
    assert re.search(r"objective\.pad_targets +did not run", out)
    assert "agree at every step" in out
