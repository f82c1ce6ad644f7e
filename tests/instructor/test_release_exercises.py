"""The release ships only generated stubs: exercises/ filled with the solutions, as
an instructor trying the course would, makes it refuse in one line, and nothing ships."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_repository_exercises_are_the_generated_stubs():
    from instructor.release import stale_exercises

    assert stale_exercises() == []


def test_solutions_copied_into_exercises_release_nothing(tmp_path, monkeypatch):
    from core.manifest import load_manifest
    from instructor import release
    from instructor.course import Course

    tree = tmp_path / "tree"
    for folder in ("solutions", "tools", "course"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("chapters"))
    shutil.copytree(ROOT / "solutions", tree / "exercises")  # the solutions, markers and all
    monkeypatch.setattr(release, "ROOT", tree)
    course = Course.at(tmp_path / "course")
    with pytest.raises(ValueError) as refused:
        release.build_source(course, load_manifest(), ["objective"])
    message = str(refused.value)
    assert "\n" not in message and "nothing was released" in message
    assert "objective.py" in message and "embeddings.py" in message
    assert not course.source.exists() or not any(course.source.iterdir())
