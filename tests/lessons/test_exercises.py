"""exercises/ is generated from solutions/ and must never drift from it."""

from __future__ import annotations

import ast
import importlib
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import generate_exercises  # noqa: E402


def test_committed_exercises_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "tools/generate_exercises.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_changed_docstring_makes_the_check_fail(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copytree(ROOT / "course", tmp_path / "course", ignore=shutil.ignore_patterns("*.md"))
    path = tmp_path / "solutions" / "embeddings.py"
    path.write_text(path.read_text().replace("Read the rows", "Fetch the rows"))
    rendered = generate_exercises.render(tmp_path)
    assert rendered["embeddings.py"] != (ROOT / "exercises" / "embeddings.py").read_text()
    assert rendered["tokens.py"] == (ROOT / "exercises" / "tokens.py").read_text()


def _signatures(path: Path) -> dict[str, tuple[str, str | None]]:
    tree = ast.parse(path.read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            args = ast.unparse(node.args) if isinstance(node, ast.FunctionDef) else ""
            found[node.name] = (args, ast.get_docstring(node))
    return found


@pytest.mark.parametrize("module", sorted(generate_exercises.load_lessons()))
def test_stubs_keep_names_signatures_and_docstrings(module: str) -> None:
    ours = _signatures(ROOT / "exercises" / f"{module}.py")
    assert ours == _signatures(ROOT / "solutions" / f"{module}.py")
    lesson = generate_exercises.load_lessons()[module]
    for name in lesson.functions:
        assert ours[name][1], f"{module}.{name} has no teaching docstring"


@pytest.mark.parametrize("module", sorted(generate_exercises.load_lessons()))
def test_every_exercise_raises_not_implemented_naming_its_lesson(module: str) -> None:
    lesson = generate_exercises.load_lessons()[module]
    source = (ROOT / "exercises" / f"{module}.py").read_text()
    assert "# BEGIN SOLUTION" not in source
    stubs = source.count("raise NotImplementedError(")
    assert stubs >= len(lesson.functions)
    assert f"lesson {lesson.number}" in source
    exercises_module = importlib.import_module(f"exercises.{module}")
    first = getattr(exercises_module, lesson.functions[0])
    if isinstance(first, type):
        return  # classes fail on construction; covered by the graders' zero-score test
    with pytest.raises(NotImplementedError, match=f"lesson {lesson.number}"):
        params = inspect.signature(first).parameters.values()
        first(**{p.name: None for p in params if p.default is inspect.Parameter.empty})


def test_exercises_hold_only_the_lessons_and_the_provided_code_is_gpt() -> None:
    lessons = sorted(generate_exercises.load_lessons())
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.py")) == sorted(
        [*lessons, "__init__"]
    )
    assert sorted(p.stem for p in (ROOT / "solutions").glob("*.py")) == sorted(
        [*lessons, "__init__"]
    )


def test_provided_code_in_solutions_is_refused(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copytree(ROOT / "course", tmp_path / "course", ignore=shutil.ignore_patterns("*.md"))
    (tmp_path / "solutions" / "helpers.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="helpers.py is no lesson.*belongs in gpt/"):
        generate_exercises.render(tmp_path)


def test_lessons_load_by_name_or_folder_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    from gpt.lessons import LessonsError, load

    assert load("solutions").training.lr_at.__module__ == "solutions.training"
    copy = tmp_path / "mine"
    shutil.copytree(ROOT / "exercises", copy)
    assert load(copy).windows.__file__ == str(copy / "windows.py")
    broken = tmp_path / "broken"
    shutil.copytree(ROOT / "exercises", broken)
    (broken / "packing.py").write_text("def pack(:\n")
    with pytest.raises(LessonsError, match=r"cannot import broken\.packing: SyntaxError"):
        load(broken)
    with pytest.raises(LessonsError, match="not a lesson package"):
        load(tmp_path / "nowhere")
