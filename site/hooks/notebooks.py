"""MkDocs hook: a chapter's examples as a notebook, as runnable cells, and the progress page.

Every top-level ```` ```python exec="on" ```` block of a page (the blocks markdown-exec runs at
build time) is one *cell*. From the same parse this hook makes:

- ``notebooks/<chapter>.ipynb`` in the built site: the chapter's cells in order, under the
  headings they follow, so it runs top to bottom with the course installed (cells that print
  HTML, the figures, are captured and shown as HTML);
- a "Run these examples yourself" box before a page's first example: the notebook's download
  link and how to run the examples in the page (``nox -s course``);
- a start and an end marker around each block's rendering and the cells' sources as JSON
  (``<script id="course-cells">``), which ``assets/javascripts/run.js`` turns into Run and
  Edit buttons when the page is served by ``python -m live.course_server``;
- the "Your progress" page: ``<!-- progress -->`` in ``course/progress.md`` becomes the table
  that run.js fills from the latest grading report.

A page's cells share one kernel in the page, as one markdown-exec session does at build time.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

# The hooks' shared modules sit beside this file: MkDocs puts this folder on sys.path while it
# loads a hook, a test that loads one by its path does not.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from course_data import load_lessons, nav_pages
from markdown_scan import fenced_blocks, fenced_lines
from mkdocs.structure.files import File, Files

LANGUAGE = re.compile(r"(?P<lang>[\w+-]+)(?P<options>.*)")
OPTION = re.compile(r"(\w+)=\"([^\"]*)\"")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*(?:\{[^}]*\})?[ \t]*#*[ \t]*$")
PROGRESS_MARKER = re.compile(r"^[ \t]*<!--\s*progress\s*-->[ \t]*$", re.MULTILINE)
QUIZ = re.compile(r"^<quiz>", re.MULTILINE)
# A line that starts no plain paragraph: indented, HTML, an admonition, a table, a list item.
NOT_PROSE = re.compile(r"[ \t<!|>]|[-*+][ \t]|\d+[.)][ \t]")
NOTEBOOK_DIR = "notebooks"
TRUE = {"1", "on", "true", "yes"}


@dataclass
class Cell:
    source: str
    html: bool  # prints HTML (a figure): shown as HTML, not as text
    shown: bool  # the page shows the source (source="above" and friends)
    heading: str  # the last heading above the block ("" before the first)
    start: int  # line index of the opening fence
    end: int  # line index of the closing fence


def parse_cells(markdown: str) -> list[Cell]:
    """The page's top-level exec'd Python blocks, in order (indented blocks are not cells)."""
    lines = markdown.split("\n")
    blocks = {block.start: block for block in fenced_blocks(lines) if not block.indent}
    cells: list[Cell] = []
    heading = ""
    for i, (line, code) in enumerate(zip(lines, fenced_lines(lines), strict=True)):
        block = blocks.get(i)
        if not code:
            h = HEADING.match(line)
            if h:
                heading = h.group(1) + " " + h.group(2)
            continue
        m = LANGUAGE.match(block.info) if block else None
        if m is None:
            continue
        options = dict(OPTION.findall(m.group("options")))
        if m.group("lang") in {"python", "py"} and options.get("exec", "").lower() in TRUE:
            body = lines[block.start + 1 : block.end if block.closed else block.end + 1]
            cells.append(
                Cell(
                    source="\n".join(body),
                    html=options.get("html", "").lower() in TRUE,
                    shown=options.get("source", "") not in {"", "none"},
                    heading=heading,
                    start=block.start,
                    end=block.end,
                )
            )
    return cells


# --------------------------------------------------------------------------- notebooks


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _code(source: str) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": _lines(source),
    }


def _markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": _lines(text)}


def notebook(title: str, page: str, cells: list[Cell]) -> dict[str, Any]:
    """An nbformat 4 notebook of the cells, with the headings they follow as Markdown."""
    intro = (
        f"# {title}\n\n"
        f"The examples of the course chapter `course/{page}`, in order, generated from the "
        "page when the site was built. Run it from the course repository's root (for example "
        "`jupyter lab` there), or anywhere once the course is installed (`pip install -e .`). "
        "The examples import the lessons from `gpt.chapter`, which is your package, "
        "`exercises`: the functions you have written run, and each one you have not written "
        "yet is the reference's where the reference is there (the first import prints a line "
        "naming them). The page itself was computed with the reference."
    )
    out = [_markdown(intro)]
    heading = ""
    for cell in cells:
        if cell.heading and cell.heading != heading:
            heading = cell.heading
            out.append(_markdown(heading))
        if cell.html:
            # The block prints HTML (a figure): capture what it prints, then show it as HTML.
            out.append(_code("%%capture printed\n" + cell.source))
            out.append(_code("from IPython.display import HTML\n\nHTML(printed.stdout)"))
        else:
            out.append(_code(cell.source))
    for number, cell_json in enumerate(out):
        cell_json["id"] = f"cell-{number}"  # nbformat 4.5: stable ids, so rebuilds diff cleanly
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def notebook_path(src_uri: str) -> str:
    return f"{NOTEBOOK_DIR}/{PurePosixPath(src_uri).stem}.ipynb"


# --------------------------------------------------------------------------- page parts


def run_box(src_uri: str) -> str:
    target = PurePosixPath(notebook_path(src_uri))
    here = PurePosixPath(src_uri).parent
    rel = "/".join([".."] * len(here.parts) + list(target.parts))
    return (
        '!!! example "Run these examples yourself"\n\n'
        "    Every example on this page ran when the site was built: the outputs you see are "
        "real. To run them yourself, "
        f'[download them as a Jupyter notebook]({rel}){{ download="{target.name}" }} '
        "and open it in the course repository (or with the course installed): the examples "
        "import the lessons from `gpt.chapter`, which there means your own `exercises`, with "
        "the reference standing in for what you have not written yet (a line names it). Or "
        "serve the course on your machine with `nox -s course`: every example then gets a "
        "**Run** button, you can edit it, and a switch reruns the page with your own "
        "`exercises`.\n\n"
        '<div class="course-run-panel" hidden></div>\n'
    )


def _script(payload: dict[str, Any]) -> str:
    text = json.dumps(payload).replace("</", "<\\/")  # never closes the script element early
    return f'<script type="application/json" id="course-cells">{text}</script>'


def introduction_start(lines: list[str], start: int) -> int:
    """Where the run box goes for a cell opening at line ``start``: before the paragraph that
    introduces it when that paragraph ends with a colon ("Let us check that:"), so the box
    never stands between a sentence and its code; else right before the cell."""
    code = fenced_lines(lines)
    end = start - 1
    while end >= 0 and not lines[end].strip():
        end -= 1
    if end < 0 or code[end] or not lines[end].rstrip().endswith(":"):
        return start
    first = end
    while first > 0 and lines[first - 1].strip() and not code[first - 1]:
        first -= 1
    if HEADING.match(lines[first]) or NOT_PROSE.match(lines[first]):
        return start  # not a plain paragraph of the page's own (a heading, a list, a box)
    return first


def mark_cells(markdown: str, src_uri: str, lesson: str | None, root: str = "") -> str:
    """Markers around every cell, the run box before the first, the cells' JSON at the end."""
    cells = parse_cells(markdown)
    if not cells:
        return markdown
    lines = markdown.split("\n")
    for index in reversed(range(len(cells))):
        cell = cells[index]
        lines[cell.end + 1 : cell.end + 1] = ["", '<div class="course-cell-end"></div>', ""]
        lines[cell.start : cell.start] = [
            "",
            f'<div class="course-cell" data-cell="{index}"></div>',
            "",
        ]
        if index == 0:
            box = introduction_start(lines, cell.start)
            lines[box:box] = ["", run_box(src_uri), ""]
    payload = {
        "page": src_uri,
        "root": root,  # the site's root, relative to this page
        "lesson": lesson,
        "notebook": notebook_path(src_uri),
        "cells": [{"source": c.source, "html": c.html, "shown": c.shown} for c in cells],
    }
    return "\n".join(lines) + "\n\n" + _script(payload) + "\n"


