"""The course site: a strict MkDocs build, its generated parts, and a headless browser on it.

The build runs `mkdocs build --strict` with this interpreter into a temporary folder. The
browser part drives Debian's chromium (/usr/bin/chromium) through the `playwright` package
against the built site, served by a loopback HTTP server that the test starts; every request
that is not to that server is refused, so nothing here touches the network. Screenshots of
the home page and of chapter 1 go to build/screenshots/ (ignored by git).
"""

from __future__ import annotations

import ast
import functools
import html.parser
import http.server
import importlib.util
import math
import re
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from xml.etree import ElementTree

import pytest
from support.axe import SCRIPT as AXE_SCRIPT
from support.axe import axe_core_script
from support.side_site import INSTRUCTOR_CHAPTER
from support.system_packages import require, under_ci

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Belt and braces: no host name resolves except the loopback server's address.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]

pytestmark = pytest.mark.slow

LESSONS = tomllib.loads((COURSE / "lessons.toml").read_text(encoding="utf-8"))["lesson"]
GLOSSARY = tomllib.loads((ROOT / "site" / "glossary.toml").read_text(encoding="utf-8"))["entry"]


def page_dir(page: str) -> str:
    """The built folder of a docs page (use_directory_urls): chapters/01-tokens.md -> ..."""
    return page.removesuffix(".md").removesuffix("index").rstrip("/")


def read(site: Path, page: str) -> str:
    return (site / page_dir(page) / "index.html").read_text(encoding="utf-8")


def reading_pages() -> list[str]:
    """The pages a reader works through: the primer, the chapters and the pages beside them."""
    pages = [lesson["page"] for lesson in LESSONS]
    more = sorted(path.relative_to(COURSE).as_posix() for path in COURSE.glob("more/*.md"))
    return (["primer.md"] if (COURSE / "primer.md").is_file() else []) + pages + more


@functools.cache
def hook(name: str):
    """site/hooks/<name>.py as a module (MkDocs loads a hook by its path, not as a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_hook", ROOT / f"site/hooks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the build


def test_strict_build_passes(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()
    assert not list(site.rglob("*.toml")), "lessons.toml must stay out of the built site"
    assert not (site / "reference").exists(), "the student build must not carry solutions"


def test_nav_follows_the_manifest() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = re.findall(r"^\s*-\s+[^:\n]+:\s+(chapters/\S+\.md)\s*$", text, re.M)
    assert listed == [lesson["page"] for lesson in LESSONS]


def test_chapters_carry_header_and_exercise_box(site: Path) -> None:
    for lesson in LESSONS:
        html = read(site, lesson["page"])
        assert f"Part {lesson['number']} of {len(LESSONS)}" in html, lesson["page"]
        assert re.search(r"about \d+ min read", html), lesson["page"]
        assert "<!-- exercise-box -->" not in html, lesson["page"]
        box = re.search(r'<div class="admonition exercise">(.*?)</div>\s*(?=<)', html, re.S)
        assert box, f"{lesson['page']}: no exercise box"
        box_html = html[box.start() :]
        assert f"exercises/{lesson['module']}.py" in box_html
        assert re.search(
            rf"grade<span[^>]*>\s*</span>--<span[^>]*>\s*</span>{lesson['slug']}", box_html
        )
        for function in lesson["functions"]:
            section = lesson["sections"][function]
            assert f'href="#{section}"><code>{function}</code>' in box_html, (
                lesson["page"],
                function,
            )
            assert f'id="{section}"' in html, (lesson["page"], section)
        checks = lesson.get("check", [])
        if checks:
            total = sum(check["points"] for check in checks)
            assert re.search(rf"<strong>Points:</strong> {total:g} point", box_html)
        else:
            assert "<strong>Points:</strong> to be announced" in box_html
        assert "reference solution" not in box_html


def test_the_exercise_box_names_the_command_of_the_repository_and_of_a_release() -> None:
    from core.manifest import load_manifest

    chapters = hook("chapters")
    lesson = load_manifest().lesson("windows")
    box = chapters.exercise_box(lesson, "")
    assert "nox -s grade -- windows" in box and "python -m graders windows" in box
    assert "`windows.ipynb`" in box and "`--watch`" in box and "](../class.md)" in box


def test_a_class_has_its_page_and_no_page_sends_a_student_to_solutions() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for name in ("class.md", "jupyterhub.md"):
        assert re.search(rf"^\s*-\s+[^:\n]+:\s+{name}\s*$", nav, re.M), f"{name} is not in the nav"
    hub_page = (COURSE / "jupyterhub.md").read_text(encoding="utf-8")
    assert "](class.md)" in hub_page and "nbgrader submit" in hub_page
    page = (COURSE / "class.md").read_text(encoding="utf-8")
    assert "](jupyterhub.md)" in page, (
        "the release's class page does not lead to the JupyterHub one"
    )
    for said in (
        "pip install -r requirements.txt",
        "--no-deps",
        "python -m graders LESSON",
        "--watch",
    ):
        assert said in page, said
    assert "python -m graders LESSON --zip" in page and "LESSON-submission.zip" in page
    for path in sorted(COURSE.rglob("*.md")):
        assert "solutions/" not in path.read_text(encoding="utf-8"), path


def test_the_pages_beside_the_chapters_carry_a_header(site: Path) -> None:
    """The primer and the "More" pages say where they stand and how long they take."""
    chapters = {lesson["page"] for lesson in LESSONS}
    beside = [page for page in reading_pages() if page not in chapters]
    assert "primer.md" in beside and any(page.startswith("more/") for page in beside)
    for page in beside:
        header = re.search(r'<p class="chapter-meta">(.*?)</p>', read(site, page), re.S)
        assert header, f"{page}: no header under its title"
        text = re.sub(r"<[^>]+>", "", header.group(1))
        part = (
            r"Part 0 of \d+, before part 1" if page == "primer.md" else r"More on part \d+ of \d+"
        )
        assert re.fullmatch(rf"{part} · about \d+ min read · (reference|optional)", text), text


def test_home_page_lists_the_learning_path(site: Path) -> None:
    html = read(site, "index.md")
    positions = []
    for lesson in LESSONS:
        link = f'href="{page_dir(lesson["page"])}/"'
        assert link in html, f"home page does not link {lesson['page']}"
        positions.append(html.index(link, html.index('class="grid cards learning-path"')))
        assert f"nox -s grade -- {lesson['slug']}" in html
    assert positions == sorted(positions), "the learning path is out of order"
    text = re.sub(r"<[^>]+>", "", html)
    assert "nox -s grade" in text and "nox -s train" in text


def test_glossary_source_is_sound() -> None:
    assert len(GLOSSARY) >= 40
    terms = [entry["term"] for entry in GLOSSARY]
    assert terms == sorted(terms, key=str.casefold), "keep site/glossary.toml alphabetical"
    assert len(set(terms)) == len(terms)
    for entry in GLOSSARY:
        definition = entry["definition"]
        sentences = re.findall(r"[.!?](?:\s|$)", definition)
        assert 1 <= len(sentences) <= 3, (entry["term"], "one to three sentences")
        assert not re.search(r"[`*]|<[A-Za-z/]", definition), (entry["term"], "plain text only")


def test_glossary_page_has_every_entry_with_backlinks(site: Path) -> None:
    html = read(site, "glossary.md")
    for entry in GLOSSARY:
        slug = re.sub(r"[^a-z0-9]+", "-", entry["term"].lower()).strip("-")
        assert f'<dt id="{slug}">' in html, entry["term"]
    assert "<!--glossary-refs:" not in html
    backlinks = re.findall(r"Used in:</span> (.*?)</p>", html)
    assert len(backlinks) >= len(GLOSSARY) // 2, "most terms should link to the pages using them"
    assert any("../chapters/01-tokens/" in links for links in backlinks)


def test_every_glossary_term_has_a_tooltip_on_some_page(site: Path) -> None:
    """A beginner's reference: at least 100 terms, each one shown as a tooltip on some page and
    linked back from its entry; no entry is left saying that no page uses it."""
    from html import unescape

    assert len(GLOSSARY) >= 100, f"the glossary has {len(GLOSSARY)} terms; it needs 100"
    glossary = read(site, "glossary.md")
    assert "Not used in the pages yet" not in glossary
    tooltips: set[str] = set()
    for path in site.rglob("index.html"):
        if path.parent.name != "glossary":
            found = re.findall(r'<abbr title="([^"]*)"', path.read_text(encoding="utf-8"))
            tooltips |= {unescape(title) for title in found}
    for entry in GLOSSARY:
        slug = re.sub(r"[^a-z0-9]+", "-", entry["term"].lower()).strip("-")
        item = re.search(rf'<dt id="{slug}">.*?</dt>\s*<dd>(.*?)</dd>', glossary, re.S)
        assert item and "Used in:" in item.group(1), f"no page uses {entry['term']!r}"
        definition = " ".join(entry["definition"].split())
        assert definition in tooltips, f"{entry['term']!r} has a tooltip on no page"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("The causal\n   mask; Causal\nmask too.\n", "The causal mask; Causal mask too.\n"),
        ("!!! note\n    The causal\n    mask, here.\n", "!!! note\n    The causal mask, here.\n"),
        ("- an item's causal\n  mask\n", "- an item's causal mask\n"),
        ("a causal\nmask and a standard\ndeviation\n", "a causal mask and a standard deviation\n"),
        # Not soft breaks inside a paragraph of prose: left as written.
        ("A causal\n\nmask: two paragraphs.\n", None),
        ("## Why causal\nmask matters\n", None),  # a heading is one line
        ("causal  \nmask, a hard break\n", None),
        ("causal\\\nmask, a hard break\n", None),
        ("a causal\n- mask list item\n", None),
        ("noncausal\nmask, causal\nmasking\n", None),
        ("```python\ncausal\nmask = 1\n```\n", None),
        ("```\n```python\ncausal\nmask\n```\n", None),  # an info string closes no fence
        ("Code:\n\n    x = causal\n    mask = 1\n", None),
        ("<pre>causal\nmask</pre>\n", None),
    ],
)
def test_a_phrase_wrapped_across_lines_gets_its_tooltip(source: str, expected: str | None) -> None:
    join = hook("glossary").join_wrapped_phrases
    phrases = ["causal mask", "Causal mask", "standard deviation"]
    assert join(source, phrases) == (source if expected is None else expected)


def test_no_glossary_phrase_stays_wrapped_in_the_pages() -> None:
    """The course's sources wrap some multi-word glossary phrases across two lines ("causal" /
    "mask"); after the hook's join none is left wrapped, so each can get its tooltip."""
    from test_glossary import ENTRIES, phrases, prose

    variants = {v for entry in ENTRIES for p in phrases(entry) for v in (p, p[0].upper() + p[1:])}
    between = r"[ \t]*\n[ \t]*"
    wrapped = re.compile(
        r"(?<![\w-])(?:"
        + "|".join(between.join(map(re.escape, v.split(" "))) for v in variants if " " in v)
        + r")(?![\w-])"
    )
    join = hook("glossary").join_wrapped_phrases
    before, after = [], []
    for path in sorted([*COURSE.glob("*.md"), *COURSE.glob("chapters/*.md")]):
        text = path.read_text(encoding="utf-8")
        before += [(path.name, m.group(0)) for m in wrapped.finditer(prose(text))]
        after += [(path.name, m.group(0)) for m in wrapped.finditer(prose(join(text, variants)))]
    assert before, "no page wraps a glossary phrase: this test checks nothing"
    assert not after, f"glossary phrases still wrapped across lines: {after}"


