"""``release``: the nbgrader source assignments, built from the lesson manifest, and the release.

One assignment per lesson that has checks, ``source/SLUG/``:

    SLUG.ipynb              instructions (linking the lesson page), then one autograder cell
                            per check, carrying the manifest's points
    exercises/              the student's package: one stub module per lesson
    gpt/                    the provided code the lessons use (tokens: gpt.vocab), unchanged
    graders/                the grading harness and this lesson's public graders, with
                            public/answers_SLUG.pt: the answers their checks expect
    course/lessons.toml     the manifest without its hidden checks
    requirements.txt        what the notebook and the package need, from pyproject.toml (its
                            first lines name the two install commands: ``pip install -r``,
                            then GPT-2's ranks package with ``--no-deps``)
    release.json            the course site's address: tells the graders they run in a
                            release (graders/where.py: its command, links and install line)

Links in the notebook, the checks' output and the stubs' errors point to the course site:
``--site-url``, else the address the course folder recorded at its first release
(``release.json``: kept, so a lesson released later links where the others do, and autograde,
feedback, Gradescope and the class report link there too), else ``$COURSE_SITE_URL``; with
none, the release stops with one line (never mkdocs serve's local address by default).

A public check's cell is ``check("SLUG", "CHECK-ID")``; a hidden check's cell holds that call
inside ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``, which nbgrader strips from the
release and restores from the gradebook at autograde (its grade id is an opaque
``cNNN-hidden``, so not even the check's name ships). Every cell is locked and its grade id
starts with its position, which lets autograde rebuild the notebook from the gradebook.
``nbgrader generate_assignment`` then records the cells in the gradebook and writes
``release/SLUG/``.

No solution code ships. What ships is decided by folders: nothing of solutions/,
instructor/, graders/hidden/ or graders/secret/ (the oracles, the checks' answers correct and
mistaken, and the trusted dependencies the checker answers the worker's proxies with) is ever
copied.
Instead, the public checks are run here on solutions/ while graders/answers.py records every
answer they ask for (the reference must score full marks), and each lesson's answers ship as
data, graders/public/answers_SLUG.pt, which the released checks replay. Without
them, a released worker grades a function with the submission's own versions of the functions
it builds on (the notebook says so); instructor autograde runs the full grader
tree from the instructor's repository (instructor.autograde), so it grades live,
public and hidden checks alike, with the trusted dependencies.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from core.atomic import atomic_write_bytes
from core.manifest import (
    ROOT,
    Lesson,
    Manifest,
    load_manifest,
    parse_manifest,
    public_view,
    site_url,
)
from gpt.vocab import VOCAB_INSTALL
from graders.where import RELEASE_FILE, SUBMISSION

from .course import PACKAGE, Course
from .nbgrader_api import api, write_config_file

GRADERS = ROOT / "graders"
SETUP = """\
# Run this cell first: it loads check(), which runs the course's graders on your code in
# exercises/{module}.py (in a separate process) and prints the result of one check.
import os
import sys

if os.environ.get("NBGRADER_EXECUTION") == "autograde":  # instructors: never import from here
    sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