def progress_markup(lessons: list[Any], root: str) -> str:
    rows = [
        {
            "slug": lesson.slug,
            "number": lesson.number,
            "title": lesson.title,
            "page": lesson.page,
            "functions": list(lesson.functions),
            "quizzes": STATE.quizzes.get(lesson.page, 0),
        }
        for lesson in lessons
    ]
    lesson_pages = {lesson.page for lesson in lessons}
    others = [  # the primer's and the "More" pages' quizzes: no exercise, but quizzes to count
        {"page": page, "title": STATE.titles.get(page, page), "quizzes": STATE.quizzes[page]}
        for page in STATE.nav
        if page not in lesson_pages and STATE.quizzes.get(page)
    ]
    data = html.escape(json.dumps(rows), quote=True)
    pages = html.escape(json.dumps(others), quote=True)
    return (
        f'<div class="course-progress" data-root="{root}" data-lessons="{data}" '
        f'data-pages="{pages}">\n'
        '<p class="course-progress__static">Your grading results appear here when the course '
        "is served on your machine: run <code>nox -s course</code>, open the address it "
        "prints, and grade with <code>nox -s grade</code> in another terminal; this page "
        "follows every run. Quiz answers are kept by your browser.</p>\n</div>\n"
    )


# --------------------------------------------------------------------------- MkDocs events


class _State:
    def __init__(self) -> None:
        self.lessons: list[Any] = []
        self.slug_by_page: dict[str, str] = {}
        self.quizzes: dict[str, int] = {}  # page -> number of quizzes (mkdocs_quiz's <quiz>)
        self.titles: dict[str, str] = {}  # page -> its H1
        self.nav: list[str] = []  # the pages in the navigation's order


STATE = _State()


def on_config(config, **kwargs):
    global STATE
    STATE = _State()
    STATE.lessons = load_lessons(config)
    # The examples import the lessons through gpt.chapter: at build time, the reference's.
    from gpt.lessons import CHAPTER_ENV, REFERENCE

    os.environ[CHAPTER_ENV] = REFERENCE
    STATE.slug_by_page = {lesson.page: lesson.slug for lesson in STATE.lessons}
    STATE.nav = nav_pages(config.nav)
    return config


def on_files(files: Files, config, **kwargs):
    """One generated notebook per page with cells (generated files, so links to them check)."""
    for file in list(files.documentation_pages()):
        try:
            markdown = file.content_string
        except (OSError, UnicodeDecodeError):
            continue
        STATE.quizzes[file.src_uri] = len(QUIZ.findall(markdown))
        title = next(
            (line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")),
            PurePosixPath(file.src_uri).stem,
        )
        STATE.titles[file.src_uri] = title
        cells = parse_cells(markdown)
        if not cells:
            continue
        content = json.dumps(notebook(title, file.src_uri, cells), indent=1) + "\n"
        files.append(File.generated(config, notebook_path(file.src_uri), content=content))
    return files


def on_page_markdown(markdown: str, page, config, files, **kwargs):
    src = page.file.src_uri
    root = "../" * page.url.count("/")  # "chapters/01-tokens/" -> "../../"
    if PROGRESS_MARKER.search(markdown):
        markup = progress_markup(STATE.lessons, root)
        markdown = PROGRESS_MARKER.sub(lambda _: markup, markdown, count=1)
    return mark_cells(markdown, src, STATE.slug_by_page.get(src), root)
