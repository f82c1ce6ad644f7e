"""The GPT-2 examples of chapters 2 and 5, where GPT-2's weights are on the building machine.

A build here (offline) takes the branch that says the weights are absent; a build on a machine
that reached the Hub takes the other. These tests read chapters 2 and 5 in the site's tests' build
beside the student site (tests/site/conftest.py's ``side_site``), made with ``GPT2_WEIGHTS_DIR``
pointing at a GPT-2-shaped checkpoint saved there (GPT-2's vocabulary and 1,024 positions, a tiny
width, random weights), so that branch runs and its output reaches the page.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow


def test_chapter_2_shows_gpt2s_neighbours_and_positions_where_the_weights_are(side_site):
    page = (side_site / "chapters" / "02-embeddings" / "index.html").read_text()
    # The block's output (its source, shown above it, names both branches): the neighbours of
    # each word, the position similarities, and the heatmap with its caption.
    for word in ("king", "Paris", "three", "walked"):
        assert re.search(rf"(&#39;|') {word}(&#39;|')\s+(-&gt;|->) ", page), word
    for gap in (1, 10, 100, 500):
        assert f"positions {gap:3d} apart: mean cosine" in page, gap
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", page)
    assert any("learned position vectors" in caption for caption in captions), captions


def test_chapter_5_runs_the_lesson_gpt_on_gpt2s_weights_where_they_are(side_site):
    page = (side_site / "chapters" / "05-block" / "index.html").read_text()
    assert page.count("GPT-2&#39;s published weights") + page.count("GPT-2's published weights")
    # The residual-stream table has one row per block of the checkpoint, and the lesson's
    # GPT gives the checkpoint's own logits.
    assert re.search(r"\n\s+1\s+\d+\.\d\d\s+\d+\.\d\d", page)
    assert "same predicted tokens: True" in page
