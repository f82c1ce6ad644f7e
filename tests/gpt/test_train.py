"""`python -m gpt.train`'s output where it is not a terminal (a log, CI, nohup)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support import forkserver

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_progress_lines_when_the_output_is_a_pipe(tmp_path: Path, small_corpus: Path) -> None:
    flags = ["--preset", "micro", "--corpus", str(small_corpus), "--out", str(tmp_path / "run")]
    flags += ["--batch-size", "2", "--context-length", "16", "--stride", "16", "--steps", "3"]
    flags += ["--warmup-steps", "1", "--eval-batches", "1", "--sample-tokens", "2"]
    done = forkserver.run(
        ["-m", "gpt.train", *flags],
        cwd=ROOT,
        env={**os.environ, "COURSE_PROGRESS_SECONDS": "0"},  # a line for every step
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard only
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("training: ")]
    assert len(lines) == 3, done.stdout
    for step, line in enumerate(lines, 1):
        pattern = (
            rf"training: step {step}/3, loss \d+\.\d{{3}}, [\d,]+ tok/s, \d+:\d\d:\d\d elapsed"
        )
        assert re.fullmatch(pattern, line), line
    assert done.stdout.index(lines[-1]) < done.stdout.index("Trained ")  # then the report
