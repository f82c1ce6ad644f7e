"""MkDocs hook: the pages' formulas as MathML, typeset at build time.

Formulas are LaTeX in the pages (``$...$`` inline, ``$$...$$`` on their own lines, found by
``pymdownx.arithmatex`` in generic mode); this hook turns each into MathML (``latex2mathml``),
which browsers render natively: no script and no CDN, at build or read time. A formula it cannot
typeset is a warning (so ``--strict`` fails), naming the page.
"""

from __future__ import annotations

import html
import logging
import re

from latex2mathml.converter import convert as latex_to_mathml

log = logging.getLogger("mkdocs.hooks.maths")

_ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.DOTALL
)
_DELIMITERS = {"span": ("\\(", "\\)"), "div": ("\\[", "\\]")}


def typeset_math(content: str, where: str) -> str:
    """Replace arithmatex's generic LaTeX spans and divs with MathML."""

    def replace(m: re.Match) -> str:
        tag = m.group("tag")
        opening, closing = _DELIMITERS[tag]
        tex = html.unescape(m.group("tex")).strip().removeprefix(opening).removesuffix(closing)
        tex = tex.strip()
        try:
            mathml = latex_to_mathml(tex, display="block" if tag == "div" else "inline")
        except Exception as error:  # noqa: BLE001 - latex2mathml's errors share no base class
            log.warning(
                f"maths hook: {where}: cannot typeset the formula ${tex}$ "
                f"({type(error).__name__}: {error}); fix its LaTeX"
            )
            return m.group(0)
        # latex2mathml prints what it does not understand as text: an unknown command, an
        # escape inside \text{}, an alignment "&" outside an array.
        unknown = re.findall(r">([^<]*(?:\\|&(?![#\w]+;))[^<]*)<", mathml)
        if unknown:
            log.warning(
                f"maths hook: {where}: the formula ${tex}$ would show {', '.join(unknown)} "
                "as text; write it with commands latex2mathml supports"
            )
        mathml = mathml.replace("<math ", f'<math alttext="{html.escape(tex)}" ', 1)
        if tag == "div":  # a wide formula scrolls inside its own box, never the page
            return f'<div class="math-display">{mathml}</div>'
        return mathml

    return _ARITHMATEX.sub(replace, content)


def on_page_content(content: str, page, config, files, **kwargs):
    return typeset_math(content, page.file.src_uri)
