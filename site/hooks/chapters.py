"""MkDocs hook: the chapters' parts that come from the lesson manifest, ``course/lessons.toml``.

- a header line under each chapter's H1: "Part N of 9 · about X min read · level", and one
  under the H1 of the reading pages beside them (the primer, ``course/more/``);
- the exercise box that replaces the chapter's ``<!-- exercise-box -->`` line: the stub
  module, each function linked to the section that explains it, the ``nox -s grade --``
  command and the points (the sum of the lesson's ``[[lesson.check]]`` points);
- in the instructor build (``COURSE_INSTRUCTOR=1``), a generated page per lesson showing
  ``solutions/<module>.py``, linked from the box and listed in the navigation (written to
  ``build/site-instructor`` instead of ``build/site`` unless ``-d`` says otherwise);
- the learning path on the home page (``<!-- learning-path -->`` in ``course/index.md``).

Problems that would let the site drift from the manifest (a chapter without its marker, a
section id that no heading carries, nav out of order, a missing chapter file) are logged as
warnings, so ``mkdocs build --strict`` fails on them while ``mkdocs serve`` keeps working.
"""

from __future__ import annotations

import html
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

# The hooks' shared modules sit beside this file: MkDocs puts this folder on sys.path while it
# loads a hook, a test that loads one by its path does not.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from course_data import load_lessons, nav_pages, repository_root
from markdown_scan import fenced_lines, read_source, reading_minutes, slugify, strip_fences
from mkdocs.structure.files import File, Files
from mkdocs.utils import get_relative_url

if TYPE_CHECKING:
    from graders.manifest import Lesson

log = logging.getLogger("mkdocs.hooks.chapters")

EXERCISE_MARKER = re.compile(r"^[ \t]*<!--\s*exercise-box\s*-->[ \t]*$", re.MULTILINE)
PATH_MARKER = re.compile(r"^[ \t]*<!--\s*learning-path\s*-->[ \t]*$", re.MULTILINE)
HEADING_ID = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*\{([^}]*)\}[ \t]*$", re.MULTILINE)
ID = re.compile(r"\bid=\"([^\"]+)\"")
REFERENCE_DIR = "reference"  # instructor build: reference/<module>.md
PRIMER, MORE_DIR = "primer.md", "more/"  # the reading pages beside the chapters


def instructor_build() -> bool:
    return os.environ.get("COURSE_INSTRUCTOR", "").strip().lower() in {"1", "true", "yes", "on"}


class State:
    def __init__(self) -> None:
        self.root = Path(".")
        self.docs_dir = Path("course")
        self.lessons: list[Lesson] = []
        self.by_page: dict[str, Lesson] = {}
        self.instructor = False
        # The reading pages beside the chapters (the primer, course/more/) -> the part they
        # follow in the nav (0 before the first).
        self.beside: dict[str, int] = {}


STATE = State()


# --------------------------------------------------------------------------- helpers


def heading_titles(markdown: str) -> dict[str, str]:
    """Explicit heading ids (``## Title {#id}``) of a chapter -> their titles."""
    titles = {}
    for m in HEADING_ID.finditer(strip_fences(markdown)):
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


def insert_after_h1(markdown: str, text: str) -> str:
    """``text`` as a paragraph under the page's first H1 outside code (or on top, if none)."""
    lines = markdown.splitlines(keepends=True)
    for i, (line, code) in enumerate(zip(lines, fenced_lines(lines), strict=True)):
        if not code and re.match(r"^#[ \t]+\S", line):
            return "".join(lines[: i + 1]) + "\n" + text + "\n\n" + "".join(lines[i + 1 :])
    return text + "\n\n" + markdown


# --------------------------------------------------------------------------- generated Markdown


def chapter_meta(lesson: Lesson, minutes: int) -> str:
    level = html.escape(lesson.level)
    return (
        f'<p class="chapter-meta"><span class="chapter-meta__part">Part {lesson.number} of '
        f"{len(STATE.lessons)}</span> · <span>about {minutes} min read</span> · "
        f'<span class="chapter-meta__level chapter-meta__level--{slugify(lesson.level)}">'
        f"{level}</span></p>"
    )


def beside_meta(part: int, minutes: int) -> str:
    """The header of a reading page beside the chapters: the primer (``part`` 0) or a "More"
    page after chapter ``part``."""
    where = (
        f"Part 0 of {len(STATE.lessons)}, before part 1"
        if part == 0
        else f"More on part {part} of {len(STATE.lessons)}"
    )
    kind = "reference" if part == 0 else "optional"
    return (
        f'<p class="chapter-meta"><span class="chapter-meta__part">{where}</span> · '
        f"<span>about {minutes} min read</span> · "
        f'<span class="chapter-meta__level chapter-meta__level--{kind}">{kind}</span></p>'
    )


