"""Instructor tooling: nbgrader release, sandboxed parallel autograde, feedback and export.

The end-to-end test releases one lesson, submits a fake class (correct, untouched, partial and
hostile submissions, one of them as a zip), autogrades it through the real commands and
asserts every student's exact score from the gradebook. Every hostile submission is bounded
(at most 5 GiB, 200 processes, 40 MiB of output) and is built so that it *earns points only if
the defence it probes is broken*: a broken sandbox fails the test instead of taking the
machine down.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
# nbformat is imported in the tests that use it: at module level, every pytest-xdist worker
# would spend a second on it while collecting.
from borrower import borrowing_module  # noqa: E402
from system_packages import require  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_bwrap = pytest.mark.usefixtures("bubblewrap")


def manifest():
    from core.manifest import load_manifest

    return load_manifest()


def instructor(course: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "instructor", "--course", str(course), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def instructor_here(capfd: pytest.CaptureFixture, course: Path, *args: str) -> tuple[int, str, str]:
    """An instructor command run in this process (:func:`instructor.__main__.main`, as the
    command line runs it, without a second of interpreter start-up): its exit status, and
    what it printed to standard output and to standard error."""
    from instructor.__main__ import main

    capfd.readouterr()  # what came before is not the command's
    status = main(["--course", str(course), *args])
    out, err = capfd.readouterr()
    return status, out, err


# -- quick tests ----------------------------------------------------------------------------------


def test_public_manifest_has_no_hidden_checks():
    import tomllib

    from instructor.release import public_manifest

    text = public_manifest()
    data = tomllib.loads(text)
    full = manifest()
    for lesson in data["lesson"]:
        ids = [c["id"] for c in lesson.get("check", [])]
        expected = [c.id for c in full.lesson(lesson["slug"]).checks if not c.hidden]
        assert ids == expected
    public_hints = {c.hint for c in full.checks if not c.hidden}
    for check in full.checks:
        if check.hidden:
            assert check.id not in text
            assert check.hint in public_hints or check.hint not in text


def test_release_ships_by_folder_so_a_new_secret_module_stays_home(tmp_path):
    """What ships is a rule about folders: a module planted in graders/secret/ (or hidden/)
    never ships, one planted beside the harness does, and of graders/public/ only the
    lesson's own graders go."""
    from instructor.release import released_grader_files

    graders = tmp_path / "graders"
    shutil.copytree(ROOT / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    (graders / "secret" / "new_answers.py").write_text("ANSWER = 42\n")
    (graders / "secret" / "deep").mkdir()
    (graders / "secret" / "deep" / "more.py").write_text("ANSWER = 43\n")
    (graders / "hidden" / "test_new.py").write_text("def test_x():\n    pass\n")
    (graders / "harness_helper.py").write_text("HELP = 1\n")
    lesson = manifest().lesson("objective")
    shipped = set(released_grader_files(lesson, graders))
    assert "harness_helper.py" in shipped and "worker/serving.py" in shipped
    assert "public/test_objective.py" in shipped and "public/test_tokens.py" not in shipped
    assert not {name for name in shipped if name.startswith(("secret/", "hidden/"))}


def test_lesson_notebook_carries_the_manifest_points():
    from instructor.release import lesson_notebook

    lesson = manifest().lesson(LESSON)
    nb = lesson_notebook(lesson, "https://example.org/course/")
    graded = [c for c in nb.cells if c.metadata.nbgrader["grade"]]
    assert [c.metadata.nbgrader["points"] for c in graded] == [c.points for c in lesson.checks]
    ids = [c.metadata.nbgrader["grade_id"] for c in nb.cells]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # rebuild order = grade id order
    assert all(c.metadata.nbgrader["locked"] for c in nb.cells)
    for cell, check in zip(graded, lesson.checks, strict=True):
        assert f'check("{LESSON}", "{check.id}")' in cell.source
        if check.hidden:
            assert "### BEGIN HIDDEN TESTS" in cell.source
            assert check.id not in cell.metadata.nbgrader["grade_id"]
        else:
            assert "HIDDEN" not in cell.source
    assert "https://example.org/course/chapters/" in nb.cells[0].source


def test_collector_maps_zip_files_to_students():
    from instructor.collect import SubmissionCollector

    collect = SubmissionCollector().collect
    base = "/c/downloaded/embeddings/extracted"
    assert collect(f"{base}/ann/embeddings/exercises/embeddings.py") == {
        "student_id": "ann",
        "file_id": "exercises/embeddings.py",
    }
    assert collect(f"{base}/ann/embeddings.ipynb") == {
        "student_id": "ann",
        "file_id": "embeddings.ipynb",
    }
    lms = collect(f"{base}/hw_ben_attempt_2026-01-01/exercises/embeddings.py")
    assert lms["student_id"] == "ben"
    assert collect(f"{base}/ann/embeddings/graders/runner.py") is None
    assert collect(f"{base}/ann/notes.txt") is None


def test_hide_hidden_tests_keeps_only_the_score():
    import nbformat

    from instructor.preprocessors import HideHiddenTests

    cell = nbformat.v4.new_code_cell(
        "# hidden\n### BEGIN HIDDEN TESTS\ncheck('x', 'secret-check')\n### END HIDDEN TESTS"
    )
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="secret-check failed: secret hint"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "0"}, execution_count=1),
    ]
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "secret" not in json.dumps(cell)
    assert [o.output_type for o in cell.outputs] == ["execute_result"]


# -- end to end -----------------------------------------------------------------------------------


def _override(source: str, code: str) -> str:
    """The reference module with later definitions appended (they replace the earlier ones)."""
    return source + "\n\n# --- the student's version ---\n" + code


WRONG = "torch.zeros(1)"  # what a hostile function returns when the defence it probes held

# Hostile bodies; ``{ok}`` is the reference's answer, returned only if the defence failed.
HOSTILE = {
    # Never returns. It sleeps rather than spins: the limit is on wall-clock time, so a busy loop
    # ends alike (test_hostile's shift spins), and the wait leaves the cores to the other tests.
    "loop": "    import time\n    while True:\n        time.sleep(0.05)\n",
    "exit": "    import os\n    os._exit(0)\n",
    "segfault": "    import ctypes\n    return ctypes.string_at(0)\n",
    "memhog": (
        "    hog = torch.ones(5 << 30, dtype=torch.uint8)  # 5 GiB, past the 4 GiB cap\n"
        "    return {ok}\n"
    ),
    "forkflood": (  # at most 200 processes, once per worker
        "    import os, time\n"
        "    global _flooded\n"
        "    if globals().get('_flooded'):\n"
        f"        return {WRONG}\n"
        "    _flooded, kids = True, []\n"
        "    try:\n"
        "        for _ in range(200):\n"
        "            pid = os.fork()\n"
        "            if pid == 0:\n"
        "                time.sleep(30)\n"
        "                os._exit(0)\n"
        "            kids.append(pid)\n"
        "    except OSError:\n"
        f"        return {WRONG}\n"
        "    finally:\n"
        "        for pid in kids:\n"
        "            os.kill(pid, 9)\n"
        "            os.waitpid(pid, 0)\n"
        "    return {ok}\n"
    ),
    "output": "    print('x' * (40 << 20))  # 40 MiB: the harness allows 8 per call\n"
    "    return {ok}\n",
    "eq": "    return torch.zeros(1).as_subclass(Liar)\n",
    # wrong values and no gradient, with torch's comparisons patched to agree
    "patched": "    return ({ok} + 1).detach()\n",
    "reader": (
        "    for path in READABLE:\n"
        "        try:\n"
        "            with open(path, 'rb') as f:\n"
        "                f.read(1)\n"
        "            return {ok}  # a leak: earn the points\n"
        "        except OSError:\n"
        "            pass\n"
        f"    return {WRONG}\n"
    ),
    "writer": (
        "    import sqlite3\n"
        "    try:\n"
        "        db = sqlite3.connect(GRADEBOOK)\n"
        "        db.execute('UPDATE grade SET auto_score = 100')\n"
        "        db.commit()\n"
        "        return {ok}\n"
        "    except Exception:\n"
        "        pass\n"
        "    try:\n"
        "        open(FORGED, 'w').write('{{}}')\n"
        "        return {ok}\n"
        "    except OSError:\n"
        f"        return {WRONG}\n"
    ),
    "network": (
        "    import socket\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', PORT), timeout=2).close()\n"
        "        return {ok}\n"
        "    except OSError:\n"
        f"        return {WRONG}\n"
    ),
    "noisy": (  # correct: warnings and stderr must not cost a point
        "    import sys, warnings\n"
        "    warnings.warn('deprecated', DeprecationWarning)\n"
        "    print('noise on stderr', file=sys.stderr)\n"
        "    return {ok}\n"
    ),
}
PRELUDE = {
    "eq": "class Liar(torch.Tensor):\n"
    "    def __eq__(self, other):\n        return True\n"
    "    __hash__ = torch.Tensor.__hash__\n",
    "patched": "import torch.testing\n"
    "torch.allclose = lambda *a, **k: True\n"
    "torch.equal = lambda *a, **k: True\n"
    "torch.testing.assert_close = lambda *a, **k: None\n",
    "noisy": "import sys, warnings\nwarnings.warn('a module-level warning')\n"
    "print('noise at import', file=sys.stderr)\n",
}
# Students whose functions are hostile: {student: {function: kind}}. Each kind earns nothing
# unless what it attacks gives way, so the exact expected score is known.
CLASS = {
    # the loop on the function with the fewest checks: each of them waits out its time limit
    "crash": {"nearest": "loop", "one_hot_lookup": "exit", "add_positions": "segfault"},
    "limits": {"lookup": "memhog", "one_hot_lookup": "forkflood", "add_positions": "output"},
    "cheat": {"lookup": "patched", "one_hot_lookup": "eq"},
    "snoop": {"lookup": "reader", "one_hot_lookup": "writer", "add_positions": "network"},
    "noisy": {"lookup": "noisy", "nearest": "noisy"},
}