from graders.notebook import check"""
SUBMIT = 'from graders.notebook import submit\n\nsubmit("{slug}")'


SITE_FILE = "release.json"  # in the course folder: the site address, kept across releases


class NoSiteError(ValueError):
    """No course site address is known: the release needs one, once."""


def _normal(url: str) -> str:
    return url.rstrip("/") + "/"


def recorded_site(course: Course) -> str | None:
    """The site address the course's first release recorded (COURSE/release.json), if any."""
    try:
        url = json.loads((course.root / SITE_FILE).read_text())["site_url"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return _normal(url) if isinstance(url, str) and url else None


def choose_site(course: Course, url: str | None = None) -> str:
    """The course site the release links to: ``url`` (``--site-url``: changes it on purpose),
    else the one the course recorded at its first release (kept: a lesson released later
    without --site-url links where the earlier ones do), else $COURSE_SITE_URL (the address
    the site is built for, mkdocs.yml). Never a default: with none of them, one line says how
    to give it."""
    chosen = url or recorded_site(course) or os.environ.get("COURSE_SITE_URL")
    if not chosen:
        raise NoSiteError(
            "no course site address: publish the site (COURSE_SITE_URL=URL nox -s docs) and "
            "release with --site-url URL once; later releases keep it "
            "(--site-url http://127.0.0.1:8000/ for a site served on this machine only)"
        )
    return _normal(chosen)


def is_local(url: str) -> bool:
    """True for an address only this machine can open (mkdocs serve's default)."""
    from urllib.parse import urlparse

    return (urlparse(url).hostname or "") in ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def course_site(course: Course) -> str:
    """The site address the course's releases link to (release.json); "" before a release."""
    return recorded_site(course) or ""


def torch_cpu_index() -> str:
    """PyTorch's index of CPU wheels: the noxfile's ``TORCH_CPU_INDEX``, read without importing
    the noxfile (nox is no dependency of the instructor's tools)."""
    for node in ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TORCH_CPU_INDEX" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise ValueError(f"{ROOT / 'noxfile.py'} has no string TORCH_CPU_INDEX")


def imported_names(files: list[Path]) -> set[str]:
    """The top-level modules the Python ``files`` import."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.partition(".")[0])
    return names


def install_lines() -> list[str]:
    """The commands that install a released lesson's needs, in its folder: the requirements,
    then GPT-2's merge ranks without that package's own dependencies (pip cannot say --no-deps
    for one line of a requirements file)."""
    return ["pip install -r requirements.txt", VOCAB_INSTALL]


def requirements(path: Path | None = None) -> str:
    """requirements.txt of a released lesson, from pyproject.toml: the project's dependencies
    (the package and the graders import them), the packages of the grade extra that the shipped
    graders import (pytest, hypothesis), and the notebook extra (Jupyter); torch from PyTorch's
    CPU index, as a student on Linux gets it (elsewhere that index serves PyPI's own builds);
    its first lines name the install commands, GPT-2's ranks package included."""
    data = tomllib.loads(Path(path or ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = data.get("optional-dependencies", {})
    shipped = [p for p in GRADERS.rglob("*.py") if p.relative_to(GRADERS).parts[0] not in HOME]
    imported = imported_names(shipped)
    graders_need = [r for r in extras.get("grade", []) if _module_of(r) in imported]
    lines = [
        "# What this lesson's notebook and package need. In this folder, in a fresh virtual",
        "# environment (python -m venv .venv), run these two commands:",
        *(f"#   {line}" for line in install_lines()),
        "# (the second brings GPT-2's merge ranks, without that package's own dependencies).",
        f"--extra-index-url {torch_cpu_index()}",
        *data["dependencies"],
        *graders_need,
        *extras.get("notebook", []),
    ]
    return "\n".join(lines) + "\n"


def _module_of(requirement: str) -> str:
    """The module a requirement's distribution is imported as (its name, as Python spells it)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    return (name.group(0) if name else requirement).lower().replace("-", "_").replace(".", "_")


def _locked(cell: Any, grade_id: str, points: int | None = None) -> Any:
    meta: dict[str, Any] = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": True,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    cell.metadata.update({"nbgrader": meta, "deletable": False, "editable": False})
    return cell


def dependencies(lesson: Lesson, manifest: Manifest | None = None) -> str:
    """Which of the lesson's functions call which others, of its module and of earlier
    lessons (with the lesson's number), in words ("" if none)."""
    manifest = manifest or load_manifest()
    parts = []
    for function in lesson.functions:
        names = [f"`{name}`" for name in lesson.own_dependencies(function)]
        for name in lesson.earlier_dependencies(function):
            module, _, called = name.partition(".")
            names.append(f"lesson {manifest.lesson(module).number}'s `{called}`")
        if names:
            listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            parts.append(f"`{function}` uses {listed}")
    return "; ".join(parts)


def _builds_on_box(lesson: Lesson) -> str:
    """The notebook's "functions that build on others" paragraph ("" if none builds on any)."""
    builds_on = dependencies(lesson)
    if not builds_on:
        return ""
    text = f"\n\n**Functions that build on others.** {builds_on}."
    if any(lesson.own_dependencies(function) for function in lesson.functions):
        text += (
            " Here, a function runs with your own versions of this lesson's functions it uses,"
            " so a mistake (or a stub) there shows in both; when your instructor grades,"
            " reference versions are plugged in, so that every check grades its own function"
            " only."
        )
    if any(lesson.earlier_dependencies(function) for function in lesson.functions):
        text += (
            " An earlier lesson's function is the course's reference, here and when your"
            f" instructor grades: `{PACKAGE}/` in this folder holds the earlier lessons' modules"
            " as stubs, and you need not copy yours in. (Where a mistake changes what your"
            " function hands it, this notebook has no recorded answer and runs the folder's"
            " own copy instead.)"
        )
    return text


def lesson_notebook(lesson: Lesson, base: str = "") -> Any:
    """The lesson's notebook: instructions, a setup cell and one autograder cell per check."""
    page = base + site_url(lesson.page)
    functions = ", ".join(
        f"[`{name}`]({base}{site_url(lesson.page, lesson.sections[name])})"
        for name in lesson.functions
    )
    public = [c for c in lesson.checks if not c.hidden]
    hidden = [c for c in lesson.checks if c.hidden]
    intro = f"""# Lesson {lesson.number}: {lesson.title}

Read the lesson, [{lesson.title}]({page}), then implement the functions of
`{PACKAGE}/{lesson.module}.py` in this folder: {functions}. Their docstrings say what each
computes, with shapes and a small example.

**How this notebook works.** You do not write code here: edit `{PACKAGE}/{lesson.module}.py`,
save it, and run the cells below. The setup cell loads `check()`; every other cell runs one
check of the course's graders on your module, in a separate process, and shows its points, and
for a failed check a hint naming the likely mistake and the section of the lesson that explains
it. The first check shows as soon as the graders have run it (a few seconds: they start
first); they go on in the background for the cells after it, and saving your module starts a
new run. When one mistake makes several checks fail, the first of them gives its hint and the
others say which to fix first, as `python -m graders` does.

This lesson has {len(public)} public check(s) worth {sum(c.points for c in public)} points
here, and {len(hidden)} hidden check(s) worth {sum(c.points for c in hidden)} more that your
instructor runs after you submit.

**Grading from a terminal.** In this folder, `python -m graders {lesson.slug}` grades the same
checks and prints the same hints; `python -m graders --watch {lesson.slug}` stays up and grades
again every time you save `{PACKAGE}/{lesson.module}.py`, in a second or two.

**What to submit.** `{PACKAGE}/{lesson.module}.py` and this notebook, as one zip: the last cell
of this notebook writes `{SUBMISSION.format(lesson=lesson.slug)}` (or run
`python -m graders {lesson.slug} --zip`); hand in that file as your instructor says. Only your
module is graded; changes to this notebook are discarded.

**What it needs to run.** Python 3.11 or later with the packages in `requirements.txt`, beside
this notebook. In this folder, in a fresh virtual environment (`python -m venv .venv`, then
activate it), run:

```bash
{chr(10).join(install_lines())}
```"""
    intro += _builds_on_box(lesson)
    cells = []
    index = iter(range(1000))

    def grade_id(name: str) -> str:
        return f"c{next(index):03d}-{name}"

    cells.append(_locked(new_markdown_cell(intro), grade_id("instructions")))
    cells.append(_locked(new_code_cell(SETUP.format(module=lesson.module)), grade_id("setup")))
    for function in lesson.functions:
        checks = [c for c in lesson.checks if c.function == function]
        if not checks:
            continue
        link = base + site_url(lesson.page, lesson.sections[function])
        cells.append(
            _locked(
                new_markdown_cell(
                    f"## `{function}`\n\nSee [the lesson]({link}).",
                ),
                grade_id(f"about-{function}".lower().replace("_", "-")),
            )
        )
        for check in checks:
            call = f"check({lesson.slug!r}, {check.id!r})".replace("'", '"')
            if check.hidden:
                source = (
                    "# A hidden check: your instructor runs it after you submit.\n"
                    f"### BEGIN HIDDEN TESTS\n{call}\n### END HIDDEN TESTS"
                )
                cells.append(_locked(new_code_cell(source), grade_id("hidden"), check.points))
            else:
                cells.append(_locked(new_code_cell(call), grade_id(check.id), check.points))
    cells.append(
        _locked(
            new_markdown_cell(
                "## Submit\n\nRun the cell below when you are done: it writes "
                f"`{SUBMISSION.format(lesson=lesson.slug)}` (your `{PACKAGE}/{lesson.module}.py` "
                "and this notebook) in this folder. Hand in that file."
            ),
            grade_id("about-submit"),
        )
    )
    cells.append(_locked(new_code_cell(SUBMIT.format(slug=lesson.slug)), grade_id("submit")))
    notebook = new_notebook(cells=cells)
    notebook.metadata.update(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    for cell in notebook.cells:  # nbgrader matches cells by grade id, not by nbformat id
        cell.pop("id", None)
    notebook.nbformat_minor = 4
    return notebook


# -- the public manifest ------------------------------------------------------------------------


def public_manifest(path: Path | None = None) -> str:
    """The manifest's TOML without its hidden checks (and so without their hints): its public
    view (core.manifest.public_view), written with tomli-w."""
    import tomli_w

    data = tomllib.loads(Path(path or ROOT / "course" / "lessons.toml").read_text("utf-8"))
    text = "# The lesson manifest, public checks only (generated for the student release).\n\n"
    text += tomli_w.dumps(public_view(data))
    parse_manifest(tomllib.loads(text), source="public manifest")  # still a valid manifest
    return text


# -- the assignment folders ---------------------------------------------------------------------


def _copy_python(source: Path, dest: Path) -> None:
    for path in sorted(source.rglob("*.py")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def _copy_course_pages(dest: Path) -> None:
    """The course's pages that the 'course' corpus reads (gpt/corpus.py): the chapters' code
    trains and tokenizes on them in a release folder as in the repository. They are the
    site's own pages, public already."""
    from gpt.corpus import COURSE_DIR, course_pages

    for page in course_pages(COURSE_DIR):
        target = dest / page.relative_to(COURSE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)


# What ships is a rule about folders, never a list of files: graders/ ships whole but for
# these two folders (the secret half of the checker and the hidden graders); instructor/ and
# solutions/ never ship. A new module is secret by being put in graders/secret/.
UNRELEASED_FOLDERS = ("secret", "hidden")
HOME = UNRELEASED_FOLDERS


def released_grader_files(lesson: Lesson, graders: Path = GRADERS) -> dict[str, Path]:
    """graders/ files an assignment ships: every module outside graders/secret/ and
    graders/hidden/, and of graders/public/ only this lesson's graders."""
    files: dict[str, Path] = {}
    for path in sorted(graders.rglob("*.py")):
        rel = path.relative_to(graders)
        if "__pycache__" in rel.parts or rel.parts[0] in UNRELEASED_FOLDERS:
            continue
        if rel.parts[0] == "public" and rel.name not in (
            "__init__.py",
            "conftest.py",
            f"test_{lesson.slug}.py",
        ):
            continue
        files[rel.as_posix()] = path
    return files


def record_answers(lessons: list[Lesson], reference: Path | None = None) -> dict[str, dict]:
    """The answers the lessons' public checks ask for, recorded while they grade the reference
    solutions (graders/answers.py), per lesson; the reference must score full marks."""
    import graders
    from graders import answers

    with tempfile.TemporaryDirectory(prefix="course-record-") as tmp:
        with answers.recording() as recorded:
            report = graders.grade(
                reference or ROOT / "solutions",
                lessons=[lesson.slug for lesson in lessons],
                hidden=False,
                json_path=Path(tmp) / "report.json",
            )
    failed = [
        f"{entry['slug']}/{row['id']}: {row['detail']}"
        for entry in report["lessons"]
        for row in entry["checks"]
        if not row["passed"]
    ]
    if failed:
        raise ValueError(
            "the reference solutions fail public checks, so their answers cannot be recorded: "
            + "; ".join(failed[:5])
        )
    return {lesson.slug: recorded.get(lesson.slug, {}) for lesson in lessons}


def _generator(root: Path | None = None) -> Any:
    """tools/generate_exercises.py, the one writer of the stubs, as a module."""
    path = (root or ROOT) / "tools" / "generate_exercises.py"
    spec = importlib.util.spec_from_file_location("generate_exercises", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    return generator


def stale_exercises(root: Path | None = None) -> list[str]:
    """The files of ``exercises/`` that differ from the stubs the generator makes from
    ``solutions/`` (tools/generate_exercises.py): solutions copied there, a stub edited."""
    root = root or ROOT
    wanted = _generator(root).render(root)
    folder = root / PACKAGE
    present = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}
    return sorted(n for n in wanted.keys() | present.keys() if wanted.get(n) != present.get(n))


def build_source(
    course: Course,
    manifest: Manifest,
    lessons: list[str] | None = None,
    site: str | None = None,
) -> list[str]:
    """Write source/SLUG/ for the chosen lessons (default: every lesson with checks)."""
    from graders import answers

    chosen = (
        [manifest.lesson(name) for name in lessons]
        if lessons
        else [lesson for lesson in manifest.lessons if lesson.checks]
    )
    manifest_text = public_manifest(manifest.path)
    for lesson in chosen:
        if not lesson.checks:
            raise ValueError(f"lesson {lesson.slug!r} has no checks in the manifest yet")
        if not (GRADERS / "public" / f"test_{lesson.slug}.py").is_file():
            raise ValueError(
                f"lesson {lesson.slug!r} has no public graders "
                f"(graders/public/test_{lesson.slug}.py)"
            )
    stale = stale_exercises()
    if stale:
        raise ValueError(
            f"{PACKAGE}/ is not what solutions/ generates ({', '.join(stale)}): nothing was "
            "released; run `nox -s exercises` (or discard the edits) and release again"
        )
    base = choose_site(course, site)
    recorded = record_answers(chosen)
    stubs = _generator().render(ROOT, site=base)  # exercises/, the stubs linking the site
    needs = requirements()  # every lesson's: read from the graders' imports once
    built = []
    for lesson in chosen:
        folder = course.source / lesson.slug
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, text in stubs.items():
            (folder / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / PACKAGE / name).write_text(text, encoding="utf-8")
        _copy_python(ROOT / "gpt", folder / "gpt")  # provided code: no exercise in it
        _copy_python(ROOT / "core", folder / "core")  # the standard-library base
        for rel, path in released_grader_files(lesson).items():
            (folder / "graders" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / "graders" / rel)
        answers.save(
            recorded[lesson.slug],
            folder / "graders" / "public" / f"answers_{lesson.slug}.pt",
            lesson.slug,
        )
        cell_side = folder / "graders" / "notebook.py"
        cell_side.write_text(
            cell_side.read_text(encoding="utf-8").replace(
                'SITE_URL = ""', f"SITE_URL = {base!r}", 1
            ),
            encoding="utf-8",
        )
        (folder / "course").mkdir()
        (folder / "course" / "lessons.toml").write_text(manifest_text, encoding="utf-8")
        _copy_course_pages(folder / "course")
        (folder / "requirements.txt").write_text(needs, encoding="utf-8")
        # tells the graders they run in a release: its commands, its site (graders/where.py)
        info = {"site_url": base, "lesson": lesson.slug}
        (folder / RELEASE_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        nbformat.write(lesson_notebook(lesson, base), folder / f"{lesson.slug}.ipynb")
        built.append(lesson.slug)
    return built


def release(
    course: Course | None = None,
    lessons: list[str] | None = None,
    manifest: Manifest | None = None,
    site: str | None = None,
) -> list[str]:
    """Build source/ and run ``nbgrader generate_assignment`` on each lesson."""
    course = course or Course.at()
    manifest = manifest or load_manifest()
    write_config_file(course)
    chosen = choose_site(course, site)  # before any work: a missing address is one line
    built = build_source(course, manifest, lessons, chosen)
    if chosen != recorded_site(course):
        atomic_write_bytes(
            course.root / SITE_FILE, (json.dumps({"site_url": chosen}, indent=1) + "\n").encode()
        )
    nbgrader = api(course)
    for slug in built:
        result = nbgrader.generate_assignment(slug, force=True, create=True)
        if not result.get("success"):
            raise RuntimeError(
                f"nbgrader generate_assignment {slug} failed:\n"
                f"{result.get('error') or result.get('log')}"
            )
    return built
