"""instructor/autograde.py grading a class for real: nbgrader release, sandboxed parallel
autograde, feedback and export.

The end-to-end test takes the released course (built once per run), submits a fake class to
one lesson (untouched, partial and hostile submissions, and a correct but noisy one handed in
as a zip), autogrades it through the real command and asserts every student's exact score
from the gradebook. Every hostile submission is bounded (at most 5 GiB, 200 processes, 40 MiB
of output) and is built so that it *earns points only if the defence it probes is broken*: a
broken sandbox fails the test instead of taking the machine down.

The tests of the graded class (``graded_class``, which grades a whole class for real, once)
stay together in this file, the release's leak checks with them (they share their helpers).
"""

from __future__ import annotations

import ast
import functools
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support.borrower import borrowing_module  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
    ROOT,
    instructor,
    linux_only,
    manifest,
    needs_bwrap,
)


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
}
# Correct functions that warn and write to stderr (at import too): the class's correct
# submission, handed in as a zip. Noise must not cost a point.
NOISY = {"lookup": "noisy", "nearest": "noisy"}


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
def graded_class(released_course, tmp_path_factory, listener):
    """A copy of the released course (``python -m instructor release``, built once per run),
    a fake class submitted to LESSON and autograded; returns what the tests need."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    shutil.copytree(released_course, course)
    marker = course.parent / "hijacked"
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

    expected = {"stub": 0, "partial": full - points["nearest"]}
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
        expected[student] = full - sum(points[f] for f in functions)
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
    # The correct student hands in a zip, collected by nbgrader zip_collect.
    staging = course.parent / "zoe"
    submit("zoe", hostile_module(reference, NOISY, constants), staging / LESSON)
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
    for student, functions in [*CLASS.items(), ("zoe", NOISY)]:
        lost = set() if student == "zoe" else set(functions)
        for name, (score, most) in scores[student]["cells"].items():
            check = next((c for c in lesson.checks if name.endswith(c.id)), None)
            if check is None:  # a hidden check's cell, cNNN-hidden: judged by the total
                continue
            assert score == (0 if check.function in lost else most), (student, name)


@functools.cache
def _public_manifest() -> str:
    """The manifest as released (the same for every lesson: parsed once, not once a lesson)."""
    from instructor.release import public_manifest

    return public_manifest()


def _hidden_texts(lesson) -> list[str]:
    """Text that identifies the hidden graders: check ids, hints, and their test code (what
    the public graders, the harness they run on and the public checks do not say as well)."""
    from instructor.release import released_grader_files

    public = "".join(path.read_text() for path in released_grader_files(lesson).values())
    public += _public_manifest()
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
    # Looked up among the text's runs of two and three lines, each set made once: a body of
    # three lines or more that is there whole has its first three lines there.
    pairs = set(zip(lines, lines[1:], strict=False))
    triples = set(zip(lines, lines[1:], lines[2:], strict=False))
    return [
        body
        for body in regions
        if (len(body) == 2 and tuple(body) in pairs)
        or any(run in triples for run in zip(body, body[1:], body[2:], strict=False))
    ]


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
    """Every file of every lesson's release (notebook, package, graders, recorded answers) but
    the course's pages (the site's, which the 'course' corpus reads): no body of any lesson's
    solution (nor a distinctive line of one), no line of the trusted implementations or the
    oracles (which the release leaves out: the released checks replay recorded answers), and
    no hidden grader text."""
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
            if where.parts[1] == "course" and where.suffix == ".md":
                continue  # the site's own pages, published to every student already
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
    # What a student needs and nothing else: the HTML and their own lesson module, and what
    # nbgrader's release_feedback files the feedback under (the submission's time and secret).
    module = graded_class["lesson"].module
    for student in students:
        theirs = feedback / student / graded_class["lesson"].slug
        names = {p.relative_to(theirs).as_posix() for p in theirs.rglob("*") if p.is_file()}
        mine = graded_class["course"] / "autograded" / student / graded_class["lesson"].slug
        own = mine / "exercises" / f"{module}.py"
        expected = {f"{graded_class['lesson'].slug}.html"}
        if own.is_file() and not own.is_symlink():  # a link is nobody's own file: never copied
            expected.add(f"exercises/{module}.py")
        for name in ("timestamp.txt", "submission_secret.txt"):
            if (mine / name).is_file() and not (mine / name).is_symlink():
                expected.add(name)
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
    by_check = [
        line.split(",") for line in (course / "grades-by-check.csv").read_text().splitlines()[1:]
    ]
    ours = [r for r in by_check if r[1] == LESSON]
    assert len(ours) == len(graded_class["expected"]) * len(graded_class["lesson"].checks)
    # The course's other lessons are released too: nobody submitted them.
    assert all("not submitted" in r for r in by_check if r[1] != LESSON)


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
    for student in ("tamper", "partial", "zoe"):
        path = course / "autograded" / student / LESSON / f"{LESSON}.ipynb"
        nb = nbformat.read(path, as_version=4)
        assert [(c.cell_type, c.source) for c in nb.cells] == want, student
    assert not (course / "autograded" / "tamper" / LESSON / "exercises" / "embeddings.py").exists()