def hostile_module(reference: str, functions: dict[str, str], constants: str) -> str:
    code = [constants]
    for function, kind in functions.items():
        code.append(PRELUDE.get(kind, ""))
        code.append(
            f"_reference_{function} = {function}\n"
            f"def {function}(*args, **kwargs):\n"
            + HOSTILE[kind].format(ok=f"_reference_{function}(*args, **kwargs)")
        )
    return _override(reference, "\n".join(code))


HIJACK = """\
# A student's ipykernel_launcher.py: were the submission folder on the kernel's sys.path,
# nbgrader's kernel would be this file.
import os, runpy, sys
open({marker!r}, "w").write(os.getcwd())
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
runpy.run_module("ipykernel_launcher", run_name="__main__")
"""


def _as_jupyter_saves_it(nb) -> None:
    """nbformat 4.5, every cell with an id (new cells made by nbformat have one)."""
    nb.nbformat_minor = 5
    for i, cell in enumerate(nb.cells):
        cell.setdefault("id", f"cell-{i}")


def _tamper_cells(path: Path) -> None:
    """Added cells, an edited test cell, a deleted hidden cell, a fake check()."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    graded[0].source = "2"
    hidden = next(c for c in graded if "hidden" in c.metadata.nbgrader["grade_id"])
    nb.cells.remove(hidden)
    nb.cells.insert(2, nbformat.v4.new_code_cell("check = lambda lesson, check_id: 3"))
    nb.cells.append(nbformat.v4.new_code_cell("import os\nos.environ.clear()\n24"))
    _as_jupyter_saves_it(nb)
    nbformat.write(nb, path)


def _forge_metadata(path: Path) -> None:
    """A copy of a test cell's metadata on a cell of one's own; a new 100-point cell."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    meta = dict(graded[0].metadata.nbgrader, locked=False, points=50)
    nb.cells.append(nbformat.v4.new_code_cell("2", metadata={"nbgrader": meta}))
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "100",
            metadata={
                "nbgrader": {
                    "grade": True,
                    "grade_id": "c999-bonus",
                    "locked": False,
                    "points": 100,
                    "schema_version": 3,
                    "solution": False,
                    "task": False,
                }
            },
        )
    )
    for cell in graded[1:]:
        cell.metadata.nbgrader["points"] = 100
    _as_jupyter_saves_it(nb)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, listener):
    """Release LESSON, submit a fake class, autograde it; returns what the tests need."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    marker = course.parent / "hijacked"
    done = instructor(course, "release", LESSON)
    assert done.returncode == 0, done.stderr[-3000:]
    release = course / "release" / LESSON
    lesson = manifest().lesson(LESSON)
    full = lesson.max_points(hidden=True)
    points = {f: sum(c.points for c in lesson.checks if c.function == f) for f in lesson.functions}
    reference = (ROOT / "solutions" / "embeddings.py").read_text()

    def submit(student: str, module: str | None, folder: Path | None = None) -> Path:
        dest = folder or course / "submitted" / student / LESSON
        shutil.copytree(release, dest)
        if module is not None:
            (dest / "exercises" / "embeddings.py").write_text(module)
        return dest

    expected = {"correct": full, "stub": 0, "partial": full - points["nearest"]}
    submit("correct", reference)
    submit("stub", None)
    submit(
        "partial",
        _override(
            reference, "def nearest(table, index, k):\n    raise NotImplementedError('nearest')\n"
        ),
    )
    readable = [
        ROOT / "solutions" / "embeddings.py",
        ROOT / "graders" / "hidden" / f"test_{LESSON}.py",
        course / "gradebook.db",
        course / "source" / LESSON / f"{LESSON}.ipynb",
        course / "results",
    ]
    constants = (
        f"READABLE = {[str(p) for p in readable]!r}\n"
        f"GRADEBOOK = {str(course / 'gradebook.db')!r}\n"
        f"FORGED = {str(course / 'results' / 'forged.json')!r}\n"
        f"PORT = {listener}\n"
    )
    for student, functions in CLASS.items():
        submit(student, hostile_module(reference, functions, constants))
        lost = 0 if student == "noisy" else sum(points[f] for f in functions)
        expected[student] = full - lost
    # One submission attacks the grading's plumbing, not its checks: its notebook has cells
    # added, edited and deleted, and forged points; files to hijack the kernel's start; and
    # its module is a link to the solution. Each attack alone would earn points if it worked.
    tamper = submit("tamper", None)
    _tamper_cells(tamper / f"{LESSON}.ipynb")
    _forge_metadata(tamper / f"{LESSON}.ipynb")
    (tamper / "ipykernel_launcher.py").write_text(HIJACK.format(marker=str(marker)))
    (tamper / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('site')\n")
    (tamper / "exercises" / "embeddings.py").unlink()
    (tamper / "exercises" / "embeddings.py").symlink_to(ROOT / "solutions" / "embeddings.py")
    expected["tamper"] = 0
    # Nothing trusted runs in the sandboxed worker: borrowing finds nothing to call.
    submit("borrower", borrowing_module(lesson.module, lesson.functions, search_files=True))
    expected["borrower"] = 0
    # One student hands in a zip, collected by nbgrader zip_collect.
    staging = course.parent / "zoe"
    submit("zoe", reference, staging / LESSON)
    archive = course / "downloaded" / LESSON / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "zoe.zip", "w") as zf:
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(staging))
    expected["zoe"] = full

    done = instructor(course, "autograde", LESSON, "--workers", "2", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return {
        "course": course,
        "expected": expected,
        "full": full,
        "marker": marker,
        "lesson": lesson,
        "output": done.stdout + done.stderr,
        "points": points,
    }


def _gradebook(course: Path) -> dict[str, dict]:
    from nbgrader.api import Gradebook

    scores: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in gb.students:
            sub = gb.find_submission(LESSON, student.id)
            scores[student.id] = {
                "score": sub.score,
                "max": sub.max_score,
                "cells": {
                    g.name: (g.score, g.max_score) for nb in sub.notebooks for g in nb.grades
                },
            }
    return scores


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_gradebook_holds_each_students_exact_score(graded_class):
    scores = _gradebook(graded_class["course"])
    expected = graded_class["expected"]
    assert set(scores) == set(expected), graded_class["output"][-3000:]
    got = {student: scores[student]["score"] for student in expected}
    assert got == pytest.approx(expected), graded_class["output"][-3000:]
    lesson = graded_class["lesson"]
    for student, row in scores.items():
        assert row["max"] == graded_class["full"], student  # forged points changed nothing
        assert len(row["cells"]) == len(lesson.checks), student  # one grade per check
        assert "c999-bonus" not in row["cells"]
    assert not graded_class["marker"].exists(), "student code ran in the autograde kernel"
    assert not (graded_class["course"] / "results" / "forged.json").exists()


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_partial_credit_is_per_check(graded_class):
    """A hostile function costs its own checks and nothing else."""
    scores = _gradebook(graded_class["course"])
    lesson = graded_class["lesson"]
    for student, functions in CLASS.items():
        lost = set() if student == "noisy" else set(functions)
        for name, (score, most) in scores[student]["cells"].items():
            check = next((c for c in lesson.checks if name.endswith(c.id)), None)
            if check is None:  # a hidden check's cell, cNNN-hidden: judged by the total
                continue
            assert score == (0 if check.function in lost else most), (student, name)


def _hidden_texts(lesson) -> list[str]:
    """Text that identifies the hidden graders: check ids, hints, and their test code (what
    the public graders, the harness they run on and the public checks do not say as well)."""
    from instructor.release import public_manifest, released_grader_files

    public = "".join(path.read_text() for path in released_grader_files(lesson).values())
    public += public_manifest()
    texts = []
    for check in lesson.checks:
        if check.hidden:
            texts += [check.id, check.hint, *check.mistakes.values()]
    source = (ROOT / "graders" / "hidden" / f"test_{lesson.slug}.py").read_text()
    for line in source.splitlines():
        line = line.strip()
        if len(line) >= 30 and line not in public and not line.startswith(("from ", "import ")):
            texts.append(line)
    return [t for t in texts if t and t not in public]


def _solution_regions() -> dict[str, list[list[str]]]:
    """The reference's exercise bodies (between solution markers), per module, as lists of
    stripped code lines."""
    regions: dict[str, list[list[str]]] = {}
    for path in sorted((ROOT / "solutions").glob("*.py")):
        current = None
        for line in path.read_text().splitlines():
            text = line.strip()
            if text == "# BEGIN SOLUTION":
                current = []
            elif text == "# END SOLUTION":
                regions.setdefault(path.stem, []).append(current)
                current = None
            elif current is not None and text and not text.startswith("#"):
                current.append(text)
    return regions


def _leaks(text: str, regions: list[list[str]]) -> list[list[str]]:
    """Solution bodies found in ``text``: a whole body of two lines or more, or any three
    consecutive lines of one (single lines such as ``return table[ids]`` are what any correct
    oracle says too)."""
    lines = [t.strip() for t in text.splitlines() if t.strip() and not t.strip().startswith("#")]

    def contains(block: list[str]) -> bool:
        return any(lines[i : i + len(block)] == block for i in range(len(lines) - len(block) + 1))

    found = []
    for body in regions:
        if (len(body) >= 2 and contains(body)) or any(
            contains(body[i : i + 3]) for i in range(len(body) - 2)
        ):
            found.append(body)
    return found


def _texts(folder: Path) -> dict[Path, str]:
    return {p: p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()}


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()}


def _provided_lines() -> set[str]:
    """Lines of the packages students get anyway (exercises/: stubs; gpt/: provided code)."""
    paths = [*(ROOT / "exercises").glob("*.py"), *(ROOT / "gpt").glob("*.py")]
    return {line for path in paths for line in _lines(path.read_text())}


def _solution_lines() -> set[str]:
    """Distinctive single lines of the reference's exercise bodies: 20 characters or more, and
    not also a line of the provided code."""
    lines = {line for bodies in _solution_regions().values() for body in bodies for line in body}
    return {line for line in lines if len(line) >= 20} - _provided_lines()


def _implementation_lines() -> set[str]:
    """Distinctive lines of graders/secret/ (trusted.py, oracles.py), whose functions implement
    exercises: every line of 24 characters or more in a function's body (its signature,
    docstring and comments aside), less the lines of the provided code."""
    found = set()
    for path in sorted((ROOT / "graders" / "secret").rglob("*.py")):
        if path.name in ("dependencies.py", "__init__.py"):  # plumbing, not answers
            continue
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef):
                continue
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            for statement in body:
                for line in lines[statement.lineno - 1 : statement.end_lineno]:
                    text = line.strip()
                    if len(text) >= 24 and not text.startswith(("#", "def ", "@", '"""')):
                        found.add(text)
    return found - _provided_lines()


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_release_has_no_solutions_and_no_hidden_graders(graded_class):
    """Every released file: no hidden grader text, no body of this lesson's solution; and no
    solution of any lesson in the files the release itself generates (all but the harness)."""
    release = graded_class["course"] / "release"
    files = _texts(release)
    assert any(p.name == f"{LESSON}.ipynb" for p in files)
    assert not any("hidden" in p.relative_to(release).parts for p in files)
    secrets = _hidden_texts(graded_class["lesson"]) + ["BEGIN HIDDEN TESTS"]
    regions = _solution_regions()
    everything = [body for bodies in regions.values() for body in bodies]
    assert secrets and regions[graded_class["lesson"].module]
    for path, text in files.items():
        for secret in secrets:
            assert secret not in text, f"hidden grader text in {path}: {secret!r}"
        assert not _leaks(text, regions[graded_class["lesson"].module]), f"solution in {path}"
        harness = path.parent.name == "graders" or path.parent.name == "public"
        if not harness:
            assert not _leaks(text, everything), f"solution code in {path}"


