"""Chapter 2's GPT-2 examples, where GPT-2's weights are on the building machine.

A build here (offline) takes the branch that says the weights are absent; a build on a machine
that reached the Hub takes the other. This test builds chapter 2 alone with ``GPT2_WEIGHTS_DIR``
pointing at a GPT-2-shaped checkpoint it saves itself (GPT-2's vocabulary and 1,024 positions,
a tiny width, random weights), so that branch runs and its output reaches the page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKED = ["course", "site", "solutions", "exercises", "graders", "gpt", "pyproject.toml"]
MINI_CONFIG = """\
INHERIT: mkdocs.yml
site_dir: out
exclude_docs: |
  *.toml
  __pycache__/
  chapters/0[13456789]-*.md
  primer.md
  glossary.md
  faq.md
  progress.md
validation:
  links:
    not_found: info
nav:
  - Home: index.md
  - 2. Tokens become vectors: chapters/02-embeddings.md
"""

pytestmark = pytest.mark.slow


def test_chapter_2_shows_gpt2s_neighbours_and_positions_where_the_weights_are(tmp_path):
    from gpt import hub
    from gpt.model import GPT, GPTConfig

    shaped = GPTConfig(vocab_size=50257, block_size=1024, n_layer=1, n_head=2, n_embd=16)
    hub.save_pretrained(GPT(shaped), tmp_path / "weights" / "gpt2")
    mini = tmp_path / "mini"
    mini.mkdir()
    for name in [*LINKED, "mkdocs.yml"]:
        (mini / name).symlink_to(ROOT / name)
    (mini / "test.yml").write_text(MINI_CONFIG)
    env = dict(
        os.environ,
        NO_MKDOCS_2_WARNING="1",
        GPT2_WEIGHTS_DIR=str(tmp_path / "weights"),
        HF_HUB_OFFLINE="1",
    )
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", "test.yml"],
        cwd=mini,
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert built.returncode == 0, built.stderr[-5000:]
    page = (mini / "out" / "chapters" / "02-embeddings" / "index.html").read_text()
    # The block's output (its source, shown above it, names both branches): the neighbours of
    # each word, the position similarities, and the heatmap with its caption.
    for word in ("king", "Paris", "three", "walked"):
        assert re.search(rf"(&#39;|') {word}(&#39;|')\s+(-&gt;|->) ", page), word
    for gap in (1, 10, 100, 500):
        assert f"positions {gap:3d} apart: mean cosine" in page, gap
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", page)
    assert any("learned position vectors" in caption for caption in captions), captions
