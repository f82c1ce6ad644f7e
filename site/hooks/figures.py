"""MkDocs hook: every matplotlib figure of a page sits in a ``<figure>`` with a caption.

``gpt.figures.figure_html`` makes both; a figure without a non-empty ``<figcaption>`` is a
warning (so ``mkdocs build --strict`` fails), naming the page.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

# The hooks' shared modules sit beside this file: MkDocs puts this folder on sys.path while it
# loads a hook, a test that loads one by its path does not.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from markdown_scan import HTML_TAG

log = logging.getLogger("mkdocs.hooks.figures")


def check_figure_captions(content: str, where: str) -> None:
    """Warn about a matplotlib figure that is not in a <figure> with a non-empty caption."""
    figures = [(m.start(), m.end()) for m in re.finditer(r"<figure\b.*?</figure>", content, re.S)]
    for svg in re.finditer(r"<svg\b.*?</svg>", content, re.DOTALL):
        if not re.search(r'<g id="figure_\d+"', svg.group(0)):
            continue  # an icon, not a plot
        inside = next((span for span in figures if span[0] <= svg.start() < span[1]), None)
        caption = ""
        if inside is not None:
            found = re.search(r"<figcaption[^>]*>(.*?)</figcaption>", content[slice(*inside)], re.S)
            caption = HTML_TAG.sub("", found.group(1)).strip() if found else ""
        if not caption:
            log.warning(
                f"figures hook: {where} has a figure without a caption; print it with "
                "print(gpt.figures.figure_html(fig, caption)), the caption saying what to "
                "look at"
            )


def on_page_content(content: str, page, config, files, **kwargs):
    check_figure_captions(content, page.file.src_uri)
    return content
