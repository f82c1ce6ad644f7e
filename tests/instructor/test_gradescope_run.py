"""The Gradescope runner (instructor/gradescope_run.py): results.json from the harness's
report, the checker's secrets locked, and a clear "not graded" where the student's code cannot
be isolated (the whole zip deployed: test_gradescope.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from instructor import gradescope_run
from instructor.gradescope_run import results

ROOT = Path(__file__).resolve().parents[2]
SITE = "https://course.example.org/gpt/"


def _row(**fields) -> dict:
    row = {
        "id": "a",
        "function": "f",
        "points": 0,
        "max_points": 2,
        "passed": False,
        "hint": "off by one",
        "link": "chapters/02-x.md#f",
        "url": "chapters/02-x/#f",
        "detail": "returned tensor([1]); expected tensor([2])",
        "hidden": False,
    }
    return row | fields


def test_a_public_failure_keeps_its_hint_detail_and_an_absolute_link():
    report = {"complete": True, "lessons": [{"import_error": None, "checks": [_row()]}]}
    assert results(report, SITE) == {
        "tests": [
            {
                "name": "a (f)",
                "score": 0,
                "max_score": 2,
                "output": "off by one\nreturned tensor([1]); expected tensor([2])\n"
                f"Read: {SITE}chapters/02-x/#f",
                "visibility": "visible",
            }
        ],
        "stdout_visibility": "hidden",
    }


def test_a_hidden_check_never_shows_its_detail():
    """Even a report that carried one (the harness leaves it out already): the hidden check
    shows after publication, with its hint and section only."""
    hidden = _row(id="b", hidden=True, detail="expected tensor([7])")
    passed = _row(id="c", hidden=True, passed=True, points=2, hint=None, detail=None)
    report = {"lessons": [{"checks": [hidden, passed]}]}
    first, second = results(report, SITE)["tests"]
    assert first["visibility"] == "after_published" and "7" not in first["output"]
    assert first["output"] == f"off by one\nRead: {SITE}chapters/02-x/#f"
    assert second["output"] == f"Read: {SITE}chapters/02-x/#f" and second["score"] == 2


def test_an_import_error_and_a_cut_run_are_said_once():
    report = {
        "complete": False,
        "lessons": [{"import_error": "x.py, line 3: NameError: y", "checks": [_row()]}],
    }
    said = results(report, None)
    assert "failed to import" in said["output"] and "NameError: y" in said["output"]
    assert "stopped before every check was graded" in said["output"]
    assert said["tests"][0]["output"].endswith("Read: chapters/02-x/#f")  # no site: as given


def test_lock_secrets_leaves_them_to_their_owner(tmp_path):
    (tmp_path / "graders").mkdir(mode=0o755)
    (tmp_path / "graders" / "secret" / "oracles").mkdir(parents=True)
    (tmp_path / "graders" / "secret" / "oracles" / "x.py").write_text("X = 1\n")
    (tmp_path / "graders" / "hidden").mkdir()
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "lessons.toml").write_text("")
    (tmp_path / "gpt").mkdir(mode=0o755)
    locked = gradescope_run.lock_secrets(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in locked} == set(gradescope_run.LOCKED)
    for path in tmp_path.rglob("*"):
        mode = path.stat().st_mode & 0o777
        if path.name in ("gpt", "graders"):  # what the worker reads, and the public harness
            assert mode == 0o755
        else:
            assert mode == (0o700 if path.is_dir() else 0o600), path


def test_no_isolation_means_not_graded_and_says_why(unpack, tmp_path, monkeypatch):
    """No bwrap on PATH, and not root (so no switch to the unprivileged user): nothing is
    graded, and results.json says why and that it is not the student's doing."""
    autograder = unpack("unisolated")
    (autograder / "submission" / "embeddings.py").write_text("raise SystemExit\n")
    monkeypatch.setattr(gradescope_run, "SOURCE", autograder / "source")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AUTOGRADER_ROOT", str(autograder))
    monkeypatch.setattr(gradescope_run.os, "geteuid", lambda: 1000)
    assert gradescope_run.main([]) == 0
    said = json.loads((autograder / "results" / "results.json").read_text())
    assert said["score"] == 0 and said["tests"] == []
    assert said["output"].startswith("Not graded: the student's code cannot be run isolated")
    assert "bubblewrap is not installed" in said["output"]
    assert "the autograder does not run as root" in said["output"]
    assert "not of your submission" in said["output"]


def test_the_probe_refuses_a_secret_the_user_can_read(student_user, student_python, open_folder):
    """A secret left readable (a file of mode 0644) is named, and the fallback refused; once
    it is root's alone (0600), the probe passes."""
    secret = open_folder / "seed"
    secret.write_text("1\n")
    code = (
        "import sys; from pathlib import Path; from instructor.gradescope_run import probe_user; "
        "print(probe_user([Path(sys.argv[1])], [Path(sys.argv[2])]))"
    )
    said = {}
    for mode in (0o644, 0o600):
        secret.chmod(mode)
        done = subprocess.run(
            [student_python, "-c", code, str(open_folder), str(secret)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        said[mode] = done.stdout.strip()
    assert said == {
        0o644: f"user {student_user} can read {secret}, which must be root's alone",
        0o600: "None",
    }


def test_setup_refuses_python_older_than_311():
    assert gradescope_run.python_version((3, 11, 4)) == "3.11.4"
    with pytest.raises(RuntimeError, match="3.10.12: setup.sh installs 3.11"):
        gradescope_run.python_version((3, 10, 12))
