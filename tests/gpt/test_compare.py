"""`nox -s compare`: a student's functions in the reference model, beside the reference."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support import forkserver

from core.fingerprint import fingerprint
from core.manifest import load_manifest
from gpt.compare import judge_evaluation, last_grading

ROOT = Path(__file__).resolve().parents[2]


# The lessons' merges (512 ranks): GPT-2's 50,257-way output layer would be most of each run's
# time. The untouched exercises' test keeps compare's default, GPT-2's tokenizer; the test of a
# wrong train_bpe takes the lessons' merges by itself.
LESSON_MERGES = ["--tokenizer", "lesson"]


def _compare(target: Path, out: Path, corpus_args: list[str], *, cold: bool = False) -> str:
    result = forkserver.run(
        [
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
        cold=cold,  # forkserver.COLD_STARTS
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


@pytest.mark.slow  # trains twice in a subprocess
def test_untouched_exercises_fall_back_and_claim_nothing(
    tmp_path: Path, small_corpus: Path
) -> None:
    corpus = ["--corpus", str(small_corpus)]
    out = _compare(ROOT / "exercises", tmp_path / "run", corpus, cold=True)
    assert "Your functions (0)" in out
    assert "tokenizer: gpt2 (the same in both runs)" in out
    assert "training.train_step" in out and "Reference fallbacks (39)" in out
    assert "none of your functions shapes them" in out
    # Progress where the output is not a terminal: the first step at once, then the end.
    assert "\nreference run: step 1/2, loss " in out and "\nyour run: step 2/2, loss " in out
    config = json.loads((tmp_path / "run" / "yours" / "config.json").read_text())
    assert config["lessons"] == str(ROOT / "exercises")  # the student's, not "solutions"
    assert config["functions"]["yours"] == [] and len(config["functions"]["reference"]) == 39
    assert (tmp_path / "run" / "compare.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # trains twice in a subprocess
def test_correct_attention_and_loss_take_part_and_agree(tmp_path: Path, small_corpus: Path) -> None:
    target = _student_copy(tmp_path, "attention", "objective")
    # A grading of this package in which cross_entropy failed a check that training never
    # reaches (logits large enough to overflow): agreeing curves must not hide it.
    # The attention lesson passed every check, graded with its files as they are now.
    report = tmp_path / "report.json"
    objective = {
        "slug": "objective",
        "fingerprint": fingerprint(target, "objective"),
        "checks": [{"id": "stable-for-large-logits", "function": "cross_entropy", "passed": False}],
    }
    attention = {
        "slug": "attention",
        "fingerprint": fingerprint(target, "attention"),
        "checks": [
            {"id": check.id, "function": check.function, "passed": True}
            for check in load_manifest().lesson("attention").selected_checks(False)
        ],
    }
    lessons = [attention, objective]
    report.write_text(json.dumps({"target": str(target), "hidden": False, "lessons": lessons}))
    corpus = ["--corpus", str(small_corpus), *LESSON_MERGES]
    out = _compare(target, tmp_path / "run", [*corpus, "--report", str(report)])
    assert re.search(r"Your functions \(6\): attention\.causal_mask, attention\.attention", out)
    assert "Attention: lesson; loss: lesson" in out
    for name in ("attention.attention", "objective.lm_loss", "objective.cross_entropy"):
        assert re.search(rf"{re.escape(name)} +took part \(\d+ calls?\)", out), name
    assert re.search(r"objective\.pad_targets +did not run", out)
    assert "agree at every step" in out and "shape them: attention.causal_mask" in out
    assert "not on the edge cases the graders try" in out
    assert "failed checks of: objective.cross_entropy (stable-for-large-logits)" in out
    assert (
        "of the code as it is now, passed every check of: attention.causal_mask, "
        "attention.attention." in out
    )
    assert re.search(r"objective\.perplexity +evaluation and sample only \(\d+ calls?\)", out)
    assert "Your objective.perplexity changes only the evaluation and the sample" in out


@pytest.mark.slow  # trains twice in a subprocess
def test_wrong_schedule_shows_where_the_curves_part(tmp_path: Path, small_corpus: Path) -> None:
    # Warmup that starts at 0: step 0 does not move the weights, so step 1 differs.
    wrong = _student_copy(
        tmp_path, "training", replace=("(step + 1) / warmup_steps", "step / warmup_steps")
    )
    out = _compare(wrong, tmp_path / "run", ["--corpus", str(small_corpus), *LESSON_MERGES])
    assert "tokenizer: lesson (the same in both runs)" in out  # the reference's train_bpe
    assert "Your functions (5): training.adamw_step, training.lr_at" in out
    assert "first differ at step 1" in out
    assert "they part with: training.lr_at (at step 1)" in out  # the function, by name
    assert "training.train_step (at" not in out
    assert re.search(r"training\.fit +did not run", out)  # the CLI has its own loop
    assert re.search(r"training\.evaluate +evaluation and sample only", out)
    assert "Not measured here (neither training nor its evaluation and sample call them): " in out
    assert "them): training.fit;" in out
    assert "training.evaluate changes only the evaluation and the sample, which differ" in out
    config = json.loads((tmp_path / "run" / "yours" / "config.json").read_text())
    assert config["lessons"] == str(wrong)
    assert "training.lr_at" in config["functions"]["yours"]
    assert "tokens.encode" in config["functions"]["reference"]
    alone = json.loads((tmp_path / "run" / "alone" / "training.lr_at" / "config.json").read_text())
    assert alone["lessons"] == "solutions" and alone["functions"]["yours"] == ["training.lr_at"]


@pytest.mark.slow  # trains twice in a subprocess
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
    out = _compare(constant, tmp_path / "run", ["--corpus", str(small_corpus), *LESSON_MERGES])
    assert "loss: lesson" in out
    assert re.search(r"objective\.cross_entropy +took part", out)
    assert "agree at every step" not in out
    assert "first differ at step 0" in out


@pytest.mark.slow  # trains twice in a subprocess
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
        assert re.search(rf"{re.escape(name)} +took part \(\d+ calls?\)", out), name
    assert "first differ at step 0" in out


@pytest.mark.slow  # trains twice in a subprocess
def test_a_function_counts_whatever_import_reached_it(tmp_path: Path, small_corpus: Path) -> None:
    """block.py calls attention through ``from .attention import attention``; a sampler that
    is always greedy changes the sample only: shown beside the curves, which agree."""
    target = _student_copy(
        tmp_path,
        "generation",
        "attention",
        "embeddings",
        "block",
        replace=("    if temperature == 0:\n", "    if True:\n"),
    )
    out = _compare(target, tmp_path / "run", ["--corpus", str(small_corpus), *LESSON_MERGES])
    assert "block: lesson" in out
    assert re.search(r"attention\.attention +took part \(\d+ calls?\)", out)
    assert re.search(r"generation\.sample_next +evaluation and sample only \(\d+ calls?\)", out)
    (agreement,) = [line for line in out.splitlines() if "agree at every step" in line]
    assert "attention.attention" in agreement and "generation" not in agreement
    assert "not the curves: the sample differs from the reference's" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert rows["reference"].split()[1] == rows["yours"].split()[1]  # the evaluation loss
    assert rows["reference"].split('"')[1] != rows["yours"].split('"')[1]  # the sample
    config = json.loads((tmp_path / "run" / "reference" / "config.json").read_text())
    assert config["lessons"] == "solutions" and config["functions"]["yours"] == []


def _passed(slug: str, target: Path) -> dict:
    checks = load_manifest().lesson(slug).selected_checks(False)
    rows = [{"id": c.id, "function": c.function, "passed": True} for c in checks]
    return {"slug": slug, "fingerprint": fingerprint(target, slug), "checks": rows}


def test_every_check_passed_is_said_only_of_the_code_as_it_is_now(tmp_path: Path) -> None:
    target = _student_copy(tmp_path, "attention", "block")
    path = tmp_path / "report.json"
    lessons = [_passed("attention", target), _passed("block", target)]
    path.write_text(json.dumps({"target": str(target), "hidden": False, "lessons": lessons}))
    names = ["attention.attention", "block.mlp", "objective.lm_loss"]
    verdicts = last_grading(path, target, names)
    assert verdicts == {
        "failed": [],
        "passed": ["attention.attention", "block.mlp"],
        "older": [],
        "ungraded": ["objective.lm_loss"],
    }
    # block.py imports attention: editing attention.py makes both results older than the code.
    source = target / "attention.py"
    source.write_text(source.read_text() + "\n# edited\n")
    verdicts = last_grading(path, target, names)
    assert verdicts is not None
    assert verdicts["older"] == ["attention.attention", "block.mlp"] and not verdicts["passed"]
    # A lesson graded with some of its checks only has not passed every check.
    partial = _passed("attention", target)
    partial["checks"] = partial["checks"][:1]
    path.write_text(json.dumps({"target": str(target), "hidden": False, "lessons": [partial]}))
    verdicts = last_grading(path, target, ["attention.attention"])
    assert verdicts is not None and verdicts["ungraded"] == ["attention.attention"]
    assert last_grading(path, ROOT / "solutions", names) is None  # another package's report
    assert last_grading(tmp_path / "none.json", target, names) is None


def test_evaluation_only_functions_are_judged_by_the_evaluation_and_the_sample(capsys) -> None:
    first = {"val_loss": 5.0, "val_perplexity": 148.4, "sample": "A language model is"}
    judge_evaluation(["training.evaluate"], first, dict(first), agree=True)
    said = capsys.readouterr().out
    assert "not the curves: the evaluation loss and its perplexity agree" in said
    judge_evaluation(["objective.perplexity"], first, {**first, "val_perplexity": 5.0}, agree=True)
    assert "the perplexity differs from the reference's" in capsys.readouterr().out
    judge_evaluation(["training.evaluate"], first, dict(first), agree=False)
    assert "which differ anyway while the curves do" in capsys.readouterr().out
