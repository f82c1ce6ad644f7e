"""The instructor tooling's setup, without grading anything: the gradebook's URL, nbgrader's
options and the kernels' environment."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")

ROOT = Path(__file__).resolve().parents[2]


def test_configuring_nbgrader_leaves_this_process_environment_alone(tmp_path):
    """configure() sets options only; the kernels get their environment when they start."""
    from traitlets.config import Config

    from instructor.kernel import CourseExecute
    from instructor.nbgrader_settings import configure

    before = dict(os.environ)
    config = configure(Config(), tmp_path / "course")
    assert dict(os.environ) == before
    assert config.Autograde.autograde_preprocessors[0] is CourseExecute


def test_kernels_get_a_safe_path_and_the_project_first(monkeypatch):
    from instructor.kernel import kernel_environment

    env = kernel_environment({"PYTHONPATH": os.pathsep.join(["/elsewhere", str(ROOT)]), "A": "b"})
    assert env["PYTHONSAFEPATH"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]
    assert env["A"] == "b"
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    assert kernel_environment()["PYTHONSAFEPATH"] == "1"
    assert "PYTHONSAFEPATH" not in os.environ


@pytest.mark.parametrize("path", ["async", "sync"])
def test_each_kernel_starts_with_the_course_environment(monkeypatch, path):
    """The Execute step hands the environment to nbclient's kernel start, by both of
    nbclient's paths: nbconvert's ``preprocess`` (so ``nbgrader autograde``) takes the
    synchronous one."""
    import asyncio

    from nbclient import NotebookClient

    from instructor.kernel import CourseExecute

    seen = {}

    async def start(self, **kwargs):
        seen.update(kwargs)

    monkeypatch.setattr(NotebookClient, "async_start_new_kernel", start)
    if path == "async":
        asyncio.run(CourseExecute().async_start_new_kernel(cwd="/tmp"))
    else:
        CourseExecute().start_new_kernel(cwd="/tmp")
    assert seen["cwd"] == "/tmp"
    assert seen["env"]["PYTHONSAFEPATH"] == "1"
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def test_the_gradebook_is_given_once_and_remembered(tmp_path, monkeypatch):
    """--gradebook, else $COURSE_GRADEBOOK_URL, else the one release remembered (a file only
    its owner reads: the URL may hold a password), else the course's SQLite file."""
    from instructor.course import Course
    from instructor.gradebook_url import GRADEBOOK_ENV, REMEMBERED, remember, shown

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    root = tmp_path / "course"
    root.mkdir()
    assert Course.at(root).db_url == f"sqlite:///{root / 'gradebook.db'}"
    url = "postgresql+psycopg://grader:s3cret@db.example/course"
    remember(root, url)
    assert stat.S_IMODE((root / REMEMBERED).stat().st_mode) == 0o600
    assert Course.at(root).db_url == url
    assert "s3cret" not in shown(url) and "db.example/course" in shown(url)
    monkeypatch.setenv(GRADEBOOK_ENV, "sqlite:///elsewhere.db")
    assert Course.at(root).db_url == "sqlite:///elsewhere.db"
    assert Course.at(root, "sqlite:///given.db").db_url == "sqlite:///given.db"
    monkeypatch.delenv(GRADEBOOK_ENV)
    remember(root, f"sqlite:///{root / 'gradebook.db'}")  # back to the default: forgotten
    assert not (root / REMEMBERED).exists()


def test_switching_to_an_empty_gradebook_says_what_to_do(tmp_path):
    from instructor.gradebook_url import GradebookError, check_gradebook

    with pytest.raises(GradebookError) as refused:
        check_gradebook(f"sqlite:///{tmp_path / 'new.db'}", "c", {"embeddings"}, ["embeddings"])
    said = str(refused.value)
    assert "\n" not in said
    assert "release into it" in said and "copy the old gradebook's data" in said


def test_the_command_runs_one_function_per_command():
    from instructor import __main__ as cli

    assert set(cli.COMMANDS) == {
        "release",
        "collect",
        "autograde",
        "regrade",
        "feedback",
        "export",
        "report",
        "gradescope",
        "similarity",
        "grade-submission",
    }
    assert all(callable(f) for f in cli.COMMANDS.values())
    assert sys.modules["instructor.__main__"] is cli


def test_csv_cells_that_start_like_formulas_stay_text(tmp_path):
    """Every CSV of the course goes through one writer: a cell a spreadsheet would run as a
    formula gets an apostrophe, numbers stay numbers, and a carriage return cannot end a row."""
    import csv

    from instructor.export import write_csv

    cells = ["=1+1", "+1+1", "-x", "@SUM(A1)", "\tTab", "\rReturn", "-2", "-0.5", "ann", "a\r\nb"]
    path = tmp_path / "out.csv"
    write_csv(path, ["value"], iter({"value": text} for text in cells))
    with path.open(newline="") as f:
        read = [row["value"] for row in csv.DictReader(f)]
    assert read == [
        "'=1+1",
        "'+1+1",
        "'-x",
        "'@SUM(A1)",
        "'\tTab",
        "'\nReturn",
        "-2",
        "-0.5",
        "ann",
        "a\nb",
    ]
