"""MkDocs hook: the course's own machinery, driven by two data files.

``course/lessons.toml`` (the lesson manifest, read through its one loader,
``core.manifest``) gives, for every chapter page:

- a header line under the H1: "Part N of 8 · about X min read · level";
- the exercise box that replaces the chapter's ``<!-- exercise-box -->`` line: the stub
  module, each function linked to the section that explains it, the ``nox -s grade --``
  command and the points (the sum of the lesson's ``[[lesson.check]]`` points);
- in the instructor build (``COURSE_INSTRUCTOR=1``), a generated page per lesson showing
  ``solutions/<module>.py``, linked from the box and listed in the navigation (written to
  ``build/site-instructor`` instead of ``build/site`` unless ``-d`` says otherwise);
- the learning path on the home page (``<!-- learning-path -->`` in ``course/index.md``).

``site/glossary.toml`` (the glossary) gives:

- the glossary page (``<!-- glossary -->`` in ``course/glossary.md``);
- hover tooltips: the entries fill the ``abbr`` extension's glossary, so every plain
  occurrence of a term in any page becomes ``<abbr title="definition">``, which Material shows
  as a tooltip (``content.tooltips``). Code, raw HTML and exec'd output are never touched (they
  are atomic or stashed); headings are unwrapped again, and only the first occurrence of a
  term per section keeps its tooltip;
- back-links under every glossary entry: the pages (and sections) where the term occurs.

Maths: formulas are LaTeX in the pages (``$...$`` inline, ``$$...$$`` on their own lines, found
by ``pymdownx.arithmatex`` in generic mode); this hook turns each into MathML at build time
(``latex2mathml``), which browsers render natively: no script and no CDN, at build or read time.
A formula it cannot typeset is a warning (so ``--strict`` fails), naming the page.

Figures: every matplotlib figure in a chapter must sit in a ``<figure>`` with a non-empty
``<figcaption>`` (``gpt.figures.figure_html`` makes both); one without is a warning.

Problems that would let the site drift from the manifest (a chapter without its marker, a
section id that no heading carries, nav out of order, a missing chapter file) are logged as
warnings, so ``mkdocs build --strict`` fails on them while ``mkdocs serve`` keeps working.
"""

from __future__ import annotations

import html
import logging
import math
import os
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latex2mathml.converter import convert as latex_to_mathml
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.utils import get_relative_url

if TYPE_CHECKING:
    from core.manifest import Lesson

log = logging.getLogger("mkdocs.hooks.course")

WORDS_PER_MINUTE = 200
EXERCISE_MARKER = re.compile(r"^[ \t]*<!--\s*exercise-box\s*-->[ \t]*$", re.MULTILINE)
PATH_MARKER = re.compile(r"^[ \t]*<!--\s*learning-path\s*-->[ \t]*$", re.MULTILINE)
GLOSSARY_MARKER = re.compile(r"^[ \t]*<!--\s*glossary\s*-->[ \t]*$", re.MULTILINE)
REFS_PLACEHOLDER = re.compile(r"<!--glossary-refs:([a-z0-9-]+)-->")
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
REFERENCE_DIR = "reference"  # instructor build: reference/<module>.md


def instructor_build() -> bool:
    return os.environ.get("COURSE_INSTRUCTOR", "").strip().lower() in {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------- data files


@dataclass
class Entry:
    term: str
    definition: str
    match: list[str]

    @property
    def id(self) -> str:
        return slugify(self.term)


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def load_lessons(path: Path) -> list[Lesson]:
    """The manifest's lessons in number order, through core.manifest (the one loader).

    The repository root must be on sys.path (on_config puts it there first)."""
    from core.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(path)
    except ManifestError as error:
        raise PluginError(f"course hook: {error}") from None
    return sorted(manifest.lessons, key=lambda lesson: lesson.number)


def load_glossary(path: Path) -> list[Entry]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PluginError(f"course hook: cannot read the glossary {path}: {error}") from None
    entries = []
    for raw in data.get("entry", []):
        term, definition = raw["term"], " ".join(raw["definition"].split())
        entries.append(Entry(term, definition, list(raw.get("match", [term]))))
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
                        f"course hook: glossary phrase {variant!r} belongs to both "
                        f"{ids[variant]!r} and {entry.id!r}"
                    )
                titles[variant] = entry.definition
                ids[variant] = entry.id
    return titles, ids


