"""Figures for the course pages: a matplotlib figure as inline SVG with its caption.

The chapters' figure blocks (```` ```python exec="on" html="1" ````) run
``print(figure_html(fig, caption))``: markdown-exec captures the block's own ``print``, not
``sys.stdout``, so the helper returns the HTML rather than printing it. It lives here, with the
rest of the provided code, so the chapters' notebooks and Run cells import it too. The course
hook (``site/hooks/figures.py``) warns about any plot on a chapter page that has no caption. The
SVG is inline (no image files, nothing fetched) and scales down to the column's width.
"""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figure_html(fig: Figure, caption: str) -> str:
    """``<figure>`` with the figure as SVG and the caption; the figure is closed."""
    import matplotlib.pyplot as plt

    if not caption.strip():
        raise ValueError("a figure needs a caption that says what to look at")
    buffer = io.StringIO()
    # No date in the metadata, so a rebuild gives the same page.
    fig.savefig(
        buffer, format="svg", bbox_inches="tight", facecolor="white", metadata={"Date": None}
    )
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML header and doctype
    # A screen reader meets one image named by its caption, not matplotlib's hundreds of paths.
    name = html.escape(" ".join(caption.split()), quote=True)
    svg = svg.replace("<svg ", f'<svg class="course-figure" role="img" aria-label="{name}" ', 1)
    # The caption is plain text: it may contain "<" or "&" (a formula written in words).
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"
