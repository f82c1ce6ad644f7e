"""A released lesson folder is a product of its own: a virtualenv built from nothing but its
requirements.txt and the install lines the file names grades the reference to full marks,
through the notebook and through the command the release tells students to run.

Offline here: pip resolves from this machine's own configuration (its find-links and indexes);
PyTorch's CPU index, which the file names, is unreachable, and pip goes on without it
(PIP_RETRIES=0: no waiting on it). What that index would give, a CPU build of torch, is then
the one this machine keeps in pip's find-links, pinned by a constraint: the test's stand-in for
the index, never a change to the file. Without such a wheel pip would take a CUDA build, which
the test refuses (torch's version must end in +cpu)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.instructor_commands import ROOT, manifest  # noqa: E402

pytestmark = pytest.mark.slow
LESSON, MODULE = "windows", "windows"


def _install_lines(requirements: str) -> list[list[str]]:
    """The pip commands requirements.txt's first lines name (``#   pip install ...``)."""
    lines = re.findall(r"^#\s+pip install (.+)$", requirements, re.M)
    assert lines, requirements
    return [line.split() for line in lines]


def _cpu_torch_constraint(folder) -> list[str]:
    """``-c FILE`` pinning torch to the CPU wheel in pip's find-links, if this machine has one."""
    for links in os.environ.get("PIP_FIND_LINKS", "").split():
        for wheel in sorted(Path(links).glob("torch-*+cpu-*.whl")) if Path(links).is_dir() else []:
            version = wheel.name.split("-")[1]
            path = folder.parent / "cpu-torch.txt"
            path.write_text(f"torch=={version}\n")
            return ["-c", str(path)]
    return []


@pytest.fixture(scope="module")
def student(released_course, tmp_path_factory):
    """The lesson folder as a student has it, with the reference module as their own, and a
    virtualenv made from its requirements alone."""
    home = tmp_path_factory.mktemp("student")
    folder = home / LESSON
    shutil.copytree(released_course / "release" / LESSON, folder)
    shutil.copyfile(ROOT / "solutions" / f"{MODULE}.py", folder / "exercises" / f"{MODULE}.py")
    venv = home / "venv"
    # The install lines run with the test environment's pip, into the venv (pip --python: pip
    # runs under the venv's interpreter, so markers and tags are the venv's), not with the pip
    # that venv bundles (ensurepip): nothing here uses pip from inside the venv, and the bundled
    # one is old; on the release's requirements.txt, measured, Python 3.11.7's venv with its
    # pip 23.2.1 took 3.6 CPU-s to make and 25.3 to install (most of it evaluating every file
    # on the indexes' pages), a venv without pip 0.04 and pip 26.3 --python 13.9.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env |= {"PIP_RETRIES": "0", "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    here = _cpu_torch_constraint(folder)
    # --no-compile: pip would byte-compile every module of torch, jupyterlab and the rest (half
    # the install's processor time: 49 CPU-s with, 26 without, measured); Python compiles what
    # the gradings import when they import it, and nothing here is about .pyc files.
    for words in _install_lines((folder / "requirements.txt").read_text()):
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile"]
            + [*here, *words],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return folder, python, env


def _grades_to_full_marks(python: str, folder: Path, lesson: str, env: dict) -> None:
    """``python -m graders LESSON`` in ``folder``, as the release tells students to run it:
    every public point of the lesson."""
    done = subprocess.run(
        [python, "-m", "graders", lesson, "--json", "report.json"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((folder / "report.json").read_text())
    assert report["complete"], done.stdout
    most = manifest().lesson(lesson).max_points(hidden=False)
    assert report["points"] == report["max_points"] == most > 0, done.stdout


def test_the_command_the_release_names_grades_the_reference_to_full_marks(student):
    folder, python, env = student
    _grades_to_full_marks(python, folder, LESSON, env)
    # The installed torch's version, read from its metadata (importing torch for it is three
    # seconds of CPU): PyTorch's CPU build, not PyPI's CUDA one.
    torch = subprocess.run(
        [python, "-c", "from importlib.metadata import version; print(version('torch'))"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert "+cpu" in torch.stdout, torch.stdout + torch.stderr


def test_the_block_lesson_alone_grades_to_full_marks_in_the_same_environment(
    student, released_course
):
    """Lesson 5's folder with the reference block.py and lessons 2 and 4 as released (stubs):
    in the environment its requirements make, the checker's stand-ins answer attention and
    lookup, so every public point is the block lesson's own (test_release.py grades the same
    folder through the notebook's check() cells, and an honest block.py both ways)."""
    _, python, env = student
    folder = student[0].parent / "block"
    shutil.copytree(released_course / "release" / "block", folder)
    shutil.copyfile(ROOT / "solutions" / "block.py", folder / "exercises" / "block.py")
    assert "NotImplementedError" in (folder / "exercises" / "attention.py").read_text()
    _grades_to_full_marks(python, folder, "block", env)


def test_the_notebook_grades_the_reference_to_full_marks(student):
    import nbformat

    folder, python, env = student
    done = subprocess.run(
        [
            python,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--ExecutePreprocessor.timeout=900",
            "--output",
            "executed.ipynb",
            f"{LESSON}.ipynb",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    notebook = nbformat.read(folder / "executed.ipynb", as_version=4)
    earned = most = 0.0
    for cell in notebook.cells:
        points = cell.metadata.get("nbgrader", {}).get("points")
        if points is None or "check(" not in cell.source:
            continue  # instructions, setup, and hidden checks (the release strips their call)
        said = "".join(o.get("text", "") for o in cell.outputs)
        results = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert results, (cell.source, said)
        earned += float(results[0].data["text/plain"])
        most += points
        assert said.startswith("✓"), said
    assert most > 0 and earned == most
    assert (folder / f"{LESSON}-submission.zip").is_file()  # the last cell wrote it


def test_a_package_missing_from_the_environment_is_one_line_on_what_to_install(student):
    folder, python, env = student
    blocked = "import sys; sys.modules['hypothesis'] = None; import runpy; "
    blocked += "sys.argv = ['graders', 'windows']; runpy.run_module('graders', run_name='__main__')"
    done = subprocess.run(
        [python, "-c", blocked], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "'hypothesis'" in line and "pip install -r requirements.txt" in line
