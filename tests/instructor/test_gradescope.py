"""The Gradescope autograder zip (instructor/gradescope.py), deployed as Gradescope deploys it:
unpacked under a temporary root laid out as /autograder (source/, submission/, results/),
``setup.sh``'s checks run (its installs need the network), then ``run_autograder``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.autograder_folder import lay_out

from core.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
# Appended to the reference module: at import, in the worker, it tries what a hostile
# submission did (the oracles and hidden graders beside gpt/, which the worker imports, and the
# seed on the checker's command line or in an environment) and refuses to be graded if any of it
# can be read, or if it runs as root. Full marks mean it could read none of it.
HOSTILE = '''

def _reached():
    """What of the checker's secrets this process can read."""
    import os
    from pathlib import Path

    import gpt

    source = Path(gpt.__file__).resolve().parents[1]
    wanted = [
        source / "graders" / "secret" / "oracles" / "__init__.py",
        source / "graders" / "hidden" / "__init__.py",
        source / "course" / "lessons.toml",
    ]
    reached, seeds = [], []
    for process in Path("/proc").iterdir():
        try:
            args = (process / "cmdline").read_bytes().split(b"\\0")
            if b"--seed-file" in args:
                seeds.append(Path(os.fsdecode(args[args.index(b"--seed-file") + 1])))
            if b"COURSE_INPUT_SEED=" in (process / "environ").read_bytes():
                reached.append(f"{process}/environ")
        except (OSError, IndexError):
            continue
    if not seeds:
        raise RuntimeError("no --seed-file on any command line: the attack found no seed")
    for path in wanted + seeds:
        try:
            path.read_bytes()
        except OSError:
            continue
        reached.append(str(path))
    return reached


import os as _os

if _os.geteuid() == 0:
    raise RuntimeError("the student's code runs as root")
if _reached():
    raise RuntimeError(f"the student's code read the checker's secrets: {_reached()}")
