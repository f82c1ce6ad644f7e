"""graders/seed.py: the grading run's seed, from the environment or from a file."""

from __future__ import annotations

import os

import pytest

from graders.seed import PUBLIC_SEED, SEED_VARIABLE, seed_from_environment, seed_from_file


def test_the_environment_gives_the_seed_once(monkeypatch):
    monkeypatch.setenv(SEED_VARIABLE, " 42\n")
    assert seed_from_environment() == 42
    assert SEED_VARIABLE not in os.environ  # no process started later inherits it
    assert seed_from_environment() == PUBLIC_SEED


def test_a_file_gives_the_seed(tmp_path, monkeypatch):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    path = tmp_path / "seed"
    path.write_text("9007199254740993\n")
    assert seed_from_file(path) == 9007199254740993


@pytest.mark.parametrize(
    ("text", "variable", "message"),
    [
        ("7", "8", "give the seed once: --seed-file .* or COURSE_INPUT_SEED, not both"),
        ("seven", None, "the seed in .* must be an integer, not 'seven'"),
        (None, None, "--seed-file .*: No such file or directory"),
    ],
)
def test_a_bad_seed_file_is_one_line(tmp_path, monkeypatch, text, variable, message):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    if variable is not None:
        monkeypatch.setenv(SEED_VARIABLE, variable)
    path = tmp_path / "seed"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match=message):
        seed_from_file(path)
    assert SEED_VARIABLE not in os.environ
