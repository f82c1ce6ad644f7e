"""MkDocs hook: the glossary, ``site/glossary.toml``, on every page.

- the glossary page (``<!-- glossary -->`` in ``course/glossary.md``);
- hover tooltips: the entries fill the ``abbr`` extension's glossary, so every plain
  occurrence of a term in any page becomes ``<abbr title="definition">``, which Material shows
  as a tooltip (``content.tooltips``). Code, raw HTML and exec'd output are never touched (they
  are atomic or stashed). This hook then unwraps the tooltips in headings and links and keeps
  only a term's first use: in each section (H2), or in the whole page for the words every page
  uses (``common = true``: token, loss, tensor), which would otherwise underline every section;
- back-links under every glossary entry: the pages (and sections) where the term occurs.
"""

from __future__ import annotations

import html
import logging
import re
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The hooks' shared modules sit beside this file: MkDocs puts this folder on sys.path while it
# loads a hook, a test that loads one by its path does not.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from course_data import load_lessons, repository_root
from markdown_scan import FENCE, fenced_lines, slugify
from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.hooks.glossary")

GLOSSARY_MARKER = re.compile(r"^[ \t]*<!--\s*glossary\s*-->[ \t]*$", re.MULTILINE)
REFS_PLACEHOLDER = re.compile(r"<!--glossary-refs:([a-z0-9-]+)-->")
GLOSSARY_PAGE = "glossary.md"
UNRECORDED = ("reference/",)  # the instructor build's solution pages are not uses


@dataclass
class Entry:
    term: str
    definition: str
    match: list[str]
    common: bool = False  # a word every page uses: a tooltip once per page, not per section

    @property
    def id(self) -> str:
        return slugify(self.term)


def load_glossary(path: Path) -> list[Entry]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PluginError(f"glossary hook: cannot read the glossary {path}: {error}") from None
    entries = []
    for raw in data.get("entry", []):
        term, definition = raw["term"], " ".join(raw["definition"].split())
        entries.append(
            Entry(term, definition, list(raw.get("match", [term])), bool(raw.get("common")))
        )
    return entries


def abbreviations(entries: list[Entry]) -> tuple[dict[str, str], dict[str, str]]:
    """(phrase -> definition) for the abbr extension, and (phrase -> entry id)."""
    titles: dict[str, str] = {}
    ids: dict[str, str] = {}
    for entry in entries:
        for phrase in entry.match:
            for variant in {phrase, phrase[:1].upper() + phrase[1:]}:
                if variant in ids and ids[variant] != entry.id:
                    log.warning(
                        f"glossary hook: glossary phrase {variant!r} belongs to both "
                        f"{ids[variant]!r} and {entry.id!r}"
                    )
                titles[variant] = entry.definition
                ids[variant] = entry.id
    return titles, ids


class State:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.phrase_to_id: dict[str, str] = {}
        self.common: set[str] = set()  # ids of the common words
        self.order: dict[str, int] = {}  # page -> its place in the back-links
        self.labels: dict[str, str] = {}  # chapter page -> "N. Title"
        # entry id -> {page src_uri: (title, anchor of the first occurrence)}
        self.uses: dict[str, dict[str, tuple[str, str]]] = {}
        self.pages: dict[str, Any] = {}  # src_uri -> Page


STATE = State()


# --------------------------------------------------------------------------- the glossary page


def glossary_markdown() -> str:
    letters: dict[str, str] = {}
    for entry in STATE.entries:
        letters.setdefault(entry.term[0].upper(), entry.id)
    jump = " ".join(
        f'<a href="#{anchor}">{letter}</a>' for letter, anchor in sorted(letters.items())
    )
    parts = [f'<nav class="glossary-letters" aria-label="Glossary letters">{jump}</nav>', ""]
    parts.append('<dl class="glossary">')
    for entry in STATE.entries:
        parts.append(
            f'<dt id="{entry.id}"><a class="glossary-term" href="#{entry.id}">'
            f"{html.escape(entry.term)}</a></dt>"
        )
        parts.append(
            f"<dd><p>{html.escape(entry.definition)}</p>"
            f'<p class="glossary-refs"><!--glossary-refs:{entry.id}--></p></dd>'
        )
    parts.append("</dl>")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- wrapped phrases


