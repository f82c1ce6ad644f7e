"""`nox -s compare`: a student's functions in the reference model, beside the reference."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test trains twice in a subprocess
ROOT = Path(__file__).resolve().parents[2]


def _compare(target: Path, out: Path, corpus_args: list[str]) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpt.compare",
            "--target",
            str(target),
            "--steps",
            "2",  # step 0, and step 1, where a schedule that starts at 0 first shows
            "--out",
            str(out),
            *corpus_args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard only
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _student_copy(tmp_path: Path, *modules: str, replace: tuple[str, str] | None = None) -> Path:
    """A student package: the exercises, with some modules solved (the first maybe wrongly)."""
    target = tmp_path / "student"
    shutil.copytree(ROOT / "exercises", target)
    for module in modules:
        solved = (ROOT / "solutions" / f"{module}.py").read_text()
        if replace and module == modules[0]:
            assert replace[0] in solved
            solved = solved.replace(*replace)
        (target / f"{module}.py").write_text(solved)
    return target


def test_untouched_exercises_fall_back_and_claim_nothing(
    tmp_path: Path, small_corpus: Path
) -> None:
    out = _compare(ROOT / "exercises", tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (0)" in out
    assert "training.train_step" in out and "Reference fallbacks (39)" in out
    assert "none of your functions took part" in out
    assert (tmp_path / "run" / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_correct_attention_and_loss_take_part_and_agree(tmp_path: Path, small_corpus: Path) -> None:
    target = _student_copy(tmp_path, "attention", "objective")
    # A grading of this package in which cross_entropy failed a check that training never
    # reaches (logits large enough to overflow): agreeing curves must not hide it.
    report = tmp_path / "report.json"
    lesson = {
        "slug": "objective",
        "checks": [{"id": "stable-for-large-logits", "function": "cross_entropy", "passed": False}],
    }
    report.write_text(json.dumps({"target": str(target), "lessons": [lesson]}))
    out = _compare(
        target, tmp_path / "run", ["--corpus", str(small_corpus), "--report", str(report)]
    )
    assert re.search(r"Your functions \(6\): attention\.causal_mask, attention\.attention", out)
    assert "Attention: lesson; loss: lesson" in out
    for name in ("attention.attention", "objective.lm_loss", "objective.cross_entropy"):
        assert re.search(rf"{re.escape(name)} +took part \(\d+ calls\)", out), name
    assert re.search(r"objective\.pad_targets +did not run", out)
    assert "agree at every step" in out and "took part: attention.causal_mask" in out
    assert "not on the edge cases the graders try" in out
    assert "failed checks of: objective.cross_entropy (stable-for-large-logits)" in out


def test_wrong_schedule_shows_where_the_curves_part(tmp_path: Path, small_corpus: Path) -> None:
    # Warmup that starts at 0: step 0 does not move the weights, so step 1 differs.
    wrong = _student_copy(
        tmp_path, "training", replace=("(step + 1) / warmup_steps", "step / warmup_steps")
    )
    out = _compare(wrong, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "Your functions (5): training.adamw_step, training.lr_at" in out
    assert "first differ at step 1" in out
    assert "they part with: training.lr_at (at step 1)" in out  # the function, by name
    assert "training.train_step (at" not in out
    assert re.search(r"training\.fit +did not run", out)  # the CLI has its own loop
    assert "Not measured here (training never calls them): training.fit" in out


def test_your_loss_is_what_your_run_trains_with(tmp_path: Path, small_corpus: Path) -> None:
    """A cross_entropy that returns a constant must not pass for one that agrees."""
    constant = _student_copy(
        tmp_path,
        "objective",
        replace=(
            "    return (log_norm - picked).sum() / keep.sum()",
            "    return (log_norm - picked).sum() * 0 + 1.0",
        ),
    )
    out = _compare(constant, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "loss: lesson" in out
    assert re.search(r"objective\.cross_entropy +took part", out)
    assert "agree at every step" not in out
    assert "first differ at step 0" in out


def test_your_merges_and_your_adamw_are_what_your_run_trains_with(
    tmp_path: Path, small_corpus: Path
) -> None:
    """A train_bpe that breaks ties the wrong way learns other merges: the token ids differ
    from the first step; a correct adamw_step takes part in both runs."""
    wrong_ties = _student_copy(
        tmp_path,
        "tokens",
        "training",
        replace=(
            "best = max(pairs, key=pairs.__getitem__)",
            "best = max(reversed(list(pairs)), key=pairs.__getitem__)",
        ),
    )
    out = _compare(wrong_ties, tmp_path / "run", ["--corpus", str(small_corpus)])
    assert "optimizer: lesson; tokenizer: lesson" in out
    for name in ("tokens.train_bpe", "tokens.bpe_merge", "training.adamw_step"):
        assert re.search(rf"{re.escape(name)} +took part \(\d+ calls\)", out), name
    assert "first differ at step 0" in out