'''


def _run(script: Path, autograder: Path, env: dict[str, str], *args: str):
    return subprocess.run(
        ["bash", str(script), *args],
        env={**os.environ, "AUTOGRADER_ROOT": str(autograder), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _results(autograder: Path, env: dict[str, str], isolated: str = "") -> dict:
    """run_autograder's results.json; ``isolated``: how it says it ran the student's code."""
    done = _run(autograder / "run_autograder", autograder, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"grading with the student's code in {isolated}" in done.stdout, done.stdout[-3000:]
    return json.loads((autograder / "results" / "results.json").read_text())


def _config(gradescope_zip: Path) -> dict:
    """The zip's gradescope.json: the lesson, its module and the course site's address."""
    with zipfile.ZipFile(gradescope_zip) as archive:
        return json.loads(archive.read("gradescope.json"))


def test_setup_installs_python_311_torch_cpu_and_every_package(gradescope_zip):
    """On Gradescope's Ubuntu 22.04 (Python 3.10): Python 3.11 from deadsnakes in a virtualenv,
    PyTorch from its CPU index alone (never PyPI's CUDA build), the requirements, GPT-2's
    vocabulary package without its dependencies, then the self-check; valid bash."""
    from gpt.vocab import VOCAB_PACKAGE

    with zipfile.ZipFile(gradescope_zip) as archive:
        text = archive.read("setup.sh").decode()
        names = set(archive.namelist())
        assert archive.read("constraints.txt") == (ROOT / "constraints.txt").read_bytes()
    assert "add-apt-repository -y ppa:deadsnakes/ppa" in text
    assert "apt-get install -y --no-install-recommends python3.11 python3.11-venv" in text
    assert "bubblewrap" in text and "util-linux" in text
    torch = next(line for line in text.splitlines() if line.rstrip().endswith(" torch"))
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch and "--no-deps" in torch
    assert f"--no-deps {VOCAB_PACKAGE}" in text
    assert text.rstrip().endswith('gradescope_run.py" --setup')
    config = _config(gradescope_zip)
    lesson = load_manifest().lesson(config["lesson"])
    assert config["module"] == lesson.module and config["site_url"].startswith("https://")
    assert {"run_autograder", "setup.sh", "gradescope_run.py", "requirements.txt"} <= names
    assert f"graders/hidden/test_{lesson.slug}.py" in names
    assert not any(name.startswith("solutions/") for name in names)
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.slow
def test_without_bubblewrap_the_upload_runs_as_an_unprivileged_user_away_from_the_secrets(
    gradescope_zip, unpack, student_user, student_python, path_without_bwrap
):
    """No bwrap on PATH, as in Gradescope's containers: setup.sh's checks create the user,
    lock the checker's secrets and find the fallback working; run_autograder then grades the
    upload as that user. The upload (the reference, with a hostile submission's reach for the
    oracles, the hidden graders and the seed) gets every point: it ran, not as root, and read
    none of them. Public checks are visible, hidden ones after publication; links are on the
    course site."""
    autograder = unpack("fallback")
    env = {"PYTHON": student_python, "PATH": path_without_bwrap}
    setup = _run(autograder / "source" / "setup.sh", autograder, env, "--check")
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert f"ok: the unprivileged user {student_user}" in setup.stdout
    assert f"isolated: the unprivileged user {student_user}" in setup.stdout
    assert "not sandboxed: bubblewrap is not installed (no bwrap on PATH)" in setup.stdout
    for locked in ("graders/secret", "graders/hidden", "course"):
        assert (autograder / "source" / locked).stat().st_mode & 0o077 == 0, locked

    config = _config(gradescope_zip)
    module = f"{config['module']}.py"
    upload = (ROOT / "solutions" / module).read_text() + HOSTILE
    (autograder / "submission" / module).write_text(upload)
    results = _results(autograder, env, f"the unprivileged user {student_user}")
    lesson = load_manifest().lesson(config["lesson"])
    tests = {t["name"].split(" ")[0]: t for t in results["tests"]}
    assert set(tests) == {c.id for c in lesson.checks}, results
    assert all(t["score"] == t["max_score"] > 0 for t in tests.values()), results
    for check in lesson.checks:
        assert tests[check.id]["visibility"] == ("after_published" if check.hidden else "visible")
        assert tests[check.id]["output"] == f"Read: {config['site_url']}{check.url}", check.id


def test_the_hostile_upload_reaches_the_secrets_where_permissions_allow(
    unpack, open_folder, student_python
):
    """The control of the test above: run as root (whom permissions do not stop), the same
    code reads the oracles, the hidden graders, the manifest and a seed named on a command line,
    so full marks there mean the fallback stopped it, not that it tried nothing."""
    autograder = unpack("control")
    seed = open_folder / "private" / "seed"
    seed.parent.mkdir(mode=0o700)
    seed.write_text("12345\n")
    seed.chmod(0o600)
    code = HOSTILE.split("\n\nimport os as _os")[0] + "\nprint('\\n'.join(_reached()))\n"
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    holder = subprocess.Popen([*sleeper, "--seed-file", str(seed)])
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1])\n" + code]
            + [str(autograder / "source")],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    reached = set(done.stdout.split())
    source = autograder / "source"
    assert {
        str(source / "graders" / "secret" / "oracles" / "__init__.py"),
        str(source / "graders" / "hidden" / "__init__.py"),
        str(source / "course" / "lessons.toml"),
        str(seed),
    } <= reached


@pytest.mark.slow
@pytest.mark.usefixtures("bubblewrap")
def test_with_bubblewrap_the_upload_is_graded_in_the_sandbox(gradescope_zip, unpack):
    """Where bwrap starts, the worker runs in the sandbox: the reference uploaded alone scores
    every check; an upload without the module gets 0 and what to do."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox's own tests cover a non-root checker")
    autograder = unpack("sandboxed")
    # The environment's own path, which the sandbox mounts (a symlink to it may not be there).
    env = {"PYTHON": os.path.join(os.path.realpath(sys.prefix), "bin", "python")}
    config = _config(gradescope_zip)
    module = f"{config['module']}.py"
    shutil.copy(ROOT / "solutions" / module, autograder / "submission")
    results = _results(autograder, env, "the bubblewrap sandbox")
    lesson = load_manifest().lesson(config["lesson"])
    tests = {t["name"].split(" ")[0]: t for t in results["tests"]}
    assert set(tests) == {c.id for c in lesson.checks}
    assert all(t["score"] == t["max_score"] > 0 for t in tests.values()), results

    (autograder / "submission" / module).unlink()
    (autograder / "submission" / "notes.txt").write_text("forgot the file\n")
    done = _run(autograder / "run_autograder", autograder, env)
    results = json.loads((autograder / "results" / "results.json").read_text())
    assert done.returncode == 0 and results["score"] == 0, done.stdout + done.stderr
    assert f"no {module} in the submission" in results["output"]


def test_the_block_lesson_uploaded_alone_gets_every_point(tmp_path, open_folder, bubblewrap):
    """The reference block.py uploaded alone to the block lesson's autograder (its package the
    released one: lessons 2 and 4 as stubs) scores every check in the sandbox: the checker
    answers lesson 4's attention and lesson 2's lookup, as at autograde."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox's own tests cover a non-root checker")
    pytest.importorskip("nbformat", reason="the grading extra (nbgrader) is not installed")
    from instructor.course import Course
    from instructor.gradescope import build

    course = tmp_path / "course"
    released = course / "source" / "block" / "exercises"
    shutil.copytree(ROOT / "exercises", released, ignore=shutil.ignore_patterns("__pycache__"))
    (course / "release.json").write_text(json.dumps({"site_url": "https://example.org/"}))
    archive = build(Course.at(course), "block", course / "gradescope")
    autograder = lay_out(archive, open_folder / "block" / "autograder")
    shutil.copy(ROOT / "solutions" / "block.py", autograder / "submission")
    env = {"PYTHON": os.path.join(os.path.realpath(sys.prefix), "bin", "python")}
    results = _results(autograder, env, "the bubblewrap sandbox")
    tests = {t["name"].split(" ")[0]: t for t in results["tests"]}
    assert set(tests) == {c.id for c in load_manifest().lesson("block").checks}
    assert all(t["score"] == t["max_score"] > 0 for t in tests.values()), results