# --------------------------------------------------------------------------- state


class State:
    def __init__(self) -> None:
        self.root = Path(".")
        self.docs_dir = Path("course")
        self.lessons: list[Lesson] = []
        self.by_page: dict[str, Lesson] = {}
        self.entries: list[Entry] = []
        self.phrase_to_id: dict[str, str] = {}
        self.instructor = False
        # entry id -> {page src_uri: (title, anchor of the first occurrence)}
        self.uses: dict[str, dict[str, tuple[str, str]]] = {}
        self.pages: dict[str, Any] = {}  # src_uri -> Page


STATE = State()


# --------------------------------------------------------------------------- helpers


def _fenced(lines: Iterable[str]) -> Iterator[bool]:
    """For each line, whether it belongs to a fenced code block (its fences included). A fence
    closes on a line of the same character, at least as long, with no info string."""
    fence: str | None = None
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            yield True
        elif fence is not None:
            bare = line.strip()
            if bare.startswith(fence) and set(bare) <= {fence[0]}:
                fence = None
            yield True
        else:
            yield False


def _strip_fences(markdown: str) -> str:
    """The Markdown without fenced code blocks (for counting words)."""
    lines = markdown.splitlines()
    return "\n".join(line for line, fenced in zip(lines, _fenced(lines), strict=True) if not fenced)


# An HTML tag: a name right after "<" or "</", then attributes, up to the next ">". A bare
# "<" in prose or code ("j <= i", "x < y and z > 0") is no tag, so no words are dropped.
HTML_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")


def count_words(markdown: str) -> int:
    """The words a reader reads: prose, lists, tables and quizzes, without fenced code."""
    prose = _strip_fences(markdown)
    prose = re.sub(r"<!--.*?-->", " ", prose, flags=re.DOTALL)
    prose = HTML_TAG.sub(" ", prose)
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", prose))


def reading_minutes(markdown: str) -> int:
    return max(1, math.ceil(count_words(markdown) / WORDS_PER_MINUTE))


def _read_source(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if text.startswith("---"):  # YAML front matter
        end = text.find("\n---", 3)
        if end != -1:
            text = text[end + 4 :]
    return text


def _heading_titles(markdown: str) -> dict[str, str]:
    """Explicit heading ids (``## Title {#id}``) of a chapter -> their titles."""
    titles = {}
    heading = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*\{([^}]*)\}[ \t]*$", re.M)
    for m in heading.finditer(_strip_fences(markdown)):
        for attr in m.group(2).split():
            if attr.startswith("#"):
                titles[attr[1:]] = m.group(1).strip().rstrip("#").strip()
    return titles


def _fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=0)
    return "`" * max(3, longest + 1)


def _solution_hl_lines(source: str) -> str:
    """Line ranges between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` markers."""
    ranges, start = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        if "BEGIN SOLUTION" in line:
            start = number + 1
        elif "END SOLUTION" in line and start is not None:
            if number - 1 >= start:
                ranges.append(f"{start}-{number - 1}")
            start = None
    return " ".join(ranges)


def _format_points(points: int | float) -> str:
    points = int(points) if float(points).is_integer() else points
    return f"{points} point" + ("" if points == 1 else "s")


# --------------------------------------------------------------------------- generated Markdown


