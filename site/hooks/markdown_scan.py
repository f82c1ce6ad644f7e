"""What the site's hooks read from a page's Markdown source, shared by all of them.

The one scanner of fenced code blocks (``fenced_blocks``): the chapter hook skips code when it
counts words, looks for headings or puts a line under the title, the glossary hook when it joins
wrapped phrases, the notebooks hook when it collects a page's examples. Also the words a reader
reads (the reading time) and the page's source without its front matter.

Not a hook: MkDocs puts a hook's folder on ``sys.path`` while it loads the hook, so the hooks
import this module by its bare name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

WORDS_PER_MINUTE = 200

# An opening fence: three or more backticks or tildes, possibly indented (inside an admonition
# or a list item), then the info string ("python exec="on"").
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)")

# An HTML tag: a name right after "<" or "</", then attributes, up to the next ">". A bare
# "<" in prose or code ("j <= i", "x < y and z > 0") is no tag, so no words are dropped.
HTML_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")


@dataclass(frozen=True)
class Fence:
    """One fenced code block: line indices of its fences, its indentation and info string."""

    start: int  # the opening fence
    end: int  # the closing fence (the last line when the block never closes)
    indent: str
    info: str
    closed: bool


def fenced_blocks(lines: Sequence[str]) -> Iterator[Fence]:
    """The fenced code blocks of a page's lines, in order. A block closes on a line of its own
    fence character, at least as long as its opening fence, with no info string (so a
    ```` ```python ```` line inside a ```` ``` ```` block opens nothing)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence = m.group("fence")
        j = i + 1
        while j < len(lines):
            bare = lines[j].strip()
            if bare.startswith(fence) and set(bare) <= {fence[0]}:
                break
            j += 1
        end = min(j, len(lines) - 1)
        yield Fence(i, end, m.group("indent"), m.group("info").strip(), closed=j < len(lines))
        i = j + 1


def fenced_lines(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (its fences included)."""
    inside = [False] * len(lines)
    for block in fenced_blocks(lines):
        inside[block.start : block.end + 1] = [True] * (block.end + 1 - block.start)
    return inside


def strip_fences(markdown: str) -> str:
    """The Markdown without its fenced code blocks."""
    lines = markdown.splitlines()
    kept = (line for line, code in zip(lines, fenced_lines(lines), strict=True) if not code)
    return "\n".join(kept)


def count_words(markdown: str) -> int:
    """The words a reader reads: prose, lists, tables and quizzes, without fenced code."""
    prose = strip_fences(markdown)
    prose = re.sub(r"<!--.*?-->", " ", prose, flags=re.DOTALL)
    prose = HTML_TAG.sub(" ", prose)
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", prose))


def reading_minutes(markdown: str) -> int:
    return max(1, math.ceil(count_words(markdown) / WORDS_PER_MINUTE))


def read_source(path: Path) -> str | None:
    """A page's Markdown as written, without YAML front matter; None if it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            text = text[end + 4 :]
    return text


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