def test_tooltips_stay_out_of_code_and_headings(site: Path) -> None:
    pages = list(site.rglob("index.html"))
    total = 0
    for path in pages:
        html = path.read_text(encoding="utf-8")
        total += html.count("<abbr ")
        for block in re.findall(r"<pre\b.*?</pre>|<code\b.*?</code>", html, re.S):
            assert "<abbr" not in block, path
        for heading in re.findall(r"<h[1-6]\b.*?</h[1-6]>", html, re.S):
            assert "<abbr" not in heading, path
        for svg in re.findall(r"<svg\b.*?</svg>", html, re.S):
            assert "<abbr" not in svg, path
    assert total > 100, "glossary tooltips are missing from the pages"


def test_a_common_word_has_one_tooltip_per_page(site: Path) -> None:
    """Everyday words (token, loss, tensor) are underlined once in a page, other terms once in
    each section: far fewer tooltips than one per section for every term."""
    from html import unescape

    common = {" ".join(e["definition"].split()) for e in GLOSSARY if e.get("common")}
    assert common
    for path in site.rglob("index.html"):
        titles = [unescape(t) for t in re.findall(r'<abbr title="([^"]*)"', path.read_text())]
        repeated = {title[:40] for title in common if titles.count(title) > 1}
        assert not repeated, f"{path.parent.name}: common words with several tooltips: {repeated}"


def test_faq_points_at_real_code() -> None:
    text = (COURSE / "faq.md").read_text(encoding="utf-8")
    questions = re.findall(r"^## .+\?", text, re.M)
    assert len(questions) >= 12
    pointers = re.findall(r"`((?:solutions|gpt|core)/[\w/]+\.py)::([\w.]+)`", text)
    assert len(pointers) >= len(questions)
    for file, name in pointers:
        path = ROOT / file
        assert path.is_file(), f"faq.md points at {file}, which does not exist"
        assert defines(path, name.split(".")), f"{file} defines no {name} (faq.md)"


