"""graders/submission.py and ``python -m graders LESSON --zip``: a submission is the lesson's
module and its notebook, nothing else."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from graders.submission import SubmissionError, make_submission

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _lesson_folder(folder):
    """What a released lesson folder holds, in short: the package, the provided code, the
    graders, a report the student's gradings left."""
    for sub in ("exercises", "gpt", "core", "graders", "build"):
        (folder / sub).mkdir(parents=True)
    (folder / "exercises" / "windows.py").write_text("def shift(ids):\n    return ids\n")
    (folder / "exercises" / "tokens.py").write_text("# another lesson's stub\n")
    (folder / "windows.ipynb").write_text("{}")
    (folder / "gpt" / "model.py").write_text("")
    (folder / "graders" / "runner.py").write_text("")
    (folder / "build" / "grading-report.json").write_text("{}")
    return folder


def test_the_zip_holds_the_module_and_the_notebook_only(tmp_path):
    path = make_submission("windows", _lesson_folder(tmp_path))
    assert path == tmp_path / "windows-submission.zip"
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["exercises/windows.py", "windows.ipynb"]
        assert archive.read("exercises/windows.py").startswith(b"def shift")
    assert make_submission("3", tmp_path) == path  # by number too


def test_a_folder_without_the_lesson_is_one_line(tmp_path):
    with pytest.raises(SubmissionError) as refused:
        make_submission("windows", tmp_path)
    said = str(refused.value)
    assert "\n" not in said and "exercises/windows.py" in said and "windows.ipynb" in said
    with pytest.raises(SubmissionError, match="nosuch"):
        make_submission("nosuch", tmp_path)


def test_the_command_line_writes_it_and_asks_for_one_lesson(tmp_path):
    folder = _lesson_folder(tmp_path / "windows")
    for name in ("graders", "core"):  # the command runs from the folder's own copy
        subprocess.run(["cp", "-r", str(ROOT / name), str(folder)], check=True)
    (folder / "course").mkdir()
    (folder / "course" / "lessons.toml").write_bytes(
        (ROOT / "course" / "lessons.toml").read_bytes()
    )
    run = [sys.executable, "-m", "graders"]
    done = subprocess.run([*run, "windows", "--zip"], cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "windows-submission.zip" in done.stdout and "submit this file" in done.stdout
    assert (folder / "windows-submission.zip").is_file()
    twice = subprocess.run([*run, "windows", "tokens", "--zip"], cwd=folder, capture_output=True)
    assert twice.returncode == 2 and b"python -m graders LESSON --zip" in twice.stderr