def exercise_box(lesson: Lesson, markdown: str) -> str:
    titles = heading_titles(markdown)
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
        "    Check your work (the report gives a hint and a link for every failed check): in "
        "the course's repository,",
        "",
        "    ```bash",
        f"    nox -s grade -- {lesson.slug}",
        "    ```",
        "",
        f"    in a class's release, in the lesson's folder, its notebook `{lesson.slug}.ipynb` "
        f"or `python -m graders {lesson.slug}` (`--watch` grades again on every save; "
        f"[In a class]({get_relative_url('class.md', lesson.page)}) says how to install and "
        "submit).",
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
        source = read_source(STATE.docs_dir / lesson.page)
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
            f"    `nox -s grade -- {lesson.slug}` (a class's release: "
            f"`python -m graders {lesson.slug}`) · {points}",
            "",
        ]
    cards.append("</div>")
    return "\n".join(cards) + "\n"


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


def on_config(config, **kwargs):
    global STATE
    STATE = State()
    STATE.root = repository_root(config)
    STATE.docs_dir = Path(config.docs_dir)
    STATE.lessons = load_lessons(config)
    STATE.by_page = {lesson.page: lesson for lesson in STATE.lessons}
    STATE.instructor = instructor_build()
    config.extra["instructor"] = STATE.instructor
    # The instructor build carries the solutions: keep it out of the student site's folder.
    student_site = (STATE.root / "build" / "site").resolve()
    if STATE.instructor and Path(config.site_dir).resolve() == student_site:
        config.site_dir = str(student_site.parent / "site-instructor")
        log.info(f"chapters hook: instructor build, written to {config.site_dir}")

    # Snippets: resolve base paths against the repository root, not the working directory.
    snippets = config.mdx_configs.get("pymdownx.snippets")
    if isinstance(snippets, dict):
        snippets["base_path"] = [
            str((STATE.root / base).resolve()) for base in snippets.get("base_path", ["."])
        ]

    part = 0
    for path in nav_pages(config.nav):
        if path in STATE.by_page:
            part = STATE.by_page[path].number
        elif path == PRIMER or path.startswith(MORE_DIR):
            STATE.beside[path] = part

    # The nav must list the chapters in the manifest's order.
    if config.nav is not None:
        chapters = [path for path in nav_pages(config.nav) if path in STATE.by_page]
        expected = [lesson.page for lesson in STATE.lessons]
        if chapters != expected:
            log.warning(
                "chapters hook: mkdocs.yml's nav lists the chapters as "
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
                f"chapters hook: chapter {lesson.page} (lesson {lesson.number}) does not exist; "
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
            source = read_source(path)
            if source is None:
                log.warning(f"chapters hook: {path} does not exist; no reference page for it")
                source = f"# {path} does not exist yet\n"
            files.append(
                File.generated(
                    config,
                    f"{REFERENCE_DIR}/{lesson.module}.md",
                    content=reference_page(lesson, source),
                )
            )
    return files


def on_page_markdown(markdown: str, page, config, files, **kwargs):
    src = page.file.src_uri
    lesson = STATE.by_page.get(src)
    if lesson is not None:
        # From the file as written (other plugins have already rewritten `markdown`, e.g. the
        # quizzes into HTML), so the chapter and the home page give the same reading time.
        minutes = reading_minutes(read_source(STATE.docs_dir / src) or markdown)
        box = exercise_box(lesson, markdown)
        if EXERCISE_MARKER.search(markdown):
            markdown = EXERCISE_MARKER.sub(lambda _: box, markdown, count=1)
        else:
            log.warning(
                f"chapters hook: {src} has no '<!-- exercise-box -->' line; "
                "the exercise box was put under the title"
            )
            markdown = insert_after_h1(markdown, box)
        markdown = insert_after_h1(markdown, chapter_meta(lesson, minutes))
    elif src in STATE.beside:
        minutes = reading_minutes(read_source(STATE.docs_dir / src) or markdown)
        markdown = insert_after_h1(markdown, beside_meta(STATE.beside[src], minutes))
    if src == "index.md":
        if PATH_MARKER.search(markdown):
            markdown = PATH_MARKER.sub(lambda _: learning_path(), markdown, count=1)
        else:
            log.warning("chapters hook: index.md has no '<!-- learning-path -->' line")
    return markdown


def on_page_content(content: str, page, config, files, **kwargs):
    lesson = STATE.by_page.get(page.file.src_uri)
    if lesson is None:
        return content
    ids = set(ID.findall(content))
    wanted = {f"sections.{f}": s for f, s in lesson.sections.items()}
    for check in lesson.checks:  # a check's own section (else its function's, above)
        if check.section != lesson.sections[check.function]:
            wanted[f"check {check.id}"] = check.section
    for where, section in wanted.items():
        if section not in ids:
            log.warning(
                f"chapters hook: {lesson.page} has no heading with id '{section}' "
                f"(lessons.toml, lesson {lesson.number}, {where}); write it as "
                f"'## Title {{#{section}}}'"
            )
    return content
