"""graders/notebook.py: a cell tells a failure as the terminal does (one mistake, one message,
the same first hint), writes the submission, and in a released folder grades as the CLI does."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.release_site import RELEASED_SITE

from graders.notebook import render
from graders.report import told_with

ROOT = Path(__file__).resolve().parents[2]


def _row(id, function, hint, explained_by=None, passed=False):
    return {
        "id": id,
        "function": function,
        "points": 2 if passed else 0,
        "max_points": 2,
        "passed": passed,
        "hint": None if passed else hint,
        "link": f"chapters/05-block.md#{function}",
        "url": f"chapters/05-block/#{function.replace('_', '-')}",
        "detail": None if passed else f"{id} went wrong",
        "hidden": False,
        "explained_by": explained_by,
    }


ROWS = [
    _row("layer-norm-matches-torch", "layer_norm", "divide by N, not N - 1"),
    _row("layer-norm-no-bias", "layer_norm", "divide by N, not N - 1", "layer-norm-matches-torch"),
    _row("block-residual", "transformer_block", "add the input back", "layer-norm-matches-torch"),
]
BY_ID = {row["id"]: row for row in ROWS}


def test_a_failure_an_earlier_one_explains_gets_that_ones_hint_and_the_terminals_words():
    site = "https://course.example.org/gpt/"
    first, same, downstream = (render(r, autograde=False, site=site, rows=BY_ID)[0] for r in ROWS)
    assert "hint: divide by N, not N - 1" in first and "failed first" not in first
    told = told_with(ROWS[0], [ROWS[2]])
    assert told == (
        "one mistake: transformer_block uses layer_norm, so block-residual fails too; "
        "fix layer_norm first"
    )
    assert f"layer-norm-matches-torch failed first: {told}" in downstream
    # the first mistake's hint and section, never the downstream check's own misleading hint
    assert "hint (layer-norm-matches-torch): divide by N, not N - 1" in downstream
    assert "add the input back" not in downstream
    assert f"read: {site}chapters/05-block/#layer-norm" in downstream
    assert "block-residual went wrong" in downstream  # what happened is still its own
    assert told_with(ROWS[0], [ROWS[1]]) in same and "from the same mistake" in same
    # without the lesson's rows (an older caller), a row is told on its own
    alone = render(ROWS[2], autograde=False, site=site)[0]
    assert "hint: add the input back" in alone


def test_the_terminal_tells_the_same_grouping_with_the_same_words():
    from rich.console import Console

    from graders.terminal import render_lesson

    lesson = {"slug": "block", "title": "Block", "points": 0, "max_points": 6, "checks": ROWS}
    console = Console(file=io.StringIO(), width=300, color_system=None)
    render_lesson(console, lesson)
    printed = console.file.getvalue()
    assert told_with(ROWS[0], [ROWS[1]]) in printed
    assert told_with(ROWS[0], [ROWS[2]]) in printed
    assert "add the input back" not in printed  # told under the first mistake only


def test_submit_writes_the_zip_and_does_nothing_at_autograde(tmp_path, monkeypatch, capsys):
    from graders.notebook import submit

    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "windows.py").write_text("# mine\n")
    (tmp_path / "windows.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    submit("windows")
    assert not (tmp_path / "windows-submission.zip").exists() and not capsys.readouterr().out
    monkeypatch.delenv("NBGRADER_EXECUTION")
    submit("windows")
    assert (tmp_path / "windows-submission.zip").is_file()
    assert "windows-submission.zip" in capsys.readouterr().out


CELLS = """
import json, sys
from graders.notebook import check
print(json.dumps({c: check("windows", c) for c in sys.argv[1:]}))
"""


@pytest.mark.slow
def test_in_a_released_folder_a_downstream_cell_names_the_mistake_upstream(
    released_course, tmp_path
):
    """shift made wrong: TokenWindows's check fails because of it, and its cell says so with
    shift's hint, as the terminal does, not a hint of its own."""
    folder = tmp_path / "windows"
    shutil.copytree(released_course / "release" / "windows", folder)
    module = folder / "exercises" / "windows.py"
    module.write_text((ROOT / "solutions" / "windows.py").read_text())
    source = module.read_text()
    broken = source.replace(
        "return ids[..., :-1], ids[..., 1:]", "return ids[..., 1:], ids[..., :-1]"
    )
    assert broken != source, "the reference's shift changed: plant the mistake anew"
    module.write_text(broken)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SITE_URL"}
    env["PYTHONPATH"] = str(folder)
    checks = ["shift-pairs", "token-windows-items"]
    done = subprocess.run(
        [sys.executable, "-c", CELLS, *checks],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    *cells, values = done.stdout.strip().splitlines()
    assert json.loads(values) == {c: 0 for c in checks}
    said = "\n".join(cells)
    assert "shift-pairs failed first: one mistake: TokenWindows uses shift" in said, said
    assert "fix shift first" in said and f"read: {RELEASED_SITE}chapters/03-windows/#" in said
    # the command the release names says the same, and links the site, not course/ pages
    cli = subprocess.run(
        [sys.executable, "-m", "graders", "windows", "--json", str(tmp_path / "r.json")],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env | {"COLUMNS": "300"},  # one line per note: the test reads whole phrases
        timeout=900,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "one mistake: TokenWindows, make_loader uses shift, so token-windows-items" in cli.stdout
    assert "fix shift first" in cli.stdout
    assert f"see {RELEASED_SITE}chapters/03-windows/#" in cli.stdout
    assert "course/chapters" not in cli.stdout


FAKE_GRADERS = """
import json, sys, time
path = sys.argv[sys.argv.index("--json") + 1]
if "{mode}" == "missing":
    print("error: this Python has no package 'hypothesis': pip install -r requirements.txt",
          file=sys.stderr)
    sys.exit(2)
rows = [dict(id=i, function="f", points=0, max_points=1, passed=False, hint="h", link="x.md#y",
             url="x/#y", detail="not graded", hidden=False, explained_by=None) for i in "ab"]
rows[0].update(points=1, passed=True, hint=None, detail=None)
report = dict(complete=False, lessons=[dict(slug="l", checks=rows)])
with open(path + ".tmp", "w") as f:
    json.dump(report, f)
import os; os.replace(path + ".tmp", path)
time.sleep(600)  # the rest of the lesson, still grading
"""


def _fake_folder(tmp_path, mode):
    (tmp_path / "exercises").mkdir()
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "__init__.py").write_text("")
    (tmp_path / "graders" / "__main__.py").write_text(FAKE_GRADERS.replace("{mode}", mode))
    return tmp_path


def test_a_cell_shows_its_check_while_the_rest_of_the_lesson_still_grades(
    tmp_path, monkeypatch, capsys
):
    from graders import notebook

    monkeypatch.chdir(_fake_folder(tmp_path, "streaming"))
    assert notebook.check("l", "a") == 1
    assert "✓ a: 1 of 1 points" in capsys.readouterr().out
    (run,) = notebook._runs.values()
    try:
        assert run.process.poll() is None  # the first cell did not wait for the whole run
    finally:
        run.stop()
        notebook._runs.clear()


def test_a_package_the_environment_lacks_is_the_graders_one_line_in_the_cell(
    tmp_path, monkeypatch, capsys
):
    from graders import notebook

    monkeypatch.chdir(_fake_folder(tmp_path, "missing"))
    try:
        assert notebook.check("l", "a") == 0
    finally:
        for run in notebook._runs.values():
            run.stop()
        notebook._runs.clear()
    said = capsys.readouterr().out
    assert said == (
        "✗ a: 0 points: this Python has no package 'hypothesis': pip install -r requirements.txt\n"
    )