def join_wrapped_phrases(markdown: str, phrases: Iterable[str]) -> str:
    """Put on one line each glossary phrase that the source wraps across two lines of a
    paragraph ("causal" at the end of one line, "mask" at the start of the next): the abbr
    extension matches a phrase with its spaces, so a wrapped one would get no tooltip.

    Only a soft line break is joined: never after a heading line or a hard break (two trailing
    spaces or a backslash), never across a blank line or before a block's marker, and never in
    fenced code, in raw ``<pre>`` blocks or between two lines indented as code (4 spaces or
    more, outside an admonition or a list item, whose bodies are indented the same way).
    """
    multi = sorted((p for p in phrases if " " in p), key=len, reverse=True)
    if not multi:
        return markdown
    words = "|".join(r"[ \t]*\n[ \t]*".join(map(re.escape, p.split(" "))) for p in multi)
    wrapped = re.compile(rf"(?<![\w-])(?:{words})(?![\w-])")
    lines = markdown.splitlines(keepends=True)
    joinable = _soft_breaks(lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and joinable[i]:
            pair = line + lines[i + 1]
            m = wrapped.search(pair, max(0, len(line) - max(map(len, multi)) - 1))
            if m and m.start() < len(line) <= m.end():
                joined = pair[: m.start()] + " ".join(m.group(0).split()) + pair[m.end() :]
                lines[i + 1] = joined  # the next line may wrap a phrase onwards too
                i += 1
                continue
        out.append(line)
        i += 1
    return "".join(out)


_BLOCK_START = re.compile(r"^[ \t]*(?:[-*+>|]|\d+[.)]|#{1,6}[ \t]|!!!|\?\?\?|<)")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]")
_CONTAINER = re.compile(r"^[ \t]*(?:!!!|\?\?\?\+?|[-*+][ \t]|\d+[.)][ \t]|===)")


def _soft_breaks(lines: list[str]) -> list[bool]:
    """For each line, whether its line break is a soft break inside a paragraph of prose."""
    result = [False] * len(lines)
    pre = False
    container = False  # inside an admonition, a tab or a list item: indentation is its body
    for i, (line, code) in enumerate(zip(lines, fenced_lines(lines), strict=True)):
        if code:
            continue
        bare = line.rstrip("\n")
        if re.search(r"<pre\b", bare, re.I):
            pre = True
        if pre:
            pre = not re.search(r"</pre>", bare, re.I)
            continue
        if not bare.strip():
            continue
        if _CONTAINER.match(bare):
            container = True
        elif not bare[:1].isspace():
            container = False
        if i + 1 >= len(lines):
            continue
        after = lines[i + 1].rstrip("\n")
        indented = bare.startswith(("    ", "\t")) and after.startswith(("    ", "\t"))
        code_block = indented and not container
        result[i] = not (
            _HEADING.match(bare)
            or bare.endswith(("  ", "\\"))
            or not after.strip()
            or _BLOCK_START.match(after)
            or FENCE.match(after)
            or code_block
        )
    return result


# --------------------------------------------------------------------------- tooltips


_TOOLTIP_SCAN = re.compile(
    r"(?P<heading><h(?P<level>[1-6])(?P<attrs>[^>]*)>(?P<body>.*?)</h(?P=level)>)"
    r"|(?P<link><a\b[^>]*>(?P<label>.*?)</a>)"
    r"|(?P<abbr><abbr title=\"[^\"]*\">(?P<text>[^<]*)</abbr>)",
    re.DOTALL,
)
_ABBR = re.compile(r"<abbr title=\"[^\"]*\">([^<]*)</abbr>")
_ID = re.compile(r"\bid=\"([^\"]+)\"")