@linux_only
@needs_bwrap
@pytest.mark.slow
@pytest.mark.slow
def test_release_harness_holds_no_solution_of_any_lesson(released_course):
    """Every file of every lesson's release (notebook, package, graders, recorded answers):
    no body of any lesson's solution (nor a distinctive line of one), no line of the trusted
    implementations or the oracles (which the release leaves out: the released checks replay
    recorded answers), and no hidden grader text."""
    release = released_course / "release"
    lessons = [lesson for lesson in manifest().lessons if lesson.checks]
    assert sorted(p.name for p in release.iterdir()) == sorted(x.slug for x in lessons)
    bodies = [body for bodies in _solution_regions().values() for body in bodies]
    solution_lines = _solution_lines()
    implementation = _implementation_lines()
    # The scan looks for what matters: bodies of every lesson, and the trusted train_step,
    # bpe_merge and make_loader oracle, the GPT-2 weight mapping, the fit loop, ...
    assert {r.module for r in manifest().lessons} <= set(_solution_regions())
    assert len(solution_lines) > 60 and len(implementation) > 100
    assert {
        "parts[i : i + 2] = [parts[i] + parts[i + 1]]",
        "nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)",
        "windows = trusted.TokenWindows(ids, context_length, stride)",
        'record["eval_loss"] = trusted.evaluate(model, eval_batches)',
        "if (transpose and name.endswith(CONV1D)) or (transpose_all and value.dim() == 2):",
        "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
    } <= implementation
    for lesson in lessons:
        folder = release / lesson.slug
        files = _texts(folder)
        names = {p.relative_to(folder).as_posix() for p in files}
        assert {f"{lesson.slug}.ipynb", f"graders/public/answers_{lesson.slug}.pt"} <= names
        assert not any(
            n.startswith(("graders/hidden/", "graders/secret/", "solutions/", "instructor/"))
            for n in names
        )
        secrets = _hidden_texts(lesson) + ["BEGIN HIDDEN TESTS"]
        for path, text in files.items():
            where = path.relative_to(release)
            assert not _leaks(text, bodies), f"solution code in {where}"
            lines = _lines(text)
            assert not lines & solution_lines, f"solution code in {where}"
            assert not lines & implementation, f"an oracle or trusted implementation in {where}"
            for secret in secrets:
                assert secret not in text, f"hidden grader text in {where}: {secret!r}"


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_feedback_has_no_hidden_grader_text(graded_class):
    feedback = graded_class["course"] / "feedback"
    files = _texts(feedback)
    students = {p.relative_to(feedback).parts[0] for p in files}
    assert students == set(graded_class["expected"])
    secrets = _hidden_texts(graded_class["lesson"]) + ["BEGIN HIDDEN TESTS"]
    # What a student needs and nothing else: the HTML and their own lesson module.
    module = graded_class["lesson"].module
    for student in students:
        theirs = feedback / student / graded_class["lesson"].slug
        names = {p.relative_to(theirs).as_posix() for p in theirs.rglob("*") if p.is_file()}
        mine = graded_class["course"] / "autograded" / student / graded_class["lesson"].slug
        own = mine / "exercises" / f"{module}.py"
        expected = {f"{graded_class['lesson'].slug}.html"}
        if own.is_file() and not own.is_symlink():  # a link is nobody's own file: never copied
            expected.add(f"exercises/{module}.py")
        assert names == expected, (student, names)
    for path, text in files.items():
        for secret in secrets:
            assert secret not in text, f"hidden grader text in {path}: {secret!r}"


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_exports_list_every_student_and_check(graded_class):
    course = graded_class["course"]
    grades = (course / "grades.csv").read_text().splitlines()
    rows = [line.split(",") for line in grades[1:]]
    assert {r[3] for r in rows if r[0] == LESSON} == set(graded_class["expected"])
    by_check = (course / "grades-by-check.csv").read_text().splitlines()[1:]
    assert len(by_check) == len(graded_class["expected"]) * len(graded_class["lesson"].checks)


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_the_gradebook_is_a_consistent_sqlite_database(graded_class):
    db = sqlite3.connect(graded_class["course"] / "gradebook.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    most = max(c.points for c in graded_class["lesson"].checks)
    assert db.execute("SELECT max(auto_score) FROM grade").fetchone()[0] <= most


@linux_only
@needs_bwrap
@pytest.mark.slow
def test_autograded_notebooks_are_the_released_ones(graded_class):
    """Added, edited, deleted and forged cells are gone: the notebook nbgrader executed is
    the source notebook, hidden tests included."""
    import nbformat

    course = graded_class["course"]
    source = nbformat.read(course / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    want = [(c.cell_type, c.source) for c in source.cells]
    for student in ("tamper", "correct", "zoe"):
        path = course / "autograded" / student / LESSON / f"{LESSON}.ipynb"
        nb = nbformat.read(path, as_version=4)
        assert [(c.cell_type, c.source) for c in nb.cells] == want, student
    assert not (course / "autograded" / "tamper" / LESSON / "exercises" / "embeddings.py").exists()


# -- the pipeline's own work, with a stand-in for the harness ------------------------------------
#
# These tests replace the grading harness by tests/autograde_fakes.py (a report that says what
# the submission's comments say), so that they check recording, exports, the class report,
# bad input and the cluster engine in seconds; the end-to-end tests above grade for real.

STUDENT_MISTAKE = "off-by-one"  # a named mistake of lookup-matches-indexing


def _fake_submit(course: Path, student: str, fails: dict, *, lesson: str = LESSON, sleep=0.0):
    from autograde_fakes import submit

    return submit(course, student, fails, lesson=lesson, sleep=sleep)


def _released_points(course: Path) -> dict[str, float]:
    """Check id -> points of the lesson's notebook as released (the manifest may have gained
    checks since: the release is what was graded)."""
    import nbformat

    from instructor.gradebook import check_of_cell

    nb = nbformat.read(course / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    return {
        check_of_cell(c.source)[1]: c.metadata.nbgrader["points"]
        for c in nb.cells
        if c.metadata.nbgrader.get("grade")
    }


def _scores(db_url: str) -> dict[tuple[str, str, str], float]:
    """Every grade in the gradebook: (student, lesson, cell) -> score."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {
            (sub.student.id, sub.assignment.name, grade.name): grade.score
            for assignment in gb.assignments
            for sub in assignment.submissions
            for nb in sub.notebooks
            for grade in nb.grades
        }


@pytest.fixture(scope="module")
def fake_class(released_course, tmp_path_factory):
    """Every lesson released, embeddings submitted by four students (one of them twice, failing
    the same check both times), autograded with the stand-in harness; plus two submissions
    that cannot be graded."""
    from autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course

    root = tmp_path_factory.mktemp("fake-class") / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    lookup = "lookup-matches-indexing"
    released = _released_points(root)
    hidden = next(c for c in manifest().lesson(LESSON).checks if c.hidden and c.id in released)
    _fake_submit(root, "ann", {})
    _fake_submit(root, "bob", {lookup: STUDENT_MISTAKE, hidden.id: None})
    (_fake_submit(root, "cy", {lookup: STUDENT_MISTAKE}) / "timestamp.txt").write_text(
        "2026-01-29 09:00:00.000000 UTC\n"
    )
    _fake_submit(root, "dee", {lookup: None, "nearest-cosine": "not-implemented"})
    _fake_submit(root, "odd id!", {})
    _fake_submit(root, "ann", {}, lesson=LESSON).rename(root / "submitted" / "ann" / "no-such")
    _fake_submit(root, "ann", {})
    jobs, problems = pipeline.find_jobs(course)
    first = pipeline.autograde(course, jobs=jobs, engine="threads", grader=fake_grade)
    # cy resubmits, still failing the same check; regrading bob's same files changes nothing.
    _fake_submit(root, "cy", {lookup: STUDENT_MISTAKE, "nearest-cosine": None})
    (root / "submitted" / "cy" / LESSON / "timestamp.txt").write_text(
        "2026-01-30 14:05:00.000000 UTC\n"
    )
    second = pipeline.autograde(
        course, [LESSON], ["cy", "bob"], engine="threads", grader=fake_grade
    )
    return {
        "course": course,
        "jobs": jobs,
        "problems": problems,
        "outcomes": first + second,
        "hidden": hidden,
        "lookup": lookup,
    }


@pytest.mark.parametrize("engine", ["dask", "threads"])
def test_autograde_fails_soft_when_a_grading_task_raises(released_course, tmp_path, engine):
    """A grading task that raises (not a failed check: the task itself) costs only its own
    submission, on every engine: it is listed with its re-run command, the others are
    recorded (Dask hands a failed task's result back as an error tuple, not an exception)."""
    from autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.__main__ import rerun_line
    from instructor.course import Course

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    _fake_submit(root, "ann", {})
    broken = _fake_submit(root, "bob", {})
    module = broken / "exercises" / f"{manifest().lesson(LESSON).module}.py"
    module.write_text(module.read_text() + "# RAISE\n")
    outcomes = {
        o.student: o
        for o in pipeline.autograde(
            course, [LESSON], engine=engine, workers=2, grader=fake_grade, progress=False
        )
    }
    assert outcomes["ann"].recorded and outcomes["ann"].graded, outcomes["ann"].notes
    bob = outcomes["bob"]
    assert not bob.recorded and not bob.graded
    line = rerun_line(bob)
    assert "GradingTaskError" in line and "broke down" in line, line
    assert line.endswith(f"(re-run: nox -s autograde -- {LESSON} --student bob)")
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        assert {s.student.id for s in gb.find_assignment(LESSON).submissions} == {"ann"}


def test_a_cluster_worker_imports_little_before_its_first_task():
    """A Dask worker unpickles instructor.grading.grade_files before it grades
    anything: that module must not pull in the recording's libraries (nbformat's validator
    alone costs a second per worker) nor torch (the harness's own process imports it)."""
    heavy = ["distributed", "jsonschema", "nbformat", "nbgrader", "sqlalchemy", "torch"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, instructor.grading; print([m for m in {heavy!r} if m in sys.modules])",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_autograde_applies_nbgrader_late_penalty(released_course, tmp_path, monkeypatch):
    """A submission past the lesson's due date gets the penalty of nbgrader's late-submission
    plugin, configured where nbgrader's own commands read it; without that setting nbgrader's
    default (no penalty) holds, and a regrade on time clears an earlier penalty."""
    import csv

    from autograde_fakes import fake_grade
    from nbgrader.api import Gradebook

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.export import export

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "nbgrader_config.py").write_text('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    with Gradebook(course.db_url) as gb:
        gb.update_or_create_assignment(LESSON, duedate="2026-02-01 12:00:00 UTC")
    stamps = {"early": "2026-02-01 11:59:00", "late": "2026-02-01 12:30:00"}
    for student, stamp in stamps.items():
        dest = _fake_submit(root, student, {"nearest-cosine": None})
        (dest / "timestamp.txt").write_text(f"{stamp}.000000 UTC\n")

    def grade(*students: str) -> dict:
        done = pipeline.autograde(
            course, [LESSON], list(students), engine="threads", grader=fake_grade
        )
        return {o.student: o for o in done}

    outcomes = grade("early", "late")
    assert 0 < outcomes["early"].points < outcomes["early"].max_points
    assert outcomes["late"].points == 0 and outcomes["late"].recorded
    with Gradebook(course.db_url) as gb:
        early, late = gb.find_submission(LESSON, "early"), gb.find_submission(LESSON, "late")
        assert early.total_seconds_late == 0 and not early.late_submission_penalty
        assert late.total_seconds_late == 1800
        assert late.late_submission_penalty == late.score == outcomes["early"].points
    export(course)
    with open(root / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == LESSON}
    assert float(rows["late"]["score"]) == 0
    assert float(rows["late"]["late_submission_penalty"]) == outcomes["early"].points
    assert float(rows["early"]["score"]) == outcomes["early"].points

    # nbgrader's default method is no penalty; the late student's earlier one goes.
    (config / "nbgrader_config.py").unlink()
    assert grade("late")["late"].points == outcomes["early"].points
    with Gradebook(course.db_url) as gb:
        assert not gb.find_submission(LESSON, "late").late_submission_penalty

    # A plugin of one's own, in late.py in the course folder as nbgrader's documentation has it.
    (root / "late.py").write_text(
        "from nbgrader.plugins import LateSubmissionPlugin\n\n\n"
        "class OnePointAnHour(LateSubmissionPlugin):\n"
        "    def late_submission_penalty(self, student_id, score, total_seconds_late):\n"
        "        return -(-total_seconds_late // 3600)\n"
    )
    (config / "nbgrader_config.py").write_text(
        'c.AssignLatePenalties.plugin_class = "late.OnePointAnHour"\n'
    )
    assert grade("late")["late"].points == outcomes["early"].points - 1
    with Gradebook(course.db_url) as gb:
        assert gb.find_submission(LESSON, "late").late_submission_penalty == 1

    # Mistakes in that setting: one line naming the problem, before anything is graded.
    from instructor.errors import SetupError

    (config / "nbgrader_config.py").write_text(
        'c.AssignLatePenalties.plugin_class = "no_such_module.Plugin"\n'
    )
    with pytest.raises(SetupError, match=r"late-submission plugin cannot be loaded.*no_such"):
        grade("late")
    (config / "nbgrader_config.py").write_text("c.LateSubmissionPlugin.penalty_method = \n")
    with pytest.raises(SetupError, match=r"nbgrader_config\.py: SyntaxError.*fix or remove"):
        grade("late")


def test_autograde_records_every_submission_and_skips_what_it_cannot_grade(fake_class):
    import nbformat

    course = fake_class["course"]
    assert sorted(fake_class["jobs"]) == [(s, LESSON) for s in ("ann", "bob", "cy", "dee")]
    problems = fake_class["problems"]
    assert len(problems) == 2, problems
    assert any("'odd id!'" in p and "letters, digits" in p for p in problems), problems
    assert any("'no-such' is no lesson" in p for p in problems), problems
    assert all("\n" not in p for p in problems)
    assert all(o.recorded and o.graded and not o.notes for o in fake_class["outcomes"])
    points = _released_points(course.root)
    full = sum(points.values())
    lookup, hidden = fake_class["lookup"], fake_class["hidden"].id
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        got = {s.student.id: s.score for s in gb.find_assignment(LESSON).submissions}
        cy = gb.find_submission(LESSON, "cy")
        assert cy.timestamp is not None and cy.timestamp.year == 2026
    assert got == {
        "ann": full,
        "bob": full - points[lookup] - points[hidden],
        "cy": full - points[lookup] - points["nearest-cosine"],
        "dee": full - points[lookup] - points["nearest-cosine"],
    }
    # The autograded notebook is the released one, with the report's output in its cells.
    nb = nbformat.read(course.autograded / "cy" / LESSON / f"{LESSON}.ipynb", as_version=4)
    source = nbformat.read(course.source / LESSON / f"{LESSON}.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == [c.source for c in source.cells]
    shown = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert lookup in shown and "hint" in shown
    assert hidden not in shown  # a hidden check's cell shows its points only


def test_instructor_commands_handle_lessons_without_submissions(fake_class, capfd):
    """feedback, export and report on a course whose other lessons nobody submitted: each
    says so once and goes on; exports tell "not submitted" from 0, and name hidden checks."""
    course = fake_class["course"].root
    others = [lesson for lesson in fake_class["course"].lessons() if lesson != LESSON]
    assert others
    said = {}
    for command in ("feedback", "export", "report"):
        status, out, err = instructor_here(capfd, course, command)
        said[command] = out + err
        assert status == 0, said[command][-3000:]
        assert "Traceback" not in said[command]
    feedback = said["feedback"]
    assert feedback.count("no autograded submissions for") == 1
    assert all(lesson in feedback for lesson in others)
    import csv

    grades = list(csv.DictReader((course / "grades.csv").open()))
    mine = {r["student_id"]: r for r in grades if r["assignment"] == LESSON}
    assert set(mine) == {"ann", "bob", "cy", "dee"}
    assert mine["cy"]["timestamp"].startswith("2026-01-30 14:05:00")
    assert all(r["status"] == "graded" and r["score"] != "" for r in mine.values())
    missing = [r for r in grades if r["assignment"] in others]
    assert missing and all(r["status"] == "not submitted" and r["score"] == "" for r in missing)
    by_check = list(csv.DictReader((course / "grades-by-check.csv").open()))
    ids = set(_released_points(course))
    graded = [r for r in by_check if r["lesson"] == LESSON]
    assert {r["check"] for r in graded} == ids  # hidden checks by their ids, not "hidden"
    hidden = fake_class["hidden"].id
    bob = next(r for r in graded if r["student_id"] == "bob" and r["check"] == hidden)
    assert bob["hidden"] == "yes" and bob["score"] == "0"
    assert all(r["score"] == "" for r in by_check if r["lesson"] in others)
    # nbgrader's own export, in the course folder (a copy of the released one: the config
    # file follows its folder), is the same export plugin.
    theirs = course / "nbgrader-export"
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "export", "--to", str(theirs / "grades.csv")],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name in ("grades.csv", "grades-by-check.csv"):
        assert (theirs / name).read_text() == (course / name).read_text(), name


def test_mistakes_report_ranks_mistakes_and_finds_stuck_students(fake_class):
    import csv

    from instructor.class_report import write_report

    course = fake_class["course"].root
    write_report(fake_class["course"])
    rows = list(csv.DictReader((course / "reports" / "mistakes.csv").open()))
    lookup = [r for r in rows if r["check"] == fake_class["lookup"]]
    # Latest submissions: bob and cy made the named mistake, dee failed without one.
    assert [r["mistake"] for r in lookup] == [STUDENT_MISTAKE, "unnamed"]
    assert [r["count"] for r in lookup] == ["2", "1"]
    assert [r["who"] for r in lookup] == ["bob cy", "dee"]  # who made each mistake
    # A stub still in place is not a mistake: listed apart, not counted as failed.
    cosine = [r for r in rows if r["check"] == "nearest-cosine"]
    assert [(r["mistake"], r["who"]) for r in cosine] == [("unnamed", "cy")]
    assert cosine[0]["failed"] == "1" and cosine[0]["not_implemented"] == "dee"
    assert lookup[0]["failed"] == "3" and lookup[0]["students"] == "4"
    assert "chapters/02-embeddings/#" in lookup[0]["link"]
    check = next(c for c in manifest().lesson(LESSON).checks if c.id == fake_class["lookup"])
    assert lookup[0]["hint"] == check.mistakes[STUDENT_MISTAKE]
    stuck = list(csv.DictReader((course / "reports" / "stuck.csv").open()))
    assert [(r["student"], r["check"], r["attempts"]) for r in stuck] == [
        ("cy", fake_class["lookup"], "2")
    ]
    html = (course / "reports" / "mistakes.html").read_text()
    assert "For instructors only" in html
    # Only the lesson anybody submitted; a row per student; who did not submit it is said.
    order = [lesson.slug for lesson in manifest().lessons]
    assert [slug for slug in order if f"<section id='{slug}'>" in html] == [LESSON]
    students = html[html.index("<section id='students'>") :]
    assert all(f"<td class='id'>{s}</td>" in students for s in ("ann", "bob", "cy", "dee"))
    assert "not submitted" in students
    assert not (course / "feedback").exists() or "For instructors only" not in "".join(
        p.read_text() for p in (course / "feedback").rglob("*.html")
    )


def test_stuck_sees_the_attempts_of_one_download(released_course, tmp_path):
    """An LMS download with two attempts of one student, both making the same mistake: the
    newest is graded into the gradebook, the older into the history, and the report says the
    student is stuck; a student who fixed it in the newer attempt is not. Autograde again and
    the attempts are not graded twice."""
    import csv

    from autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.collect import collect
    from instructor.course import Course
    from instructor.gradebook import HISTORY

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    lookup = "lookup-matches-indexing"
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    attempts = {
        ("eve", "2026-01-30-14-05-00"): {lookup: STUDENT_MISTAKE},
        ("eve", "2026-02-03-09-30-00"): {lookup: STUDENT_MISTAKE, "nearest-cosine": None},
        ("fay", "2026-01-30-15-00-00"): {lookup: STUDENT_MISTAKE},
        ("fay", "2026-02-03-10-00-00"): {},
    }
    for (student, when), fails in attempts.items():
        folder = _fake_submit(root, student, fails)
        with zipfile.ZipFile(archive / f"hw_{student}_attempt_{when}.zip", "w") as zf:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    zf.write(path, f"{LESSON}/{path.relative_to(folder)}")
    shutil.rmtree(root / "submitted")
    found, problems, notes = collect(course, [LESSON])
    assert found == {LESSON: ["eve", "fay"]} and not problems
    assert len(notes) == 2 and all("ignored hw_" in line for line in notes), notes
    graded = []

    def counting(lesson, files, **kwargs):
        graded.append(lesson)
        return fake_grade(lesson, files, **kwargs)

    outcomes = pipeline.autograde(course, [LESSON], engine="threads", grader=counting)
    assert all(o.recorded and not o.notes for o in outcomes), [o.notes for o in outcomes]
    assert len(graded) == 4  # two submissions, two earlier attempts
    points = _released_points(root)
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url) as gb:
        got = {s.student.id: s.score for s in gb.find_assignment(LESSON).submissions}
    full = sum(points.values())
    assert got == {"eve": full - points[lookup] - points["nearest-cosine"], "fay": full}
    write_report(course)
    stuck = list(csv.DictReader((root / "reports" / "stuck.csv").open()))
    assert [(r["student"], r["check"], r["attempts"], r["mistake"]) for r in stuck] == [
        ("eve", lookup, "2", STUDENT_MISTAKE)
    ]
    # The latest submission decides the class's numbers: fay's lookup passes now.
    rows = list(csv.DictReader((root / "reports" / "mistakes.csv").open()))
    assert [r["who"] for r in rows if r["check"] == lookup] == ["eve"]

    graded.clear()
    pipeline.autograde(course, [LESSON], engine="threads", grader=counting)
    assert len(graded) == 2  # the submissions again; the attempts are in the history already
    from sqlalchemy import create_engine, func, select

    engine = create_engine(course.db_url)
    with engine.connect() as db:
        distinct = select(func.count()).select_from(
            select(HISTORY.c.student, HISTORY.c.fingerprint).distinct().subquery()
        )
        assert db.execute(distinct).scalar() == 4
    engine.dispose()


def test_mistakes_report_renders_in_a_browser(fake_class, tmp_path):
    chromium = require("chromium")
    from playwright.sync_api import sync_playwright

    from instructor.class_report import write_report

    page_path = write_report(fake_class["course"], tmp_path)[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium),
            args=["--headless", "--no-sandbox", "--disable-gpu"],
        )
        try:
            page = browser.new_page()
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(page_path.as_uri(), wait_until="load")
            assert page.locator("#instructors-only").is_visible()
            images = page.locator("img")
            assert images.count() >= 2
            widths = images.evaluate_all("els => els.map(i => i.complete && i.naturalWidth)")
            assert all(w and w > 100 for w in widths), widths
            assert page.locator(f"#{LESSON} a[href*='chapters/02-embeddings/#']").count() >= 1
            assert page.locator("#stuck td", has_text="cy").count() == 1
            # Lessons in course order, each once.
            shown = page.locator("section[id] > h2").evaluate_all(
                "hs => hs.map(h => h.parentElement.id)"
            )
            lessons = [s for s in shown if s not in ("reteach", "flagged", "students", "stuck")]
            assert lessons == [LESSON], lessons  # the others: nobody submitted them
            # One row per student, every lesson a column.
            rows = page.locator("#students tr:has(td)")
            names = rows.evaluate_all("rs => rs.map(r => r.cells[0].textContent)")
            assert names == ["ann", "bob", "cy", "dee"], names
            widths = rows.evaluate_all("rs => rs.map(r => r.cells.length)")
            assert set(widths) == {len(lessons) + 1}, widths
            # Nothing wider than the window, on a laptop's screen and on a narrow one.
            for width in (1280, 800):
                page.set_viewport_size({"width": width, "height": 900})
                overflow = page.evaluate(
                    """() => {
                        const limit = document.documentElement.clientWidth;
                        const wide = [...document.querySelectorAll('body *')].filter(e => {
                            const box = e.getBoundingClientRect();
                            const scroller = e.closest('.scroll');
                            return box.right > limit + 1 && !(scroller && scroller !== e);
                        });
                        return {page: document.documentElement.scrollWidth - limit,
                                wide: wide.map(e => e.tagName + '#' + (e.id || ''))};
                    }"""
                )
                assert overflow["page"] <= 0 and not overflow["wide"], (width, overflow)
            page.set_viewport_size({"width": 1280, "height": 900})
            page.screenshot(path=str(tmp_path / "mistakes.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()


HOSTILE_ID = "<img src=x onerror=alert(1)>"
HOSTILE_TEXT = "\x1b]0;owned\x07\x1b[2J<script>alert('x')</script> =HYPERLINK(\"http://evil\")"


def test_student_text_is_escaped_in_notebooks_html_and_csv(released_course, tmp_path):
    """What students control (their ids and names on the roster, the messages their code's
    exceptions carry, their code) reaches the autograded notebook as plain text without
    terminal escapes, the feedback and the reports' HTML escaped, and every CSV with the
    cells a spreadsheet would run as formulas neutralised."""
    import csv
    from html import escape

    import nbformat
    from autograde_fakes import fake_grade
    from nbgrader.api import Gradebook

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.course import Course
    from instructor.export import export
    from instructor.feedback import feedback
    from instructor.similarity import compare

    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    formula = {"first_name": '=cmd|" /C calc"!A0', "last_name": "+1+1", "email": "@SUM(A1)"}
    with Gradebook(course.db_url) as gb:
        gb.add_student(HOSTILE_ID, **formula)
        gb.add_student("-2+3", first_name="\tTab", last_name="\rReturn")
    lookup = "lookup-matches-indexing"
    code = f"\nSHOUT = {HOSTILE_TEXT!r}  # </code></pre><script>alert(2)</script>\n"
    for student in ("ann", "bob"):
        module = _fake_submit(root, student, {lookup: None}) / "exercises" / "embeddings.py"
        module.write_text(module.read_text() + code)
    shutil.copytree(course.submitted / "ann", course.submitted / HOSTILE_ID)

    def hostile(lesson, files, **kwargs):
        result = fake_grade(lesson, files, **kwargs)
        for row in result["report"]["lessons"][0]["checks"]:
            if not row["passed"]:
                row["detail"] = HOSTILE_TEXT  # as an exception's message reads
        return result

    outcomes = pipeline.autograde(
        course, [LESSON], ["ann", "bob"], engine="threads", grader=hostile
    )
    assert all(o.recorded for o in outcomes), [o.notes for o in outcomes]
    notebook = (course.autograded / "ann" / LESSON / f"{LESSON}.ipynb").read_text()
    assert "<script>alert('x')</script>" in notebook  # shown as text,
    assert "\\u001b" not in notebook and "\\u0007" not in notebook  # without its escapes
    outputs = [
        output
        for cell in nbformat.reads(notebook, as_version=4).cells
        for output in cell.get("outputs", [])
    ]
    assert all(o.output_type in ("stream", "execute_result") for o in outputs)
    assert not any("text/html" in o.get("data", {}) for o in outputs)

    made, _skipped = feedback(course, [LESSON])
    page = Path(next(p for p in made if "/ann/" in p)).read_text()
    assert "<script>alert('x')" not in page and "&lt;script&gt;alert(" in page
    assert "\x1b" not in page

    export(course)
    for name in ("grades.csv", "grades-by-check.csv"):
        for row in csv.DictReader((root / name).open(newline="")):
            for value in row.values():
                assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (name, value)
    rows = csv.DictReader((root / "grades.csv").open(newline=""))
    grades = {r["student_id"]: r for r in rows if r["assignment"] == LESSON}
    assert {k: grades[HOSTILE_ID][k] for k in formula} == {k: "'" + v for k, v in formula.items()}
    assert grades["'-2+3"]["first_name"] == "'\tTab"
    assert grades["'-2+3"]["last_name"] == "'\nReturn"
    assert grades["ann"]["score"] != "" and float(grades["ann"]["score"]) > 0

    write_report(course)
    report = (root / "reports" / "mistakes.html").read_text()
    assert HOSTILE_ID not in report and escape(HOSTILE_ID) in report
    for row in csv.DictReader((root / "reports" / "mistakes.csv").open(newline="")):
        assert not any(v.startswith(("=", "+", "-", "@")) for v in row.values()), row

    path, pairs = compare(course, LESSON)
    similar = path.read_text()
    assert {(p.first, p.second) for p in pairs} == {("ann", "bob")}  # the odd id left out
    assert "<script>alert(2)" not in similar and "<img src=x" not in similar


def test_the_block_lesson_goes_through_release_autograde_report_and_progress(
    released_course, tmp_path
):
    """Lesson 5 (block), added after the others, is where every instructor command and the
    progress page look for lessons: released with its stub and public graders, autograded,
    in the class report after embeddings, and a row of the progress page."""
    import csv
    from html import unescape
    from types import SimpleNamespace

    from autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.class_report import write_report
    from instructor.course import Course

    block = manifest().lesson("block")
    assert block.number == 5
    release = released_course / "release" / "block"
    assert (release / "block.ipynb").is_file()
    assert (release / "exercises" / f"{block.module}.py").is_file()
    assert (release / "graders" / "public" / "test_block.py").is_file()
    assert not (release / "graders" / "hidden").exists()
    root = tmp_path / "course"
    shutil.copytree(released_course, root)
    course = Course.at(root)
    first = block.checks[0]
    _fake_submit(root, "ann", {first.id: None}, lesson="block")
    _fake_submit(root, "ann", {}, lesson=LESSON)
    outcomes = pipeline.autograde(course, ["block", LESSON], engine="threads", grader=fake_grade)
    got = {o.lesson: o for o in outcomes}
    assert got["block"].recorded and 0 < got["block"].points < got["block"].max_points
    assert got["block"].points == got["block"].max_points - first.points
    write_report(course)
    html = (root / "reports" / "mistakes.html").read_text()
    order = [html.index(f"<section id='{slug}'>") for slug in (LESSON, "block")]
    assert order == sorted(order) and "<section id='attention'>" not in html  # not submitted
    assert "Lesson 5: " in html
    rows = [r for r in csv.DictReader((root / "reports" / "mistakes.csv").open())]
    assert {r["check"] for r in rows if r["lesson"] == "block"} >= {c.id for c in block.checks}
    # The progress page's table: a row per lesson of the manifest, block the fifth.
    sys.path.insert(0, str(ROOT / "site" / "hooks"))
    try:
        import course_data
        import notebooks
    finally:
        sys.path.remove(str(ROOT / "site" / "hooks"))
    config = SimpleNamespace(
        docs_dir=str(ROOT / "course"), config_file_path=str(ROOT / "mkdocs.yml")
    )
    markup = notebooks.progress_markup(course_data.load_lessons(config), "../")
    data = json.loads(unescape(markup.split('data-lessons="')[1].split('"')[0]))
    assert [row["slug"] for row in data][3:6] == ["attention", "block", "objective"]
    assert data[4]["functions"] == list(block.functions)


def test_a_gradebook_from_another_course_is_refused_in_one_line(
    fake_class, tmp_path, capsys, monkeypatch
):
    from instructor.__main__ import main
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    other = tmp_path / "other.db"
    shutil.copyfile(fake_class["course"].gradebook, other)
    db = sqlite3.connect(other)
    db.execute("UPDATE course SET id = 'ml-101' WHERE id = 'gpt-from-the-ground-up'")
    db.commit()
    db.close()
    course = str(fake_class["course"].root)
    for url, says in (
        (f"sqlite:///{other}", "belongs to another course (course 'ml-101'"),
        (f"sqlite:///{tmp_path / 'new.db'}", f"lesson {LESSON!r} is not in the gradebook"),
    ):
        status = main(["--course", course, "autograde", "--gradebook", url])
        out, err = capsys.readouterr()
        assert status == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], err
        assert "autograded" not in out  # refused before grading anything


def test_collect_skips_unusable_zips_in_one_line_each(tmp_path):
    from instructor.collect import collect
    from instructor.course import Course

    course = Course.at(tmp_path / "course")
    archive = course.downloaded / LESSON / "archive"
    archive.mkdir(parents=True)
    module = (ROOT / "exercises" / "embeddings.py").read_text()

    def make(name: str, top: str = f"{LESSON}/") -> None:
        with zipfile.ZipFile(archive / name, "w") as zf:
            zf.writestr(f"{top}exercises/embeddings.py", module)
            zf.writestr(f"{top}{LESSON}.ipynb", "{}")
            zf.writestr(f"{top}graders/runner.py", "print('not kept')")

    make("ann.zip")
    make("hw2_bob_attempt_2026-02-03-09-30-00.zip", top="")
    make("odd name!.zip")
    (archive / "cy.zip").write_bytes(b"PK\x03\x04 truncated")
    with zipfile.ZipFile(archive / "dee.zip", "w") as zf:
        zf.writestr("notes.txt", "my homework")
    found, problems, _notes = collect(course, [LESSON])
    assert found == {LESSON: ["ann", "bob"]}
    assert len(problems) == 3, problems
    by_zip = {p.split(":")[0]: p for p in problems}
    assert "not a readable zip" in by_zip[f"skipped downloaded/{LESSON}/archive/cy.zip"]
    assert "no student id" in by_zip[f"skipped downloaded/{LESSON}/archive/odd name!.zip"]
    assert "holds neither" in by_zip[f"skipped downloaded/{LESSON}/archive/dee.zip"]
    bob = course.submitted / "bob" / LESSON
    assert (bob / "exercises" / "embeddings.py").read_text() == module
    assert not (bob / "graders").exists()
    assert (bob / "timestamp.txt").read_text().startswith("2026-02-03 09:30:00")
    assert (course.submitted / "ann" / LESSON / "timestamp.txt").is_file()


def test_release_site_url_and_requirements(released_course, monkeypatch):
    import nbformat

    from instructor.release import is_local, site_base

    monkeypatch.delenv("COURSE_SITE_URL", raising=False)
    assert is_local(site_base())  # mkdocs.yml's default: `nox -s serve`'s address
    monkeypatch.setenv("COURSE_SITE_URL", "https://course.example.org/gpt")
    assert site_base() == "https://course.example.org/gpt/"
    assert site_base("https://other.example.org") == "https://other.example.org/"
    folder = released_course / "release" / LESSON
    needs = (folder / "requirements.txt").read_text()
    assert "torch" in needs and "pytest" in needs and "jupyterlab" in needs
    nb = nbformat.read(folder / f"{LESSON}.ipynb", as_version=4)
    assert "requirements.txt" in nb.cells[0].source


# -- a cluster and a PostgreSQL gradebook --------------------------------------------------------


@pytest.fixture(scope="module")
def postgres():
    """A private PostgreSQL server (Debian's postgresql package) on a Unix socket in a fresh
    folder, for this module; yields a function making a new database's SQLAlchemy URL."""
    import tempfile

    binaries = require("postgresql")
    psycopg = pytest.importorskip("psycopg", reason="the grading extra (psycopg) is missing")
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    # initdb refuses to run as root: there, the server runs as Debian's postgres user.
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(folder, "postgres")
    folder.chmod(0o700)
    with socket.socket() as s:  # a free number for the socket's name
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    data = folder / "data"
    run(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    options = f"-k {folder} -p {port} -c listen_addresses='' -c fsync=off"
    run(
        str(binaries / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(folder / "log"),
        "-w",
        "start",
    )
    names = iter(range(1000))

    def new_database() -> str:
        name = f"course{next(names)}"
        with psycopg.connect(
            host=str(folder), port=port, user="postgres", dbname="postgres", autocommit=True
        ) as db:
            db.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://postgres@/{name}?host={folder}&port={port}"

    try:
        yield new_database
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def _kill_a_busy_worker(scheduler: str, killed: list, stop: threading.Event) -> None:
    """Wait until a worker is grading, let it get halfway, then SIGKILL its process."""
    import signal
    import time

    from distributed import Client

    with Client(scheduler, timeout=60) as client:
        while not stop.is_set():
            busy = [worker for worker, keys in client.processing().items() if keys]
            if busy:
                time.sleep(0.5)
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)


def test_cluster_autograde_on_postgresql_matches_one_process(
    released_course, postgres, tmp_path_factory, monkeypatch
):
    """The same class graded twice: in one process into SQLite, and on a local cluster of two
    worker processes into PostgreSQL, one worker SIGKILLed mid-grading. Same grades, every
    submission recorded exactly once."""
    from autograde_fakes import fake_grade
    from distributed import LocalCluster
    from nbgrader.api import Gradebook
    from sqlalchemy import create_engine, text

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.gradebook import HISTORY
    from instructor.nbgrader_api import api

    checks = list(_released_points(released_course))
    courses = {}
    for name, db in (("single", None), ("cluster", postgres())):
        root = tmp_path_factory.mktemp(name) / "course"
        shutil.copytree(released_course, root)
        course = courses[name] = Course.at(root, db)
        if db:  # the lesson's cells into the new gradebook, as the release would
            assert api(course).generate_assignment(LESSON, force=True, create=True)["success"]
        for i in range(6):
            fails = {checks[j]: None for j in range(i % len(checks))}
            _fake_submit(root, f"s{i}", fails, sleep=0.8)
    single = pipeline.autograde(
        courses["single"], [LESSON], engine="threads", workers=1, grader=fake_grade
    )
    killed: list[int] = []
    stop = threading.Event()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        killer = threading.Thread(
            target=_kill_a_busy_worker, args=(cluster.scheduler_address, killed, stop)
        )
        killer.start()
        try:
            spread = pipeline.autograde(
                courses["cluster"],
                [LESSON],
                scheduler=cluster.scheduler_address,
                grader=fake_grade,
                progress=False,
            )
        finally:
            stop.set()
            killer.join()
    assert killed, "no worker was grading when the test looked"
    assert all(o.recorded for o in single + spread), [o.notes for o in single + spread]
    assert _scores(courses["cluster"].db_url) == _scores(courses["single"].db_url)
    assert len(_scores(courses["cluster"].db_url)) == 6 * len(checks)
    engine = create_engine(courses["cluster"].db_url)
    with engine.connect() as db:
        assert db.execute(text("SELECT count(*) FROM submitted_assignment")).scalar() == 6
        assert db.execute(text("SELECT count(*) FROM grade")).scalar() == 6 * len(checks)
        history = db.execute(text(f"SELECT count(*) FROM {HISTORY.name}")).scalar()
        assert history == 6 * len(checks)
    engine.dispose()
    with Gradebook(courses["cluster"].db_url) as gb:
        assert {s.student.id for s in gb.find_assignment(LESSON).submissions} == {
            f"s{i}" for i in range(6)
        }


def test_release_autograde_report_and_export_on_postgresql(postgres, tmp_path, monkeypatch, capfd):
    """The gradebook's URL is given once, to release: autograde, report and export then use
    it without being told, none of them prints its password, and a command pointed at a
    gradebook without the course's lessons says how to switch."""
    import csv

    from autograde_fakes import fake_grade

    from instructor import autograde as pipeline
    from instructor.course import Course
    from instructor.gradebook_url import GRADEBOOK_ENV

    monkeypatch.delenv(GRADEBOOK_ENV, raising=False)
    url = postgres().replace("//postgres@", "//postgres:s3cret@")  # trust auth: never checked
    course = tmp_path / "course"
    said = []
    done = instructor(course, "release", LESSON, "--gradebook", url)
    said.append(done.stdout + done.stderr)
    assert done.returncode == 0, said[-1][-3000:]
    _fake_submit(course, "ann", {})
    _fake_submit(course, "bob", {"lookup-matches-indexing": STUDENT_MISTAKE})
    outcomes = pipeline.autograde(
        Course.at(course), [LESSON], engine="threads", grader=fake_grade, progress=False
    )
    assert [o.recorded for o in outcomes] == [True, True], [o.notes for o in outcomes]
    for command in ("report", "export"):
        status, out, err = instructor_here(capfd, course, command)
        said.append(out + err)
        assert status == 0, said[-1][-3000:]
    assert not (course / "gradebook.db").exists()  # nothing fell back to SQLite
    rows = [r for r in csv.DictReader((course / "grades.csv").open()) if r["assignment"] == LESSON]
    assert {r["student_id"]: r["status"] for r in rows} == {"ann": "graded", "bob": "graded"}
    report = (course / "reports" / "mistakes.csv").read_text()
    assert STUDENT_MISTAKE in report and "bob" in report
    status, out, err = instructor_here(
        capfd, course, "report", "--gradebook", f"sqlite:///{tmp_path / 'new.db'}"
    )
    said.append(out + err)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "release into it" in lines[0], lines
    assert not any("s3cret" in text for text in said)