def chapter_meta(lesson: Lesson, minutes: int) -> str:
    level = html.escape(lesson.level)
    return (
        f'<p class="chapter-meta"><span class="chapter-meta__part">Part {lesson.number} of '
        f"{len(STATE.lessons)}</span> · <span>about {minutes} min read</span> · "
        f'<span class="chapter-meta__level chapter-meta__level--{slugify(lesson.level)}">'
        f"{level}</span></p>"
    )


def exercise_box(lesson: Lesson, markdown: str) -> str:
    titles = _heading_titles(markdown)
    lines = [
        f'!!! exercise "Exercise {lesson.number}: fill in `exercises/{lesson.module}.py`"',
        "",
        f"    Open `exercises/{lesson.module}.py`: each function below is a stub that raises "
        "`NotImplementedError`. Replace each stub with your own code; the section linked "
        "next to it explains what it must do.",
        "",
    ]
    for function in lesson.functions:
        section = lesson.sections[function]  # the manifest requires one per function
        where = f" — {titles[section]}" if section in titles else ""
        points = lesson.function_points(function)  # 0 while the function has no checks
        worth = f" ({_format_points(points)})" if points else ""
        lines.append(f"    - [`{function}`](#{section}){where}{worth}")
    lines += [
        "",
        "    Check your work (the report gives a hint and a link for every failed check):",
        "",
        "    ```bash",
        f"    nox -s grade -- {lesson.slug}",
        "    ```",
        "",
    ]
    if not lesson.checks:
        lines.append("    **Points:** to be announced.")
    else:
        hidden = sum(1 for check in lesson.checks if check.hidden)
        detail = f"{len(lesson.checks)} checks"
        if hidden:
            detail += f", {hidden} of them hidden until grading"
        lines.append(
            f"    **Points:** {_format_points(lesson.max_points(hidden=True))} ({detail})."
        )
    if STATE.instructor:
        target = get_relative_url(f"{REFERENCE_DIR}/{lesson.module}.md", lesson.page)
        lines += [
            "",
            f'    <span class="exercise-instructor">Instructor build:</span> '
            f"[reference solution, `solutions/{lesson.module}.py`]({target})",
        ]
    return "\n".join(lines) + "\n"


def learning_path() -> str:
    cards = ['<div class="grid cards learning-path" markdown>', ""]
    for lesson in STATE.lessons:
        source = _read_source(STATE.docs_dir / lesson.page)
        minutes = f" · about {reading_minutes(source)} min" if source else ""
        functions = ", ".join(f"`{name}`" for name in lesson.functions)
        points = (
            _format_points(lesson.max_points(hidden=True))
            if lesson.checks
            else "points to be announced"
        )
        cards += [
            f"-   __Part {lesson.number}__ · {lesson.level}{minutes}",
            "",
            "    ---",
            "",
            f"    [{lesson.title}]({lesson.page})",
            "",
            f"    You write {functions} in `exercises/{lesson.module}.py`.",
            "",
            f"    `nox -s grade -- {lesson.slug}` · {points}",
            "",
        ]
    cards.append("</div>")
    return "\n".join(cards) + "\n"


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


def reference_page(lesson: Lesson, source: str) -> str:
    chapter = get_relative_url(lesson.page, f"{REFERENCE_DIR}/{lesson.module}.md")
    fence = _fence_for(source)
    hl = _solution_hl_lines(source)
    hl_attr = f' hl_lines="{hl}"' if hl else ""
    return (
        f"# Reference solution: `solutions/{lesson.module}.py`\n\n"
        f'!!! warning "Instructor build only"\n\n'
        f"    This page exists only when the site is built with `COURSE_INSTRUCTOR=1`. "
        f"It shows the reference solution of lesson {lesson.number}, "
        f"[{lesson.title}]({chapter}); the highlighted lines are the bodies that "
        f"`exercises/{lesson.module}.py` replaces with stubs.\n\n"
        f'{fence}python title="solutions/{lesson.module}.py" linenums="1"{hl_attr}\n'
        f"{source.rstrip()}\n{fence}\n"
    )


