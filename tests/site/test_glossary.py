"""The glossary as a beginner's reference, checked on the sources (no site build).

site/glossary.toml must hold at least 100 terms, among them the vocabulary a reader meets on the
training objective and PyTorch's basics, and every term must occur in the prose of some page,
where the glossary hook turns it into a tooltip. The matching rules mirror the hook's (Python-
Markdown's abbr extension): whole words, case-sensitive, each phrase also with its first letter
in upper case, never inside code. tests/site/test_site.py checks the same on the built site.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
ENTRIES = tomllib.loads((ROOT / "site" / "glossary.toml").read_text(encoding="utf-8"))["entry"]

# The words a beginner needs: the training objective's vocabulary and PyTorch's basics.
REQUIRED = [
    "attention map",
    "dimension",
    "distribution",
    "dot product",
    "GPU",
    "gradient",
    "hard pointer",
    "key axis",
    "layer",
    "matrix",
    "negative infinity",
    "output projection",
    "parameter",
    "projection",
    "retrieval layer",
    "saturating",
    "scale",
    "score matrix",
    "soft alignment",
    "variance",
    "vector",
    "weighted sum",
    "weights",
    "tensor",
    "dtype",
    "broadcasting",
    "autograd",
    "optimizer",
    "advanced indexing",
    "shape",
]

sys.path.append(str(ROOT / "site" / "hooks"))
from markdown_scan import strip_fences  # noqa: E402  (the hooks' own scanner of fenced code)


def phrases(entry: dict) -> list[str]:
    return list(entry.get("match", [entry["term"]]))


def prose(markdown: str) -> str:
    """What the abbr extension can see: no fenced code, inline code or HTML comments."""
    text = strip_fences(markdown)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", " ", text, flags=re.DOTALL)


def pages() -> dict[str, str]:
    """Every page but the glossary itself (its own entries are not uses)."""
    files = [*COURSE.glob("*.md"), *COURSE.glob("chapters/*.md"), *COURSE.glob("more/*.md")]
    return {
        path.relative_to(COURSE).as_posix(): prose(path.read_text(encoding="utf-8"))
        for path in sorted(files)
        if path.name != "glossary.md"
    }


def test_glossary_has_at_least_100_terms() -> None:
    assert len(ENTRIES) >= 100, f"site/glossary.toml has {len(ENTRIES)} terms; it needs 100"


def test_glossary_has_the_beginners_vocabulary() -> None:
    known = {phrase.casefold() for entry in ENTRIES for phrase in [entry["term"], *phrases(entry)]}
    missing = [word for word in REQUIRED if word.casefold() not in known]
    assert not missing, f"site/glossary.toml lacks {missing}"


def test_every_term_is_used_in_some_page() -> None:
    texts = pages()
    unused = []
    for entry in ENTRIES:
        variants = {v for p in phrases(entry) for v in (p, p[:1].upper() + p[1:])}
        pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, variants)) + r")\b")
        if not any(pattern.search(text) for text in texts.values()):
            unused.append(entry["term"])
    assert not unused, f"glossary terms that no page uses (add them to the prose): {unused}"


def test_no_entry_says_it_is_unused() -> None:
    for entry in ENTRIES:
        assert "not used" not in entry["definition"].casefold(), entry["term"]


def test_the_used_check_sees_only_prose() -> None:
    """The helper that the usage check relies on drops code, so a term only in code is unused."""
    text = prose("A tensor.\n\n```python\nlayer = 1\n```\n\nSee `matrix` here. <!-- vector -->")
    assert "tensor" in text
    assert "layer" not in text and "matrix" not in text and "vector" not in text


def test_a_tooltip_shows_once_per_section_and_a_common_word_once_per_page() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("glossary_hook", ROOT / "site/hooks/glossary.py")
    hook = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = hook  # dataclasses look their module up
    spec.loader.exec_module(hook)

    def tip(word: str) -> str:
        return f'<abbr title="d">{word}</abbr>'

    page = (
        f"<h1>T</h1><p>{tip('token')} {tip('causal mask')} {tip('token')} {tip('causal mask')}</p>"
        f'<h2 id="two">Two</h2><p>{tip("Token")} {tip("causal mask")}</p>'
        f'<h3 id="three">Three</h3><p>{tip("causal mask")}</p>'
    )
    ids = {"token": "token", "Token": "token", "causal mask": "causal-mask"}
    uses: list[tuple[str, str]] = []
    tidy = hook.tidy_tooltips(
        page, ids, {"token"}, lambda term, anchor: uses.append((term, anchor))
    )
    assert re.findall(r"<abbr[^>]*>([^<]*)</abbr>", tidy) == ["token", "causal mask", "causal mask"]
    assert ("token", "two") in uses and ("causal-mask", "three") in uses
    common = {entry["term"] for entry in ENTRIES if entry.get("common")}
    assert {"token", "weights", "tensor", "loss"} <= common, "the everyday words are not marked"
    assert len(common) < len(ENTRIES) // 3, "common is for the few words every page uses"


def test_the_glossary_defines_what_the_pages_mean() -> None:
    """Two slips a reader found: the residual stream is not a residual connection, and plain
    "fine-tuning" (training on the model's own outputs too) is not supervised fine-tuning."""
    owner = {phrase: entry["term"] for entry in ENTRIES for phrase in phrases(entry)}
    assert owner["residual stream"] == "residual stream"
    assert owner["fine-tuning"] == "fine-tuning"
    assert owner["supervised fine-tuning"] == "supervised fine-tuning"
