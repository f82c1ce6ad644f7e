"""gpt.chapter: the one name the chapters' code imports the lessons through.

Every run is a process of its own: importing gpt.chapter fills the stubs of a lesson package in
place, which must not reach the exercises/ that other tests grade. A run forks from the tests'
warm template (tests/support/forkserver.py: torch, matplotlib and the project's packages
imported once) in a folder that holds only the lesson packages it is about (a student's
exercises/, the reference's solutions/), so gpt/ and core/ are the repository's own; a release
folder, which has copies of its own, starts cold.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import forkserver
from support.release_folders import block_beside_attention

ROOT = Path(__file__).resolve().parents[2]
# The chapters' code runs here, the whole of it: slow (docs/developers.md).
pytestmark = pytest.mark.slow
CHAPTERS = sorted((ROOT / "course").rglob("*.md"))
NO_REFERENCE = "import sys; sys.modules['solutions'] = None  # no reference here\n"


def run(code: str, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -c code *args`` in ``cwd``, with ``cwd`` on PYTHONPATH (a folder's lesson
    packages come first), ``env`` added and no COURSE_CHAPTER_LESSONS of the caller's."""
    environment = {k: v for k, v in os.environ.items() if k != "COURSE_CHAPTER_LESSONS"}
    environment.update(PYTHONPATH=str(cwd), **env)
    return forkserver.run(
        ["-c", code, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def notebooks_hook():
    spec = importlib.util.spec_from_file_location(
        "notebooks_hook", ROOT / "site/hooks/notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_chapter_imports_the_reference_directly() -> None:
    for path in CHAPTERS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not re.match(r"\s*(from|import)\s+solutions\b", line), (
                f"{path.relative_to(ROOT)}:{number}: import the lessons from gpt.chapter, which "
                "is the reference at build time and the student's package when they run it"
            )


def _student(tmp_path: Path, done: dict[str, str]) -> Path:
    """A folder of the lesson packages, the reference's solutions/ and the student's exercises/:
    the untouched stubs but for ``done``: module -> a module of solutions/ copied over it."""
    tree = tmp_path / "course-tree"
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for module, source in done.items():
        shutil.copy(ROOT / "solutions" / f"{source}.py", tree / "exercises" / f"{module}.py")
    return tree


def test_a_student_run_uses_their_functions_and_the_reference_for_the_rest(tmp_path) -> None:
    tree = _student(tmp_path, {"attention": "attention"})
    code = (
        "from gpt.chapter.attention import attention\n"
        "from gpt.chapter.block import self_attention, layer_norm\n"
        "import gpt.chapter as chapter, exercises.block\n"
        "print(attention.__module__, layer_norm.__module__)\n"
        # block.py's own `from .attention import attention` is the student's, done
        "print(exercises.block.attention.__module__)\n"
        "print(chapter.lessons.package)\n"
    )
    done = run(code, tree)
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first.startswith("gpt.chapter: your lessons (exercises); not done yet, so the reference")
    assert "attention" not in first.replace("self_attention", "") and "block (all)" in first
    assert rest == ["exercises.attention solutions.block", "exercises.attention", "exercises"]


# The chapters' self_attention on a 4-wide, 2-head toy: prints the output's shape.
SELF_ATTENTION_SHAPE = (
    "import torch\n"
    "from gpt.chapter.block import self_attention\n"
    "C = 4\n"
    "p = {'c_attn.weight': torch.randn(3 * C, C), 'c_proj.weight': torch.eye(C)}\n"
    "print(tuple(self_attention(torch.randn(1, 3, C), p, 2).shape))\n"
)


def test_a_stub_is_filled_where_the_students_other_modules_imported_it(tmp_path) -> None:
    """exercises/block.py imports ``attention`` from its own package: a stub there is the
    reference's in block too, so the student's finished block runs."""
    tree = _student(tmp_path, {"block": "block"})
    code = (
        "from gpt.chapter.block import self_attention\n"
        "import exercises.block\n"
        "print(exercises.block.attention.__module__)\n" + SELF_ATTENTION_SHAPE
    )
    done = run(code, tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["solutions.attention", "(1, 3, 4)"]


def test_without_a_reference_the_stubs_stay_and_the_line_says_so(tmp_path) -> None:
    tree = _student(tmp_path, {"tokens": "tokens"})
    shutil.rmtree(tree / "solutions")
    code = (
        "from gpt.chapter.tokens import encode\n"
        "from gpt.chapter.windows import shift\n"
        "print(encode('hi')[:1] != [])\n"
        "try:\n"
        "    shift([1, 2])\n"
        "except NotImplementedError as error:\n"
        "    print('stub:', error)\n"
    )
    done = run(NO_REFERENCE + code, tree)
    assert done.returncode == 0, done.stderr
    line, works, stub = done.stdout.splitlines()
    assert line.startswith("gpt.chapter: your lessons (exercises); not done yet, so they raise")
    assert "tokens" not in line and "windows (all)" in line
    assert works == "True" and stub.startswith("stub: ")


def test_in_a_release_folder_an_earlier_lesson_is_the_students_own_from_its_folder(
    tmp_path,
) -> None:
    """The chapters' code run in the block lesson's release folder (no reference there): lesson
    4's functions are the student's own from the attention folder beside it, and the line says
    so; the lessons not written anywhere yet raise until they are."""
    block = block_beside_attention(tmp_path) / "block"
    code = (
        "from gpt.chapter.block import attention\n"
        "print(attention.__module__)\n" + SELF_ATTENTION_SHAPE
    )
    done = run(NO_REFERENCE + code, block)
    assert done.returncode == 0, done.stderr
    line, module, shape = done.stdout.splitlines()
    assert "; from your other lesson folders: attention (all);" in line
    assert "so they raise until you write them: tokens (all); embeddings (all)" in line
    assert module == "_lesson_folder_attention.attention" and shape == "(1, 3, 4)"


def test_at_build_time_the_chapters_get_the_reference() -> None:
    done = run(
        "from gpt.chapter.tokens import encode; print(encode.__module__)",
        ROOT,
        COURSE_CHAPTER_LESSONS="solutions",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["solutions.tokens"]  # and no line about whose


@pytest.fixture(scope="module")
def release_tree(tmp_path_factory) -> Path:
    """The lessons of a student who finished every lesson: their exercises/ (here the
    reference's code under that name), and no solutions/ (the runs also block the import)."""
    tree = tmp_path_factory.mktemp("release") / "course"
    shutil.copytree(
        ROOT / "solutions", tree / "exercises", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tree


PAGES = [
    path.relative_to(ROOT / "course").as_posix()
    for path in CHAPTERS
    if '```python exec="on"' in path.read_text(encoding="utf-8")
]


# Every page's exec'd blocks, each page in a namespace of its own, in one process (a process
# per page would import torch thirteen times): each page's output, its error, and whose
# lessons gpt.chapter gave it.
PAGES_DRIVER = """
import contextlib, io, json, sys, traceback
pages = json.load(open(sys.argv[1]))
results = {}
for page, source in pages.items():
    out = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, page, "exec"), {"__name__": "__main__"})
    except BaseException:
        error = traceback.format_exc()[-3000:]
    chapter = sys.modules.get("gpt.chapter")
    results[page] = {"stdout": out.getvalue(), "error": error,
                     "lessons": chapter.lessons.package if chapter else None}
json.dump(results, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def pages_run(release_tree: Path, tmp_path_factory) -> dict[str, dict]:
    """The pages' code run in the release tree, as their notebooks run it, without solutions/."""
    folder = tmp_path_factory.mktemp("pages")
    sources = {
        page: "\n".join(
            cell.source
            for cell in notebooks_hook().parse_cells(
                (ROOT / "course" / page).read_text(encoding="utf-8")
            )
        )
        for page in PAGES
    }
    (folder / "pages.json").write_text(json.dumps(sources))
    code = f"{NO_REFERENCE}{PAGES_DRIVER}"
    done = run(code, release_tree, str(folder / "pages.json"), str(folder / "results.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((folder / "results.json").read_text())
    for page, source in sources.items():
        results[page]["imports_lessons"] = "gpt.chapter" in source
    return results


@pytest.mark.parametrize("page", PAGES)
def test_every_chapters_code_runs_without_the_reference(pages_run: dict, page: str) -> None:
    """The page's exec'd blocks, in order, as its notebook runs them: with no solutions/ to
    import, they run on the student's package through gpt.chapter."""
    result = pages_run[page]
    assert result["error"] is None, f"{page}:\n{result['error']}"
    if result["imports_lessons"]:
        assert result["lessons"] == "exercises", "not theirs"


def test_the_line_says_whose_lessons_the_pages_use(pages_run: dict) -> None:
    printed = "".join(pages_run[page]["stdout"] for page in PAGES)
    assert printed.count("gpt.chapter: your lessons (exercises)\n") == 1, "once, on first import"


def test_chapter_9s_offline_check_of_a_loader_gives_transformers_logits() -> None:
    """The block that chapter 9 shows, not runs (``transformers`` is the tests' dependency):
    the reference loader reads a tiny GPT-2 saved by transformers into logits equal to its."""
    pytest.importorskip("transformers")
    text = (ROOT / "course/chapters/09-generation.md").read_text(encoding="utf-8")
    section = text[text.index("{#offline-check}") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    done = run(block, ROOT, COURSE_CHAPTER_LESSONS="solutions")
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"largest logit difference: (\S+)", done.stdout)
    assert found and float(found.group(1)) < 1e-5, done.stdout
