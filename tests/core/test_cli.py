"""Every command line: bad input is one line and status 2, never a traceback or a usage block;
the instructors' commands exit with the documented codes."""

from __future__ import annotations

import importlib

import pytest

# (module with main(argv), argv, text the one line holds)
BAD_INPUT = [
    ("gpt.train", ["--steps", "abc"], "invalid int value: 'abc'"),
    ("gpt.train", ["--lr", "-1"], "--lr -1.0 must be greater than 0"),
    ("gpt.train", ["--dropout", "1"], "--dropout 1.0 must be at least 0 and less than 1"),
    ("gpt.train", ["--min-lr", "1"], "--min-lr 1.0 must be at least 0 and at most --lr"),
    ("gpt.train", ["--val-fraction", "0"], "--val-fraction 0.0 must be greater than 0"),
    ("gpt.generate", ["--top-k", "x"], "invalid int value: 'x'"),
    ("gpt.generate", ["--max-new-tokens", "-1"], "--max-new-tokens must be at least 0"),
    ("graders.__main__", ["--nosuch"], "unrecognized arguments: --nosuch"),
    ("graders.__main__", ["nosuchlesson"], "nosuchlesson"),
    ("graders.__main__", ["--watch", "--strict"], "leave it out with --watch"),
    ("graders.__main__", ["--watch", "nosuchlesson"], "nosuchlesson"),
    ("gpt.compare", ["--nosuch"], "unrecognized arguments: --nosuch"),
    ("live.course_server", ["--port", "x"], "invalid int value: 'x'"),
    ("instructor.__main__", ["release", "--nosuch"], "unrecognized arguments"),
]


@pytest.mark.parametrize(("module", "argv", "says"), BAD_INPUT, ids=lambda v: str(v)[:30])
def test_bad_input_is_one_line_and_status_2(module, argv, says, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing a command might write lands in the repository
    main = importlib.import_module(module).main
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    err = capfd.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and says in err, err


@pytest.fixture
def instructor(monkeypatch, tmp_path):
    """The instructor CLI on an empty course whose one lesson is released, and collect stubbed
    to return what the test sets in ``said["problems"]``."""
    pytest.importorskip("nbgrader", reason="the grading extra (nbgrader) is not installed")
    from instructor import __main__ as cli
    from instructor import collect
    from instructor.course import Course

    said = {"problems": []}
    monkeypatch.setattr(Course, "lessons", lambda self: ["embeddings"])
    monkeypatch.setattr(collect, "collect", lambda course, lessons: ({}, said["problems"], []))
    return lambda *argv: cli.main(["--course", str(tmp_path), *argv]), said, cli


def test_release_of_an_unknown_lesson_is_one_line(instructor, capsys):
    run, _, cli = instructor
    assert run("release", "nosuchlesson") == cli.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown lesson 'nosuchlesson'" in err, err


def test_a_skipped_submission_is_status_0_or_3_under_strict(instructor, capsys):
    run, said, cli = instructor
    assert run("collect") == cli.OK
    said["problems"] = ["downloaded/embeddings/archive/x.zip: not a zip file; skipped"]
    assert run("collect") == cli.OK
    assert run("collect", "--strict") == cli.SKIPPED == 3
    assert "not a zip file" in capsys.readouterr().err
    assert run("collect", "nosuchlesson") == cli.USAGE
    assert (cli.OK, cli.FAILED, cli.USAGE, cli.SKIPPED) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("points", "complete", "strict", "status"),
    [(3, True, False, 0), (2, True, False, 0), (2, True, True, 1), (3, False, True, 1),
     (3, True, True, 0)],
)  # fmt: skip
def test_grading_that_ran_is_0_unless_strict_and_a_check_failed(
    points, complete, strict, status, monkeypatch, tmp_path
):
    from graders import __main__ as cli
    from graders import runner, terminal

    graded = {"complete": complete, "points": points, "max_points": 3, "lessons": []}
    monkeypatch.setattr(runner, "grade", lambda *args, **kwargs: graded)
    monkeypatch.setattr(terminal, "render_total", lambda console, got: None)
    argv = ["embeddings", "--json", str(tmp_path / "r.json")] + (["--strict"] if strict else [])
    assert cli.main(argv) == status


@pytest.mark.parametrize(
    ("module", "argv"),
    [("graders.__main__", ["embeddings"]), ("instructor.__main__", ["release"])],
)
def test_grading_without_fork_is_one_line_naming_wsl2(module, argv, monkeypatch, capfd, tmp_path):
    monkeypatch.delattr("os.fork")  # as on Windows
    main = importlib.import_module(module).main
    assert main([*argv, "--course", str(tmp_path)] if "instructor" in module else argv) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "WSL2" in err and "fork" in err, err


def test_a_long_error_line_is_shortened_at_a_word_end():
    from core.cli import one_line

    said = one_line(OSError("cannot reach the scheduler " + "somewhere " * 60), limit=40)
    assert said == "OSError: cannot reach the scheduler somewhere …"
    assert one_line(ValueError("short")) == "ValueError: short"
