"""The build beside the student site: what the student site does not show, for the site's tests.

One small build (support/mini_site.py) of the instructor site (COURSE_INSTRUCTOR=1: the reference
page of every lesson, whatever the chapters, and INSTRUCTOR_CHAPTER, whose exercise box links to
it; a full build would run every example again, and the box is made alike for every chapter),
with GPT2_CHAPTERS built where GPT-2's weights are (GPT2_WEIGHTS_DIR: a GPT-2-shaped checkpoint
saved beside it, GPT-2's vocabulary and 1,024 positions, two blocks of a tiny width, random
weights), so that the branch of their examples that the offline student build cannot take runs
and reaches the page. One mkdocs run and one import of torch serve both.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from support.mini_site import build_mini_site

ROOT = Path(__file__).resolve().parents[2]
LESSONS = tomllib.loads((ROOT / "course" / "lessons.toml").read_text(encoding="utf-8"))["lesson"]
INSTRUCTOR_CHAPTER = next(lesson for lesson in LESSONS if lesson["module"] == "windows")
GPT2_CHAPTERS = [lesson for lesson in LESSONS if lesson["module"] in ("embeddings", "block")]


def build_side_site(folder: Path) -> Path:
    """Save the checkpoint in ``folder``/weights and build into ``folder``/mini; returns the
    built site's folder (a failed build fails the calling test with mkdocs' own message)."""
    from gpt import hub
    from gpt.model import GPT, GPTConfig

    shaped = GPTConfig(vocab_size=50257, block_size=1024, n_layer=2, n_head=2, n_embd=16)
    hub.save_pretrained(GPT(shaped), folder / "weights" / "gpt2")
    chapters = sorted([INSTRUCTOR_CHAPTER, *GPT2_CHAPTERS], key=lambda lesson: lesson["number"])
    return build_mini_site(
        folder / "mini",
        {f"{lesson['number']}. {lesson['title']}": lesson["page"] for lesson in chapters},
        env={
            "COURSE_INSTRUCTOR": "1",
            "GPT2_WEIGHTS_DIR": str(folder / "weights"),
            "HF_HUB_OFFLINE": "1",
        },
    )