# --------------------------------------------------------------------------- MkDocs events


def _nav_paths(nav: Any) -> list[str]:
    paths: list[str] = []
    if isinstance(nav, str):
        paths.append(nav)
    elif isinstance(nav, list):
        for item in nav:
            paths += _nav_paths(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            paths += _nav_paths(value)
    return paths


def on_config(config, **kwargs):
    global STATE
    STATE = State()
    STATE.root = Path(config.config_file_path).resolve().parent
    STATE.docs_dir = Path(config.docs_dir)
    # The repository root on sys.path: the manifest's loader (core.manifest) and the
    # chapters' exec'd examples (solutions) import from it, even when mkdocs runs as a console
    # script (whose sys.path[0] is the venv's bin/). Before the lessons are loaded.
    if str(STATE.root) not in sys.path:
        sys.path.insert(0, str(STATE.root))
    STATE.lessons = load_lessons(STATE.docs_dir / "lessons.toml")
    STATE.by_page = {lesson.page: lesson for lesson in STATE.lessons}
    STATE.entries = load_glossary(STATE.root / "site" / "glossary.toml")
    STATE.instructor = instructor_build()
    config.extra["instructor"] = STATE.instructor
    # The instructor build carries the solutions: keep it out of the student site's folder.
    student_site = (STATE.root / "build" / "site").resolve()
    if STATE.instructor and Path(config.site_dir).resolve() == student_site:
        config.site_dir = str(student_site.parent / "site-instructor")
        log.info(f"course hook: instructor build, written to {config.site_dir}")

    # Tooltips: the abbr extension's glossary, from the same entries as the glossary page.
    titles, STATE.phrase_to_id = abbreviations(STATE.entries)
    if "abbr" not in config.markdown_extensions:
        raise PluginError("course hook: the 'abbr' Markdown extension must be enabled")
    config.mdx_configs.setdefault("abbr", {})["glossary"] = titles

    # Snippets: resolve base paths against the repository root, not the working directory.
    snippets = config.mdx_configs.get("pymdownx.snippets")
    if isinstance(snippets, dict):
        snippets["base_path"] = [
            str((STATE.root / base).resolve()) for base in snippets.get("base_path", ["."])
        ]

    # The nav must list the chapters in the manifest's order.
    if config.nav is not None:
        chapters = [path for path in _nav_paths(config.nav) if path in STATE.by_page]
        expected = [lesson.page for lesson in STATE.lessons]
        if chapters != expected:
            log.warning(
                "course hook: mkdocs.yml's nav lists the chapters as "
                f"{chapters}, but course/lessons.toml orders them {expected}"
            )
        if STATE.instructor:
            pages = [
                {f"{lesson.number}. {lesson.module}.py": f"{REFERENCE_DIR}/{lesson.module}.md"}
                for lesson in STATE.lessons
            ]
            config.nav.append({"Reference solutions": pages})
    return config


def on_files(files: Files, config, **kwargs):
    for lesson in STATE.lessons:
        if files.get_file_from_path(lesson.page) is None:
            log.warning(
                f"course hook: chapter {lesson.page} (lesson {lesson.number}) does not exist; "
                "a placeholder page stands in for it"
            )
            sections = "\n\n".join(
                f"## {function} {{#{section}}}\n\nNot written yet."
                for function, section in lesson.sections.items()
            )
            content = (
                f"# {lesson.title}\n\nThis chapter is not written yet.\n\n"
                f"<!-- exercise-box -->\n\n{sections}\n"
            )
            files.append(File.generated(config, lesson.page, content=content))
        if STATE.instructor:
            path = STATE.root / "solutions" / f"{lesson.module}.py"
            source = _read_source(path)
            if source is None:
                log.warning(f"course hook: {path} does not exist; no reference page for it")
                source = f"# {path} does not exist yet\n"
            files.append(
                File.generated(
                    config,
                    f"{REFERENCE_DIR}/{lesson.module}.md",
                    content=reference_page(lesson, source),
                )
            )
    return files


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
    for i, (line, fenced) in enumerate(zip(lines, _fenced(lines), strict=True)):
        if fenced:
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
        code = indented and not container
        result[i] = not (
            _HEADING.match(bare)
            or bare.endswith(("  ", "\\"))
            or not after.strip()
            or _BLOCK_START.match(after)
            or FENCE.match(after)
            or code
        )
    return result


def _insert_after_h1(markdown: str, text: str) -> str:
    lines, fence = markdown.splitlines(keepends=True), None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if m:
            fence = None if fence else m.group(1)
            continue
        if fence is None and re.match(r"^#[ \t]+\S", line):
            return "".join(lines[: i + 1]) + "\n" + text + "\n\n" + "".join(lines[i + 1 :])
    return text + "\n\n" + markdown


def on_page_markdown(markdown: str, page, config, files, **kwargs):
    src = page.file.src_uri
    STATE.pages[src] = page
    lesson = STATE.by_page.get(src)
    if lesson is not None:
        # From the file as written (other plugins have already rewritten `markdown`, e.g. the
        # quizzes into HTML), so the chapter and the home page give the same reading time.
        minutes = reading_minutes(_read_source(STATE.docs_dir / src) or markdown)
        box = exercise_box(lesson, markdown)
        if EXERCISE_MARKER.search(markdown):
            markdown = EXERCISE_MARKER.sub(lambda _: box, markdown, count=1)
        else:
            log.warning(
                f"course hook: {src} has no '<!-- exercise-box -->' line; "
                "the exercise box was put under the title"
            )
            markdown = _insert_after_h1(markdown, box)
        markdown = _insert_after_h1(markdown, chapter_meta(lesson, minutes))
    if src == "index.md":
        if PATH_MARKER.search(markdown):
            markdown = PATH_MARKER.sub(lambda _: learning_path(), markdown, count=1)
        else:
            log.warning("course hook: index.md has no '<!-- learning-path -->' line")
    if src == "glossary.md":
        if GLOSSARY_MARKER.search(markdown):
            markdown = GLOSSARY_MARKER.sub(lambda _: glossary_markdown(), markdown, count=1)
        else:
            log.warning("course hook: glossary.md has no '<!-- glossary -->' line")
    return join_wrapped_phrases(markdown, STATE.phrase_to_id)


_TOOLTIP_SCAN = re.compile(
    r"(?P<heading><h(?P<level>[1-6])(?P<attrs>[^>]*)>(?P<body>.*?)</h(?P=level)>)"
    r"|(?P<link><a\b[^>]*>(?P<label>.*?)</a>)"
    r"|(?P<abbr><abbr title=\"[^\"]*\">(?P<text>[^<]*)</abbr>)",
    re.DOTALL,
)
_ABBR = re.compile(r"<abbr title=\"[^\"]*\">([^<]*)</abbr>")
_ID = re.compile(r"\bid=\"([^\"]+)\"")


def _tidy_tooltips(content: str, page) -> str:
    """Unwrap tooltips in headings, links and repeats within a section; record term uses."""
    record = page.file.src_uri != "glossary.md" and not page.file.src_uri.startswith(
        f"{REFERENCE_DIR}/"
    )
    title = page.title or page.file.src_uri
    anchor = ""
    seen: set[str] = set()

    def use(term_id: str) -> None:
        if record:
            STATE.uses.setdefault(term_id, {}).setdefault(page.file.src_uri, (title, anchor))

    def replace(m: re.Match) -> str:
        nonlocal anchor, seen
        if m.group("heading"):
            level = int(m.group("level"))
            id_match = _ID.search(m.group("attrs"))
            if id_match:
                anchor = id_match.group(1)
            if level <= 2:
                seen = set()
            for text in _ABBR.findall(m.group("body")):
                if text in STATE.phrase_to_id:
                    use(STATE.phrase_to_id[text])
            return _ABBR.sub(r"\1", m.group(0))
        if m.group("link"):  # a link's text is no place for a dotted underline
            for text in _ABBR.findall(m.group("label")):
                if text in STATE.phrase_to_id:
                    use(STATE.phrase_to_id[text])
            return _ABBR.sub(r"\1", m.group(0))
        text = m.group("text")
        term_id = STATE.phrase_to_id.get(text)
        if term_id is None:  # an abbreviation the page defined itself: leave it
            return m.group(0)
        use(term_id)
        if term_id in seen:
            return text
        seen.add(term_id)
        return m.group(0)

    return _TOOLTIP_SCAN.sub(replace, content)


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
                f"course hook: {where}: cannot typeset the formula ${tex}$ "
                f"({type(error).__name__}: {error}); fix its LaTeX"
            )
            return m.group(0)
        # latex2mathml prints what it does not understand as text: an unknown command, an
        # escape inside \text{}, an alignment "&" outside an array.
        unknown = re.findall(r">([^<]*(?:\\|&(?![#\w]+;))[^<]*)<", mathml)
        if unknown:
            log.warning(
                f"course hook: {where}: the formula ${tex}$ would show {', '.join(unknown)} "
                "as text; write it with commands latex2mathml supports"
            )
        mathml = mathml.replace("<math ", f'<math alttext="{html.escape(tex)}" ', 1)
        if tag == "div":  # a wide formula scrolls inside its own box, never the page
            return f'<div class="math-display">{mathml}</div>'
        return mathml

    return _ARITHMATEX.sub(replace, content)


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
                f"course hook: {where} has a figure without a caption; print it with "
                "print(gpt.figures.figure_html(fig, caption)), the caption saying what to "
                "look at"
            )