def tidy_tooltips(
    content: str,
    phrase_to_id: dict[str, str],
    common: set[str],
    use: Callable[[str, str], None] = lambda term_id, anchor: None,
) -> str:
    """Unwrap tooltips in headings, in links and on every use of a term after its first (in
    its section, or in the page for the ``common`` ids); ``use(term id, section anchor)`` is
    told of every use, unwrapped or not."""
    anchor = ""
    seen: set[str] = set()  # ids with a tooltip in this section (common ones: in the page)

    def replace(m: re.Match) -> str:
        nonlocal anchor, seen
        if m.group("heading") or m.group("link"):  # no dotted underline in titles or links
            if m.group("heading"):
                id_match = _ID.search(m.group("attrs"))
                if id_match:
                    anchor = id_match.group(1)
                if int(m.group("level")) <= 2:
                    seen = {term_id for term_id in seen if term_id in common}
            inside = m.group("body") if m.group("heading") else m.group("label")
            for text in _ABBR.findall(inside):
                if text in phrase_to_id:
                    use(phrase_to_id[text], anchor)
            return _ABBR.sub(r"\1", m.group(0))
        text = m.group("text")
        term_id = phrase_to_id.get(text)
        if term_id is None:  # an abbreviation the page defined itself: leave it
            return m.group(0)
        use(term_id, anchor)
        if term_id in seen:
            return text
        seen.add(term_id)
        return m.group(0)

    return _TOOLTIP_SCAN.sub(replace, content)


def _backlinks(glossary_page) -> Callable[[str], str]:
    def link(term_id: str) -> str:
        uses = STATE.uses.get(term_id, {})
        if not uses:
            return '<span class="glossary-refs__none">Not used in the pages yet.</span>'
        items = []
        for src in sorted(uses, key=lambda s: (STATE.order.get(s, 100), s)):
            title, anchor = uses[src]
            page = STATE.pages.get(src)
            if page is None or page.url is None:
                continue
            href = get_relative_url(page.url, glossary_page.url)
            if href.endswith("."):  # "." or "..": the home page
                href += "/"
            href += f"#{anchor}" if anchor else ""
            label = STATE.labels.get(src) or page.title or title
            items.append(f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        return '<span class="glossary-refs__label">Used in:</span> ' + ", ".join(items)

    return link


# --------------------------------------------------------------------------- MkDocs events


def on_config(config, **kwargs):
    global STATE
    STATE = State()
    STATE.entries = load_glossary(repository_root(config) / "site" / "glossary.toml")
    STATE.common = {entry.id for entry in STATE.entries if entry.common}
    lessons = load_lessons(config)
    STATE.order = {"index.md": 0} | {lesson.page: lesson.number for lesson in lessons}
    STATE.labels = {lesson.page: f"{lesson.number}. {lesson.title}" for lesson in lessons}
    titles, STATE.phrase_to_id = abbreviations(STATE.entries)
    if "abbr" not in config.markdown_extensions:
        raise PluginError("glossary hook: the 'abbr' Markdown extension must be enabled")
    config.mdx_configs.setdefault("abbr", {})["glossary"] = titles
    return config


def on_page_markdown(markdown: str, page, config, files, **kwargs):
    STATE.pages[page.file.src_uri] = page
    if page.file.src_uri == GLOSSARY_PAGE:
        if GLOSSARY_MARKER.search(markdown):
            markdown = GLOSSARY_MARKER.sub(lambda _: glossary_markdown(), markdown, count=1)
        else:
            log.warning("glossary hook: glossary.md has no '<!-- glossary -->' line")
    return join_wrapped_phrases(markdown, STATE.phrase_to_id)


def on_page_content(content: str, page, config, files, **kwargs):
    src = page.file.src_uri
    title = page.title or src

    def use(term_id: str, anchor: str) -> None:
        if src != GLOSSARY_PAGE and not src.startswith(UNRECORDED):
            STATE.uses.setdefault(term_id, {}).setdefault(src, (title, anchor))

    return tidy_tooltips(content, STATE.phrase_to_id, STATE.common, use)


def on_page_context(context, page, config, nav, **kwargs):
    if page.file.src_uri == GLOSSARY_PAGE and page.content:
        link = _backlinks(page)
        page.content = REFS_PLACEHOLDER.sub(lambda m: link(m.group(1)), page.content)
    return context
