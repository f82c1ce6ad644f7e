"""instructor/release.py: the public manifest, what ships by folder, the lesson notebook's points,
the site URL and requirements, and the block lesson through every instructor command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")
from support import forkserver  # noqa: E402
from support.autograde_fakes import submit  # noqa: E402
from support.instructor_commands import (  # noqa: E402
    LESSON,
    ROOT,
    manifest,
)
from support.release_site import RELEASED_SITE  # noqa: E402

from core.manifest import load_manifest  # noqa: E402


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


def test_the_site_is_recorded_once_and_kept_unless_changed_on_purpose(tmp_path, monkeypatch):
    from instructor.course import Course
    from instructor.release import NoSiteError, choose_site, course_site

    course = Course.at(tmp_path / "course")
    monkeypatch.delenv("COURSE_SITE_URL", raising=False)
    with pytest.raises(NoSiteError) as refused:  # never mkdocs serve's 127.0.0.1 by default
        choose_site(course)
    said = str(refused.value)
    assert "\n" not in said and "--site-url URL" in said and "later releases keep it" in said
    monkeypatch.setenv("COURSE_SITE_URL", "https://course.example.org/gpt")
    assert choose_site(course) == "https://course.example.org/gpt/"
    course.root.mkdir(parents=True)
    (course.root / "release.json").write_text('{"site_url": "https://first.example.org/"}')
    # recorded at the first release: kept over the environment, changed by --site-url alone
    assert choose_site(course) == course_site(course) == "https://first.example.org/"
    assert choose_site(course, "https://other.example.org") == "https://other.example.org/"


def test_released_folders_link_the_recorded_site_and_name_what_to_install(released_course):
    import nbformat

    from gpt.vocab import VOCAB_INSTALL
    from instructor.release import torch_cpu_index

    assert json.loads((released_course / "release.json").read_text()) == {"site_url": RELEASED_SITE}
    folder = released_course / "release" / LESSON
    assert json.loads((folder / "release.json").read_text())["site_url"] == RELEASED_SITE
    needs = (folder / "requirements.txt").read_text()
    lines = [line for line in needs.splitlines() if not line.startswith("#")]
    names = {re.match(r"[\w.-]+", line).group(0).lower() for line in lines[1:]}
    assert lines[0] == f"--extra-index-url {torch_cpu_index()}"  # CPU torch, as on Linux
    assert {"torch", "pytest", "hypothesis", "jupyterlab", "tiktoken"} <= names, names
    assert not {"transformers", "pytest-xdist", "nbgrader"} & names  # what graders never import
    assert f"#   {VOCAB_INSTALL}" in needs.splitlines()  # the --no-deps install line
    notebook = nbformat.read(folder / f"{LESSON}.ipynb", as_version=4)
    intro = notebook.cells[0].source
    assert VOCAB_INSTALL in intro and "pip install -r requirements.txt" in intro
    assert f"python -m graders --watch {LESSON}" in intro and "127.0.0.1" not in intro
    assert RELEASED_SITE in intro and f"{LESSON}-submission.zip" in intro
    assert notebook.cells[-1].source.endswith(f'submit("{LESSON}")')
    module = load_manifest().lesson(LESSON).module
    stub = (folder / "exercises" / f"{module}.py").read_text()
    assert f"see {RELEASED_SITE}chapters/" in stub and "course/chapters" not in stub


def test_the_block_lesson_goes_through_release_autograde_report_and_progress(
    released_course, tmp_path
):
    """Lesson 5 (block), added after the others, is where every instructor command and the
    progress page look for lessons: released with its stub and public graders, autograded,
    in the class report after embeddings, and a row of the progress page."""
    import csv
    from html import unescape
    from types import SimpleNamespace

    from support.autograde_fakes import fake_grade

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
    submit(root, "ann", {first.id: None}, lesson="block")
    submit(root, "ann", {}, lesson=LESSON)
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


@pytest.mark.parametrize("kind", ["reference", "honest"])
def test_the_released_block_lesson_is_graded_on_its_own_code(released_course, tmp_path, kind):
    """A release folder of lesson 5 holds lessons 2 and 4 as stubs; the reference block.py (or
    an honest one that names them otherwise) gets every public point there from the command
    the release names and from the notebook's check() cells: lesson 4's attention and lesson
    2's lookup are answered from what the release recorded, and the notebook says so. The
    command's grading of the reference is test_release_venv.py's (the same grading, in the
    environment the folder's requirements make): here the command grades the honest one."""
    import os
    import subprocess

    import nbformat
    from support import block_alone

    folder = tmp_path / "block"
    shutil.copytree(released_course / "release" / "block", folder)
    (folder / "exercises" / "block.py").write_text(getattr(block_alone, kind)())
    assert "NotImplementedError" in (folder / "exercises" / "attention.py").read_text()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_INPUT_SEED")}
    lesson = manifest().lesson("block")
    public = [c.id for c in lesson.checks if not c.hidden]
    script = (
        "import json\nfrom graders.notebook import check\n"
        f"print(json.dumps([check('block', c) for c in {public!r}]))\n"
    )
    commands = [[sys.executable, "-c", script]]
    if kind == "honest":
        commands.insert(0, [sys.executable, "-m", "graders", "block", "--json", "report.json"])
    for command in commands:
        done = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if kind == "honest":
        report = json.loads((folder / "report.json").read_text())
        assert report["points"] == report["max_points"] == lesson.max_points(hidden=False)
    points = json.loads(done.stdout.strip().splitlines()[-1])
    assert points == [c.points for c in lesson.checks if not c.hidden], done.stdout[-3000:]
    box = nbformat.read(folder / "block.ipynb", as_version=4).cells[0].source
    assert "lesson 4's `attention`" in box and "lesson 2's `lookup`" in box
    # the chapters' code reads the course's pages: they travel with the release
    corpus = "from gpt.corpus import load_corpus; print(len(load_corpus('course')))"
    done = subprocess.run(
        [sys.executable, "-c", corpus], cwd=folder, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and int(done.stdout) > 10_000, done.stderr[-2000:]


@pytest.mark.slow
def test_a_lesson_released_later_keeps_the_courses_site(released_course, tmp_path):
    """Releasing one more lesson without --site-url links where the earlier ones do (the
    Gradescope zip too), even with another COURSE_SITE_URL in the environment."""
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SITE_URL"}
    env["COURSE_SITE_URL"] = "https://somewhere-else.example.org/"
    run = [sys.executable, "-m", "instructor", "--course", str(course)]
    done = subprocess.run(
        [*run, "release", "windows"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"site: {RELEASED_SITE} (kept" in done.stdout
    for folder in ("release", "source"):
        info = json.loads((course / folder / "windows" / "release.json").read_text())
        assert info["site_url"] == RELEASED_SITE
    assert json.loads((course / "release.json").read_text())["site_url"] == RELEASED_SITE
    zipped = forkserver.run(  # the cold start of an instructor command is the release's above
        [*run[1:], "gradescope", "windows"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert zipped.returncode == 0, zipped.stderr[-3000:]
    with zipfile.ZipFile(course / "gradescope" / "windows.zip") as archive:
        assert json.loads(archive.read("gradescope.json"))["site_url"] == RELEASED_SITE