def on_page_content(content: str, page, config, files, **kwargs):
    content = typeset_math(content, page.file.src_uri)
    lesson = STATE.by_page.get(page.file.src_uri)
    if lesson is not None:
        check_figure_captions(content, page.file.src_uri)
    if lesson is not None:
        ids = set(_ID.findall(content))
        wanted = {f"sections.{f}": s for f, s in lesson.sections.items()}
        for check in lesson.checks:  # a check's own section (else its function's, above)
            if check.section != lesson.sections[check.function]:
                wanted[f"check {check.id}"] = check.section
        for where, section in wanted.items():
            if section not in ids:
                log.warning(
                    f"course hook: {lesson.page} has no heading with id '{section}' "
                    f"(lessons.toml, lesson {lesson.number}, {where}); write it as "
                    f"'## Title {{#{section}}}'"
                )
    return _tidy_tooltips(content, page)


def _backlinks(glossary_page) -> str:
    order = {"index.md": 0} | {lesson.page: lesson.number for lesson in STATE.lessons}

    def link(term_id: str) -> str:
        uses = STATE.uses.get(term_id, {})
        if not uses:
            return '<span class="glossary-refs__none">Not used in the pages yet.</span>'
        items = []
        for src in sorted(uses, key=lambda s: (order.get(s, 100), s)):
            title, anchor = uses[src]
            page = STATE.pages.get(src)
            if page is None or page.url is None:
                continue
            href = get_relative_url(page.url, glossary_page.url)
            if href.endswith("."):  # "." or "..": the home page
                href += "/"
            href += f"#{anchor}" if anchor else ""
            lesson = STATE.by_page.get(src)
            label = f"{lesson.number}. {lesson.title}" if lesson else (page.title or title)
            items.append(f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        return '<span class="glossary-refs__label">Used in:</span> ' + ", ".join(items)

    return link


def on_page_context(context, page, config, nav, **kwargs):
    if page.file.src_uri == "glossary.md" and page.content:
        link = _backlinks(page)
        page.content = REFS_PLACEHOLDER.sub(lambda m: link(m.group(1)), page.content)
    return context
