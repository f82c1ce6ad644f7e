"""`python -m gpt.generate`: your lessons with the reference standing in for what is not done,
and progress where standard error is not a terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from support import forkserver

from gpt import checkpoint, generate
from gpt.model import GPT, preset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """A training run's folder holding a micro model's checkpoint."""
    torch.manual_seed(5)
    config = preset("micro")
    run = tmp_path / "runs" / "default"
    state = {"model": GPT(config).state_dict(), "model_config": config.to_dict()}
    checkpoint.save(run / "checkpoint.pt", state)
    return run


def _generate(run: Path, lessons: str, *, cold: bool = False) -> subprocess.CompletedProcess:
    return forkserver.run(
        ["-m", "gpt.generate", "A cat", "--model", str(run)]
        + ["--max-new-tokens", "5", "--temperature", "0", "--lessons", lessons],
        cwd=ROOT,
        env={**os.environ, "COURSE_PROGRESS_SECONDS": "0"},  # a line for every token
        capture_output=True,  # pipes: not a terminal
        text=True,
        timeout=1800,  # a hang guard only
        cold=cold,
    )


@pytest.mark.slow
def test_unfinished_lessons_fall_back_to_the_reference_with_a_line(
    run_folder: Path, tmp_path: Path
) -> None:
    want = generate.generate_text(
        generate.load_model(str(run_folder)), "A cat", max_new_tokens=5, temperature=0
    )
    untouched = _generate(run_folder, "exercises")
    assert untouched.returncode == 0, untouched.stderr
    assert untouched.stdout == want + "\n"  # the text alone: the notes go to standard error
    assert "note: exercises does not implement 39 function(s) yet" in untouched.stderr
    assert "generation.generate" in untouched.stderr
    # Your generation lesson done, the embeddings not: yours generates, lookup falls back.
    student = tmp_path / "student"
    shutil.copytree(ROOT / "exercises", student)
    shutil.copy(ROOT / "solutions" / "generation.py", student / "generation.py")
    done = _generate(run_folder, str(student))
    assert done.returncode == 0, done.stderr
    assert done.stdout == want + "\n"
    (note,) = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert "embeddings.lookup" in note and "generation." not in note


@pytest.mark.slow
def test_progress_lines_when_standard_error_is_not_a_terminal(run_folder: Path) -> None:
    done = _generate(run_folder, "solutions", cold=True)  # forkserver.COLD_STARTS
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("generating: ")]
    assert [line.split(",")[0] for line in lines] == [
        f"generating: token {n}/5" for n in range(1, 6)
    ]
    assert "note:" not in done.stderr  # the reference: nothing falls back