def defines(path: Path, names: list[str]) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    for name in names:
        found = None
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name == name:
                    found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    found = node
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def test_instructor_build_links_reference_solutions(side_site: Path, site: Path) -> None:
    module = INSTRUCTOR_CHAPTER["module"]
    link = f'href="../../reference/{module}/">reference solution'
    assert link in read(side_site, INSTRUCTOR_CHAPTER["page"])
    assert link not in read(site, INSTRUCTOR_CHAPTER["page"])  # the students' site: neither
    assert not (site / "reference").exists()
    for lesson in LESSONS:
        module = lesson["module"]
        reference = (side_site / "reference" / module / "index.html").read_text()
        source = (ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8")
        first_def = re.search(r"^def (\w+)", source, re.M).group(1)
        assert first_def in reference, module
        assert "Instructor build" in reference, module


class ArticleText(html.parser.HTMLParser):
    """The words of a built page's article as a reader sees them, leaving out code, printed
    output, figures, formulas and scripts: an independent count to check the reading time."""

    SKIP = {"pre", "script", "style", "svg", "figure", "math", "nav"}

    def __init__(self) -> None:
        super().__init__()
        self.inside_article = 0
        self.skipping = 0
        self.words = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "article":
            self.inside_article += 1
        elif self.inside_article and tag in self.SKIP:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.inside_article -= 1
        elif self.inside_article and tag in self.SKIP:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if self.inside_article and not self.skipping:
            self.words += sum(1 for word in data.split() if any(c.isalnum() for c in word))


def test_reading_time_matches_an_independent_word_count(site: Path) -> None:
    for lesson in LESSONS:
        page = read(site, lesson["page"])
        shown = int(re.search(r"about (\d+) min read", page).group(1))
        counter = ArticleText()
        counter.feed(page)
        expected = counter.words / 200  # the hook's words per minute
        # The page adds a little (exercise box, quiz progress), the source a little (LaTeX
        # commands): within 10% of the words' own time, and never off by a wide margin.
        assert abs(shown - expected) <= max(1.5, 0.1 * expected), (
            f"{lesson['page']}: the header says about {shown} min, but its article has "
            f"{counter.words} words, about {expected:.1f} min at 200 words a minute"
        )


def test_reading_time_keeps_the_words_after_a_less_than_sign() -> None:
    scan = hook("markdown_scan")
    prose = "Mask where j <= i holds.\n" + "word " * 400 + "\nKeep x > 0 <b>bold</b> too."
    assert scan.count_words(prose) == 5 + 400 + 5
    assert scan.reading_minutes(prose) == math.ceil(410 / scan.WORDS_PER_MINUTE)


def test_no_page_reads_longer_than_25_minutes() -> None:
    """A page a reader can finish in one sitting; what a chapter leaves out goes to a page of its
    own (course/more/), linked from the chapter."""
    scan = hook("markdown_scan")
    for path in sorted(COURSE.rglob("*.md")):
        minutes = scan.reading_minutes(scan.read_source(path))
        assert minutes <= 25, f"{path.relative_to(ROOT)} reads in about {minutes} minutes"


FORMULA_CHARACTERS = re.compile(r"[√∑ᵢⱼᵀ²∞‖τ]|\w\^\(")


def code_blocks(markdown: str) -> Iterator[tuple[int, str, str]]:
    """(line, info string, body) of every fenced block and indented code block."""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*(`{3,}|~{3,})(.*)$", lines[i])
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            yield i + 1, fence.group(2), "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        starts_block = i > 0 and not lines[i - 1].strip()
        if starts_block and re.match(r"^ {4}(?! *([-*>]|\d+\.) )\S", lines[i]):
            # an indented code block, unless it continues a list item above
            above = next((line for line in reversed(lines[:i]) if line.strip()), "")
            if not re.match(r"^(\s*)([-*]|\d+\.) |^ {4}", above):
                yield i + 1, "indented", lines[i]
        i += 1


def test_formulas_are_typeset_as_mathml(site: Path) -> None:
    total = 0
    for page in reading_pages():
        source = (COURSE / page).read_text(encoding="utf-8")
        for line, info, body in code_blocks(source):
            if "exec=" not in info:  # examples may print anything; a shown formula is maths
                assert not FORMULA_CHARACTERS.search(body), (
                    f"course/{page}, line {line}: a formula in a code block; write it as "
                    f"LaTeX between $$ lines instead:\n{body}"
                )
        built = read(site, page)
        assert 'class="arithmatex"' not in built, f"{page}: LaTeX left untypeset"
        maths = re.findall(r"<math\b[^>]*>", built)
        assert all('alttext="' in tag for tag in maths), page
        total += len(maths)
    assert total >= 40, f"only {total} typeset formulas in the chapters"


def test_every_figure_has_a_caption(site: Path) -> None:
    figures = 0
    for page in reading_pages():
        built = read(site, page)
        for svg in re.finditer(r"<svg\b.*?</svg>", built, re.S):
            if not re.search(r'<g id="figure_\d+"', svg.group(0)):
                continue  # an icon
            figures += 1
            opened = built.rfind("<figure>", 0, svg.start())
            closed = built.find("</figure>", svg.end())
            assert opened != -1 and built.rfind("</figure>", 0, svg.start()) < opened, page
            caption = re.search(r"<figcaption>(.*?)</figcaption>", built[svg.end() : closed], re.S)
            assert caption and len(caption.group(1).split()) >= 8, (
                f"{page}: a figure without a caption that says what to look at"
            )
            # One image for a screen reader, named by its caption.
            opening = svg.group(0)[: svg.group(0).index(">")]
            assert 'role="img"' in opening, f"{page}: a figure's SVG has no role"
            name = re.search(r'aria-label="([^"]*)"', opening)
            assert name and name.group(1) == " ".join(caption.group(1).split()), page
    assert figures >= len(LESSONS)


DIAGRAM = re.compile(
    r'<figure class="course-diagram">\s*<img ([^>]*)>\s*<figcaption>(.*?)</figcaption>', re.S
)


def test_drawn_figures_have_alt_text_a_caption_and_readable_text(site: Path) -> None:
    """A figure drawn as an SVG file (the block chapter's pre-LN block) is in the built site,
    says in its alt text what it shows, and its lettering is no smaller than 12 px."""
    drawn = 0
    for page in reading_pages():
        built = read(site, page)
        for found in DIAGRAM.finditer(built):
            drawn += 1
            attributes = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
            alt = attributes.get("alt", "")
            assert len(alt.split()) >= 20, f"{page}: a drawn figure without alt text"
            assert len(found.group(2).split()) >= 8, f"{page}: a drawn figure without a caption"
            svg = (site / page_dir(page) / attributes["src"]).resolve()
            assert svg.is_file(), f"{page}: {attributes['src']} is not in the built site"
            root = ElementTree.parse(svg).getroot()
            assert root.find("{http://www.w3.org/2000/svg}title") is not None
            sizes = [float(size) for size in re.findall(r'font-size="([\d.]+)"', svg.read_text())]
            assert sizes and min(sizes) >= 12, f"{svg.name}: lettering below 12 px"
    assert drawn >= 1, "the block chapter's drawing of the pre-LN block is missing"


# The Time Machine's figures: what the prose states (<span class="book-figure">) and the line the
# page's block prints where the book is cached on the building machine.
BOOK_FIGURES = {
    "windows": r"The Time Machine: (?P<tokens>[\d,]+) tokens, (?P<windows>\d+) windows of 256, "
    r"(?P<batches>\d+) batches of 8",
    "objective": r"The Time Machine: (?P<tokens>[\d,]+) GPT-2 tokens, (?P<distinct>[\d,]+) "
    r"distinct\s+unigram entropy (?P<entropy>[\d.]+) nats, perplexity (?P<perplexity>\d+)",
}
NO_BOOK = 'Needs The Time Machine, not cached here: run load_corpus("time-machine") once online.'


def page_text(built: str) -> str:
    from html import unescape

    return unescape(re.sub(r"<[^>]+>", "", built))


def test_the_book_figures_in_the_prose_are_the_live_numbers(site: Path) -> None:
    compared = 0
    for module, pattern in BOOK_FIGURES.items():
        lesson = next(lesson for lesson in LESSONS if lesson["module"] == module)
        built = read(site, lesson["page"])
        stated = dict(
            re.findall(r'<span class="book-figure" data-figure="(\w+)">([^<]+)</span>', built)
        )
        assert set(stated) == set(re.compile(pattern).groupindex), (module, stated)
        text = page_text(built)
        live = re.search(pattern, text)
        if live is None:  # the book is not cached here: the block says so, in one line
            printed = re.search(rf"^{re.escape(NO_BOOK)}$", text, re.M)
            assert printed, f"{lesson['page']}: the book's block printed neither"
            continue
        assert live.groupdict() == stated, f"{lesson['page']}: the prose says {stated}"
        compared += 1
    if not compared:
        pytest.skip("The Time Machine is not cached here, so no live numbers were printed")


# GPT-2's figures: what the prose states (<span class="gpt2-figure">) and the lines its blocks
# print.
# Chapter 5 runs a GPT-2-shaped model whichever weights are there, so its shapes and counts are
# compared on every build and "same predicted tokens" where the published weights are loaded;
# chapter 2 prints only with GPT-2's weights, else one line saying they are absent.
GPT2_WEIGHTS = "GPT-2's published weights"
GPT2_ABSENT = "random GPT-2-shaped weights (GPT-2's are not here)"
WHICH = "|".join(map(re.escape, (GPT2_WEIGHTS, GPT2_ABSENT)))
GPT2_FIGURES = {
    "embeddings": [r"^token table (?P<wte>\(\d+, \d+\)), position table (?P<wpe>\(\d+, \d+\))$"],
    "block": [
        rf"^(?P<which>{WHICH}); (?P<tokens>\d+) tokens$",
        rf"^GPT-2 shape \((?P<which>{WHICH})\): logits (?P<logits>\([\d, ]+\)), "
        r"max difference \S+, same predicted tokens: (?P<same>\w+)\n"
        r"(?P<parameters>[\d,]+) parameters",
    ],
}
GPT2_ONLY_WITH_THE_WEIGHTS = {"same"}  # figures that random weights of GPT-2's shape change
NO_GPT2 = "Needs GPT-2's weights, not on this machine: run `nox -s generate` once online."


def test_gpt2s_figures_in_the_prose_are_the_live_numbers(site: Path) -> None:
    with_weights = []
    for module, patterns in GPT2_FIGURES.items():
        lesson = next(lesson for lesson in LESSONS if lesson["module"] == module)
        built = read(site, lesson["page"])
        stated = dict(
            re.findall(r'<span class="gpt2-figure" data-figure="(\w+)">([^<]+)</span>', built)
        )
        names = {name for p in patterns for name in re.compile(p).groupindex} - {"which"}
        assert set(stated) == names, (module, stated)
        text = page_text(built)
        for pattern in patterns:
            live = re.search(pattern, text, re.M)
            if live is None:  # chapter 2 without the weights: its block says so, in one line
                absent = re.search(rf"^{re.escape(NO_GPT2)}$", text, re.M)
                assert "which" not in pattern and absent, (
                    f"{lesson['page']}: GPT-2's block printed neither its figures nor {NO_GPT2!r}"
                )
                continue
            printed = live.groupdict()
            which = printed.pop("which", GPT2_WEIGHTS)
            assert which in (GPT2_WEIGHTS, GPT2_ABSENT), which
            if which == GPT2_WEIGHTS:
                with_weights.append(module)
            else:
                printed = {k: v for k, v in printed.items() if k not in GPT2_ONLY_WITH_THE_WEIGHTS}
            for name, value in printed.items():
                assert value == stated[name], (
                    f"{lesson['page']}: the prose says {name} = {stated[name]}, "
                    f"the block printed {value}"
                )
    if not with_weights:
        pytest.skip("GPT-2's weights are not on this machine: only their shapes were compared")


def test_the_norm_measurement_agrees_with_the_prose(site: Path) -> None:
    """Chapter 2 says which rows grow long: in the untied input table the frequent ones (the
    common claim), in a tied or output table the rarest. The page's own numbers must agree."""
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "embeddings")
    text = page_text(read(site, lesson["page"]))
    lengths = {
        label: (float(frequent), float(once))
        for label, frequent, once in re.findall(
            r"^(tied|untied, input|untied, output)\s+mean cosine .*?100 most frequent "
            r"([\d.]+), seen once ([\d.]+)$",
            text,
            re.M,
        )
    }
    assert set(lengths) == {"tied", "untied, input", "untied, output"}, lengths
    assert lengths["untied, input"][0] > lengths["untied, input"][1]
    assert lengths["tied"][1] > lengths["tied"][0]
    assert lengths["untied, output"][1] > lengths["untied, output"][0]


# --------------------------------------------------------------------------- the browser


# Where the loopback server serves axe-core (support/axe.py) beside the site: a page loads it
# as a script of its own origin (not 560 KB sent over playwright's pipe to every page).
AXE_URL = "__tests__/axe.min.js"


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def translate_path(self, path: str) -> str:
            if urlsplit(path).path == "/" + AXE_URL:
                return str(AXE_SCRIPT)
            return super().translate_path(path)

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


class Browser:
    """One chromium context; records console errors and any request off the loopback server.

    Every request goes through ``_route``, which also keeps chromium's HTTP cache off
    (playwright's routing does): without it, one tour in about six waited for the network to
    go quiet without end, every request it had reported long finished."""

    def __init__(self, context, base: str) -> None:
        self.context, self.base = context, base
        self.errors: list[str] = []
        self.offsite: list[str] = []
        self.shown: dict = {}  # tab -> the path it was sent to last (what its errors name)
        context.route("**/*", self._route)

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(self.base) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self.offsite.append(url)
            route.abort()

    def tab(self):
        """A new tab, its console errors, page errors and failed responses recorded under the
        path it shows (``go``)."""
        page = self.context.new_page()
        shown = self.shown

        def console(message) -> None:
            if message.type == "error":
                self.errors.append(f"{shown.get(page, '')}: {message.text}")

        def response(answer) -> None:
            if answer.status >= 400:
                self.errors.append(f"{shown.get(page, '')}: HTTP {answer.status} {answer.url}")

        page.on("console", console)
        page.on("pageerror", lambda error: self.errors.append(f"{shown.get(page, '')}: {error}"))
        page.on("response", response)
        return page

    def go(self, page, path: str, *, wait: bool = True):
        """Load ``path`` in the tab ``page``; with ``wait=False`` return as soon as the page
        starts loading (``ready`` then waits for it), so several tabs can load at once."""
        self.shown[page] = path
        page.goto(self.base + path, wait_until="load" if wait else "commit")
        return self.ready(page) if wait else page

    def open(self, path: str, *, wait: bool = True):
        """A new tab on ``path`` (as ``go``)."""
        return self.go(self.tab(), path, wait=wait)

    @staticmethod
    def ready(page):
        page.wait_for_load_state("load")
        page.wait_for_selector("article h1")
        return page

    def assert_clean(self) -> None:
        assert not self.offsite, f"requests that left the loopback server: {self.offsite}"
        assert not self.errors, "browser console errors:\n" + "\n".join(self.errors)


@pytest.fixture(scope="module")
def browser(server: str, tmp_path_factory) -> Iterator[Browser]:
    require("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            service_workers="block",
        )
        # A hang guard, not a speed limit: beside the other pytest worker, the tour's four tabs
        # have taken over 20 s to go quiet on a busy 2-core machine (2 runs in 9 that day), and
        # 120 s still tripped at load 8-12: ten times that.
        context.set_default_timeout(1_200_000)
        try:
            yield Browser(context, server)
        finally:
            context.close()


def test_every_chapter_renders_with_working_exercise_links(
    page_tour: dict, site: Path, browser: Browser
) -> None:
    """Each chapter, as the browser showed it on the tour: a title, one visible exercise box,
    a link per function at least, and every link reaching a page of the site (and its
    section, where it names one)."""
    facts = page_tour["facts"]
    for lesson in LESSONS:
        path = page_dir(lesson["page"])
        shown = facts[path]
        assert shown["title"], f"{path}: no title"
        assert len(shown["exercises"]) == 1, f"{path}: exercise box missing"
        box = shown["exercises"][0]
        assert box["visible"], f"{path}: the exercise box is hidden"
        assert len(box["links"]) >= len(lesson["functions"]), box["links"]
        for href in box["links"]:
            target = urlsplit(urljoin(f"http://site/{path}/", href))
            folder = target.path.strip("/").removesuffix("index.html").strip("/") or "."
            if folder in facts:
                assert not target.fragment or target.fragment in facts[folder]["ids"], (
                    f"{path}: {href} names no section of {folder}"
                )
            else:
                assert (site / target.path.lstrip("/")).is_file(), f"{path}: {href} is missing"
    browser.assert_clean()


def test_instant_navigation_and_screenshots(browser: Browser) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.open("")
    page.screenshot(path=str(SCREENSHOTS / "home.png"), full_page=True)
    first = LESSONS[0]
    page.locator(f".learning-path a[href$='{page_dir(first['page'])}/']").first.click()
    page.wait_for_url(f"**/{page_dir(first['page'])}/")
    page.locator("article .admonition.exercise").wait_for(state="visible")
    assert first["title"] in page.locator("article h1").first.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "chapter.png"), full_page=False)
    page.close()
    browser.assert_clean()


# What the phone test looks for on one page at one width (returns the problems it found).
LAYOUT_PROBLEMS = """([path, width]) => {
    const found = [];
    const root = document.documentElement;
    if (root.scrollWidth > width + 1)
        found.push(`${path} @${width}: the page is ${root.scrollWidth} px wide`);
    for (const code of document.querySelectorAll('article pre > code')) {
        const style = getComputedStyle(code);
        if (style.whiteSpace !== 'pre')
            found.push(`${path} @${width}: code wraps (${style.whiteSpace})`);
        if (code.scrollWidth > code.clientWidth + 1 &&
            !['auto', 'scroll'].includes(style.overflowX))
            found.push(`${path} @${width}: a long line is cut off`);
    }
    // The copy button sits over the block's top right corner: no character that shows (inside
    // the code's own scrolling box) may lie under it.
    for (const button of document.querySelectorAll('article pre > .md-clipboard')) {
        const b = button.getBoundingClientRect();
        const code = button.parentElement.querySelector(':scope > code');
        if (!code || !b.width) continue;
        const box = code.getBoundingClientRect();
        const left = Math.max(b.left, box.left), right = Math.min(b.right, box.right);
        const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
        let covered = false;
        while (!covered && walker.nextNode()) {
            if (!walker.currentNode.textContent.trim()) continue;
            const range = document.createRange();
            range.selectNodeContents(walker.currentNode);
            for (const r of range.getClientRects()) {
                if (r.right > left && r.left < right && r.bottom > b.top && r.top < b.bottom)
                    covered = true;
            }
        }
        if (covered) found.push(`${path} @${width}: the copy button covers code`);
    }
    for (const el of document.querySelectorAll('article figure')) {
        if (el.scrollWidth > el.clientWidth + 1)
            found.push(`${path} @${width}: a figure is wider than the column`);
    }
    return found;
}"""


TOUR_TABS = 4  # pages the tour loads at once: each waits for its network to go quiet
TOUR_READER = "12"  # the quiz reader seed during the tour (options are shuffled per reader)

# The options of every quiz of a page, by their values (the source's order), as the page shows
# them.
OPTION_ORDERS = """[...document.querySelectorAll('article .quiz fieldset')].map(
    f => [...f.querySelectorAll(':scope > div > input')].map(i => i.value))"""

# What the tour reads from each page once it has loaded (its scripts have run).
PAGE_FACTS = """() => ({
    title: (document.querySelector('article h1') || {innerText: ''}).innerText.trim(),
    ids: [...document.querySelectorAll('[id]')].map(el => el.id),
    exercises: [...document.querySelectorAll('article .admonition.exercise')].map(box => ({
        visible: box.checkVisibility({visibilityProperty: true, checkVisibilityCSS: true}),
        links: [...box.querySelectorAll('a')].map(a => a.getAttribute('href')),
    })),
    answers: [...document.querySelectorAll('article .quiz fieldset')].map(
        f => [...f.querySelectorAll(':scope > div > input')]
             .findIndex(i => i.hasAttribute('data-correct'))),
    orders: OPTION_ORDERS,
})""".replace("OPTION_ORDERS", OPTION_ORDERS)


def before_scripts(browser: Browser, script: str) -> str:
    """``script`` as an init script of a tab: it runs on each of the tab's loads of a page of the
    site, before the page's own scripts."""
    return f"if (location.href.startsWith({browser.base!r})) {{ {script} }}"


@pytest.fixture(scope="module")
def page_tour(site: Path, browser: Browser) -> dict:
    """Every page, opened once, a few at a time: what its console said (read by
    ``browser.assert_clean``), its layout problems at a desktop's width and then at a phone's
    (390 px), and what it shows (``PAGE_FACTS``, by page folder: "." for the home page), with
    one reader's quiz seed. One visit per page serves the tests that read these (a page's load
    is most of their time). Each page has a tab of its own: a tab sent on to the next page
    could carry a request of the page before (its search worker's, started late on a busy
    machine) into the next one's wait for a quiet network, which then never comes."""
    pages = sorted(path.parent.relative_to(site).as_posix() for path in site.rglob("index.html"))
    axe, no_axe = axe_core_script()
    reader = before_scripts(browser, f"localStorage.setItem('course_quiz_reader', {TOUR_READER!r})")
    problems, facts, violations = [], {}, {}
    for start in range(0, len(pages), TOUR_TABS):
        tabs = []
        for path in pages[start : start + TOUR_TABS]:
            tab = browser.tab()
            tab.add_init_script(reader)
            tabs.append((path, browser.go(tab, "" if path == "." else path + "/", wait=False)))
        for path, page in tabs:
            browser.ready(page).wait_for_load_state("networkidle")
            facts[path] = page.evaluate(PAGE_FACTS)
            if axe is not None:  # at the desktop's width, after the page's scripts have run
                page.add_script_tag(url=browser.base + AXE_URL)
                violations[path] = page.evaluate(AXE_RUN)
            for width in (1280, 390):
                page.set_viewport_size({"width": width, "height": 844})
                problems += page.evaluate(LAYOUT_PROBLEMS, [path, width])
            page.close()
    return {
        "pages": pages,
        "problems": problems,
        "facts": facts,
        "violations": violations if axe is not None else None,
        "no_axe": no_axe,
    }


# axe-core on one page: its serious and critical violations, each with the elements it found.
# axe-core gives a violation the impact of its rule (axe._audit.rules, the rules it runs): a rule
# whose impact is minor or moderate cannot report one of these, so it is not run (a quarter of
# axe's time); a rule without an impact of its own would run.
AXE_RUN = """async () => {
    const quiet = axe._audit.rules.filter((r) => r.impact === "minor" || r.impact === "moderate");
    const rules = Object.fromEntries(quiet.map((r) => [r.id, {enabled: false}]));
    const result = await axe.run(document, {resultTypes: ["violations"], rules});
    return result.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => ({
            rule: v.id,
            impact: v.impact,
            help: v.help,
            targets: v.nodes.map((n) => n.target.join(" ")),
            html: v.nodes.map((n) => n.html.slice(0, 160)),
        }));
}"""

# The violations that Material for MkDocs' own templates make on every page and the course
# could not fix without forking the theme: rule -> (a pattern of the elements they are on, why
# they stay). None is left: the three the theme makes (a search dialog and a progress bar without
# a name, a table scroller the keyboard cannot reach) are named by assets/javascripts/
# theme-names.js, and its footer's contrast is raised in course.css. A new one found here is
# fixed, or listed with its reason.
THEME_RULES: dict[str, tuple[str, str]] = {}


def test_no_serious_accessibility_violations(page_tour: dict) -> None:
    """axe-core on every built page finds no serious or critical violation, except the
    theme's own (THEME_RULES, each on the theme's elements only, with the reason it stays)."""
    violations = page_tour["violations"]
    if violations is None:
        if under_ci():
            pytest.fail(page_tour["no_axe"], pytrace=False)
        pytest.skip(page_tour["no_axe"])
    assert len(violations) == len(page_tour["pages"])
    found = []
    for path, page_violations in sorted(violations.items()):
        for violation in page_violations:
            theme = THEME_RULES.get(violation["rule"])
            targets = [
                target
                for target in violation["targets"]
                if theme is None or not re.search(theme[0], target)
            ]
            if targets:
                found.append(
                    f"{path}: {violation['impact']} {violation['rule']} ({violation['help']}) "
                    f"on {len(targets)} elements, first {targets[0]}: "
                    f"{violation['html'][violation['targets'].index(targets[0])]}"
                )
    assert not found, "\n".join(found)


def test_no_console_errors_on_any_page(page_tour: dict, browser: Browser) -> None:
    assert len(page_tour["pages"]) >= len(LESSONS) + 3
    browser.assert_clean()


def test_glossary_tooltip_shows_on_hover(browser: Browser) -> None:
    page = browser.open(page_dir(LESSONS[0]["page"]) + "/")
    term = page.locator("article > p abbr").first
    term.scroll_into_view_if_needed()
    definitions = {entry["definition"] for entry in GLOSSARY}
    term.hover()
    tooltip = page.locator(".md-tooltip2--active, .md-tooltip--active").first
    tooltip.wait_for(state="visible")
    shown = " ".join(tooltip.inner_text().split())
    assert shown in definitions, f"tooltip shows {shown!r}"
    page.close()
    browser.assert_clean()


def test_quiz_answer_reveals_its_explanation(browser: Browser) -> None:
    for lesson in LESSONS:
        page = browser.open(page_dir(lesson["page"]) + "/")
        quiz = page.locator(f"{QUIZ}:visible").first
        if quiz.count() == 0:
            page.close()
            continue
        quiz.scroll_into_view_if_needed()
        answers = quiz.locator("fieldset > div")
        wrong = answers.filter(has=page.locator("input:not([data-correct])"))
        chosen = (wrong if wrong.count() else answers).first
        own = chosen.locator(".answer-feedback")
        expected = " ".join((own.text_content() or "").split()) if own.count() else ""
        chosen.locator("label").click()
        feedback = quiz.locator(".quiz-feedback")
        feedback.wait_for(state="visible")
        if expected:  # the chosen answer's own explanation is shown
            assert expected in " ".join(feedback.inner_text().split()), lesson["page"]
        else:  # no per-answer explanation: the quiz's explanation section opens
            section = quiz.locator("section.content")
            section.wait_for(state="visible")
            assert section.inner_text().strip(), f"{lesson['page']}: empty quiz explanation"
        page.close()
        break
    else:
        pytest.fail("no chapter has a single-answer quiz")
    browser.assert_clean()


def test_the_drawn_block_renders_at_a_readable_size(browser: Browser) -> None:
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "block")
    page = browser.open(page_dir(lesson["page"]) + "/")
    drawing = page.locator("article figure.course-diagram img").first
    drawing.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const i = document.querySelector('figure.course-diagram img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    # Drawn at 680 px wide with 13 px lettering: at least 90% of that on a desktop column.
    assert drawing.bounding_box()["width"] >= 0.9 * 680
    page.close()
    browser.assert_clean()


def test_search_finds_a_glossary_term(browser: Browser) -> None:
    page = browser.open("")
    page.locator("label.md-search__icon, .md-search__input").first.click()
    box = page.locator("input.md-search__input")
    box.press_sequentially("perplexity", delay=30)  # real key presses: search listens to keyup
    result = page.locator(".md-search-result__item a[href*='glossary']").first
    result.wait_for(state="attached")
    assert page.locator(".md-search-result__item").count() >= 1
    page.close()
    browser.assert_clean()


def test_formula_renders_as_maths(browser: Browser) -> None:
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "objective")
    page = browser.open(page_dir(lesson["page"]) + "/")
    formula = page.locator("article .math-display math").first
    formula.scroll_into_view_if_needed()
    box = formula.bounding_box()
    assert box and box["width"] > 0 and box["height"] > 0
    # Typeset, not shown as text: a fraction stacks its numerator over its denominator.
    fraction = formula.locator("mfrac").first
    numerator = fraction.locator(":scope > *").first
    assert fraction.bounding_box()["height"] > 1.5 * numerator.bounding_box()["height"]
    assert formula.evaluate("m => m.namespaceURI") == "http://www.w3.org/1998/Math/MathML"
    page.close()
    browser.assert_clean()


QUIZ = "article .quiz:not([data-quiz-type]):has(input[type=radio])"


def fresh_chapter(browser: Browser, module: str, seed: str | None = None):
    """A chapter opened with no quiz answers kept (and, if given, the reader's shuffle seed):
    the new tab's first load empties the site's localStorage before the page's scripts run, and
    its reloads keep what the reader did since."""
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == module)
    page = browser.tab()
    reader = "" if seed is None else f"localStorage.setItem('course_quiz_reader', {seed!r});"
    first_load = "!sessionStorage.getItem('course_tests_fresh')"
    once = f"sessionStorage.setItem('course_tests_fresh', '1'); localStorage.clear(); {reader}"
    page.add_init_script(before_scripts(browser, f"if ({first_load}) {{ {once} }}"))
    browser.go(page, page_dir(lesson["page"]) + "/")
    page.locator(".quiz-deck").first.wait_for(state="attached")
    return page


def visible_quiz(page):
    quiz = page.locator(f"{QUIZ}:visible")
    assert quiz.count() == 1, f"{quiz.count()} questions show at once"
    return quiz.first


def pick(quiz, answer) -> None:
    answer.locator("label").click()
    quiz.locator(".quiz-feedback").wait_for(state="visible")


def test_quizzes_ask_one_question_at_a_time(browser: Browser) -> None:
    page = fresh_chapter(browser, "objective")
    deck = page.locator(".quiz-deck").first
    total = deck.locator(".quiz").count()
    assert total >= 3
    deck.scroll_into_view_if_needed()
    where = deck.locator(".quiz-deck__where")
    previous, following = deck.locator(".quiz-deck__previous"), deck.locator(".quiz-deck__next")
    assert where.inner_text() == f"Question 1 of {total}"
    assert previous.is_disabled()
    first = visible_quiz(page).get_attribute("id")
    following.click()
    assert where.inner_text() == f"Question 2 of {total}"
    second = visible_quiz(page).get_attribute("id")
    assert second != first
    previous.click()
    assert visible_quiz(page).get_attribute("id") == first
    for _ in range(total - 1):
        following.click()
    assert where.inner_text() == f"Question {total} of {total}" and following.is_disabled()
    # Answered questions stay answered; the deck opens on the first one not answered yet.
    previous.click()
    quiz = visible_quiz(page)
    pick(quiz, quiz.locator("fieldset > div").filter(has=page.locator("input[data-correct]")))
    page.reload()
    page.locator(".quiz-deck").first.wait_for(state="attached")
    assert visible_quiz(page).get_attribute("id") == first
    # A link to a question (from another page: a fresh load) shows it.
    linked = browser.open(page.url.split("#")[0].removeprefix(browser.base) + f"#{second}")
    linked.locator(".quiz-deck").first.wait_for(state="attached")
    linked.wait_for_function(f"document.getElementById('{second}').offsetParent !== null")
    assert visible_quiz(linked).get_attribute("id") == second
    linked.close()
    page.close()
    browser.assert_clean()


def option_orders(page) -> list[list[str]]:
    return page.evaluate(f"() => {OPTION_ORDERS}")


def test_quiz_options_are_shuffled_the_same_way_for_one_reader(
    browser: Browser, page_tour: dict
) -> None:
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "objective")
    page = fresh_chapter(browser, "objective", seed="11")
    orders = option_orders(page)
    assert len(orders) >= 3
    source = [sorted(order, key=int) for order in orders]
    assert orders != source, "options are shown in the order of the source"
    page.reload()
    page.locator(".quiz-deck").first.wait_for(state="attached")
    assert option_orders(page) == orders, "one reader's order changed between visits"
    page.close()
    # Another reader: the tour's, who kept no answers either.
    assert TOUR_READER != "11"
    other = page_tour["facts"][page_dir(lesson["page"])]["orders"]
    assert other != orders, "two readers got the same order on every question"
    browser.assert_clean()


def test_the_right_answer_moves_across_the_course(page_tour: dict) -> None:
    """For one reader (the tour's), the right option is not kept in one place."""
    places = [
        place
        for lesson in LESSONS
        for place in page_tour["facts"][page_dir(lesson["page"])]["answers"]
    ]
    assert len(places) >= len(LESSONS), places
    assert max(places.count(place) for place in set(places)) < 0.5 * len(places), places


def test_quiz_answer_can_be_retried(browser: Browser) -> None:
    page = fresh_chapter(browser, "objective")
    following = page.locator(".quiz-deck__next").first

    # Wrong, then right, on the same question.
    quiz = visible_quiz(page)
    quiz.scroll_into_view_if_needed()
    answers = quiz.locator("fieldset > div")
    right = answers.filter(has=page.locator("input[data-correct]")).first
    wrong = answers.filter(has=page.locator("input:not([data-correct])"))
    pick(quiz, wrong.first)
    feedback = quiz.locator(".quiz-feedback")
    explanation = " ".join(wrong.first.locator(".answer-feedback").text_content().split())
    assert explanation in " ".join(feedback.inner_text().split()), "no explanation of the pick"
    assert "correct" not in (right.get_attribute("class") or ""), "answer shown too early"
    quiz.locator(".quiz-retry .quiz-show-answer").wait_for(state="visible")
    assert right.locator("input").is_enabled(), "the question must stay open"
    # One way to retry: picking again (the retry line says so), not also quiz.js's button.
    assert "Pick another answer" in quiz.locator(".quiz-retry").inner_text()
    assert not quiz.locator(".quiz-reset-button").is_visible(), "'Try Again' competes"
    # The "#" link to the question stays clear of the question's text.
    assert page.evaluate(
        """(quiz) => {
            const link = quiz.querySelector('.quiz-header-link').getBoundingClientRect();
            const question = quiz.querySelector('.quiz-question');
            const box = question.getBoundingClientRect();
            const padding = parseFloat(getComputedStyle(question).paddingRight);
            return box.right - padding <= link.left;
        }""",
        quiz.element_handle(),
    ), "the '#' link overlaps the question"
    pick(quiz, right)
    quiz.locator(".quiz-feedback .quiz-feedback-item.correct").wait_for(state="visible")
    assert "correct" in (right.get_attribute("class") or "")
    assert quiz.locator(".quiz-retry").count() == 0

    # Two wrong picks reveal the answer; so does asking for it after one.
    following.click()
    quiz = visible_quiz(page)
    answers = quiz.locator("fieldset > div")
    right = answers.filter(has=page.locator("input[data-correct]")).first
    wrong = answers.filter(has=page.locator("input:not([data-correct])"))
    pick(quiz, wrong.nth(0))
    quiz.locator(".quiz-retry").wait_for(state="visible")
    assert quiz.locator(".quiz-revealed").count() == 0
    pick(quiz, wrong.nth(1))
    quiz.locator(".quiz-revealed").wait_for(state="visible")
    assert "correct" in (right.get_attribute("class") or "")
    following.click()
    quiz = visible_quiz(page)
    wrong = quiz.locator("fieldset > div").filter(has=page.locator("input:not([data-correct])"))
    pick(quiz, wrong.first)
    quiz.locator(".quiz-show-answer").click()
    quiz.locator(".quiz-revealed").wait_for(state="visible")
    page.close()
    browser.assert_clean()


def test_a_revealed_answer_counts_as_revealed_not_correct(browser: Browser) -> None:
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "objective")
    page = fresh_chapter(browser, "objective")
    quiz = visible_quiz(page)
    quiz_id = quiz.get_attribute("id")
    quiz.scroll_into_view_if_needed()
    answers = quiz.locator("fieldset > div")
    wrong = answers.filter(has=page.locator("input:not([data-correct])"))
    pick(quiz, wrong.nth(0))
    pick(quiz, wrong.nth(1))
    quiz.locator(".quiz-revealed").wait_for(state="visible")

    def counts() -> tuple[str, str]:
        panel = page.locator('[data-md-component="quiz-progress"]').first
        score = panel.locator(".quiz-progress-score").text_content().strip()
        return score, panel.locator(".quiz-progress-revealed").text_content().strip()

    assert all(not box.is_enabled() for box in quiz.locator("input").all()), "still open"
    assert counts() == ("0", "1")
    page.reload()
    page.locator(".quiz-deck").first.wait_for(state="attached")
    page.locator(".quiz-deck__where").first.wait_for(state="visible")
    restored = page.locator(f"[id='{quiz_id}']")
    assert restored.locator(".quiz-revealed").count() == 1, "the revealed answer was forgotten"
    assert all(not box.is_enabled() for box in restored.locator("input").all())
    assert counts() == ("0", "1")
    page.close()

    progress = browser.open("progress/")
    row = progress.locator(f"tr[data-lesson='{lesson['slug']}'] .course-progress__quiz")
    row.wait_for(state="attached")
    assert re.fullmatch(r"0 of \d+ right the first time, 1 revealed", row.inner_text().strip())
    # The primer's and the "More" pages' quizzes are counted too, in the same column.
    others = [
        page
        for page in ["primer.md", *(p for p in reading_pages() if p.startswith("more/"))]
        if "<quiz>" in (COURSE / page).read_text(encoding="utf-8")
    ]
    assert "primer.md" in others
    for other in others:
        cell = progress.locator(f"tr[data-page='{other}'] .course-progress__quiz")
        assert re.fullmatch(r"\d+ to try", cell.inner_text().strip()), other
    progress.close()
    browser.assert_clean()


def test_right_after_a_wrong_pick_is_not_right_the_first_time(browser: Browser) -> None:
    """Two guesses among four options find the answer half the time: the sidebar and the
    progress page count a right second pick apart from a right first one, across a reload."""
    lesson = next(lesson for lesson in LESSONS if lesson["module"] == "objective")
    page = fresh_chapter(browser, "objective")

    def right_and_wrong(quiz):
        answers = quiz.locator("fieldset > div")
        return (
            answers.filter(has=page.locator("input[data-correct]")).first,
            answers.filter(has=page.locator("input:not([data-correct])")).first,
        )

    def counts() -> tuple[str, str, str]:
        panel = page.locator('[data-md-component="quiz-progress"]').first
        return tuple(
            panel.locator(f".quiz-progress-{kind}").text_content().strip()
            for kind in ("first", "later", "score")
        )

    quiz = visible_quiz(page)
    quiz.scroll_into_view_if_needed()
    right, wrong = right_and_wrong(quiz)
    pick(quiz, right)
    quiz.locator(".quiz-feedback .quiz-feedback-item.correct").wait_for(state="visible")
    assert counts() == ("1", "0", "1")
    page.locator(".quiz-deck__next").first.click()
    quiz = visible_quiz(page)
    right, wrong = right_and_wrong(quiz)
    pick(quiz, wrong)
    quiz.locator(".quiz-retry").wait_for(state="visible")
    pick(quiz, right)
    quiz.locator(".quiz-feedback .quiz-feedback-item.correct").wait_for(state="visible")
    # quiz.js's own "Correct" counts both, so it is hidden: the course's lines tell them apart,
    # and the box under the deck says the same as the sidebar.
    assert counts() == ("1", "1", "2")
    total = page.locator("article .quiz").count()
    line = f"1 of {total} right the first time, 1 right after a wrong pick"

    def shown() -> None:
        panel = page.locator("#quiz-progress-sidebar")
        assert not panel.locator(".quiz-progress-score").is_visible(), "quiz.js's Correct shows"
        assert panel.locator(".quiz-progress-first").is_visible()
        results = page.locator("#quiz-results")
        assert results.locator(".quiz-results-course").inner_text().strip() == line
        assert not results.locator(".quiz-results-correct").is_visible()

    shown()
    page.reload()
    page.locator(".quiz-deck__where").first.wait_for(state="visible")
    assert counts() == ("1", "1", "2"), "a reload forgot which answer came second"
    shown()
    page.close()

    progress = browser.open("progress/")
    row = progress.locator(f"tr[data-lesson='{lesson['slug']}'] .course-progress__quiz")
    row.wait_for(state="attached")
    text = row.inner_text().strip()
    assert re.fullmatch(r"1 of \d+ right the first time, 1 right after a wrong pick", text), text
    progress.close()
    browser.assert_clean()


def test_code_keeps_its_lines_and_no_page_is_wider_than_a_phone(page_tour: dict):
    """At a desktop's width and a phone's (390 px), every line of code and output is shown as
    written (never wrapped, so indentation keeps its meaning), a line too long for the column
    scrolls inside its own block, and nothing makes the page wider than the screen."""
    assert not page_tour["problems"], "\n".join(page_tour["problems"])
