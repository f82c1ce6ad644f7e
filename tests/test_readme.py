"""Every command in the code blocks of the README and the pages of docs/ works as written.

The cheap ones run here, through the module their nox session runs (read from noxfile.py) with
this interpreter, whose environment holds everything the sessions' environments do, forked
from the tests' warm template (tests/support/forkserver.py): none of them is a command's one
cold start (forkserver.COLD_STARTS names those). The others are listed in SKIPPED with the
reason and, where one does, the test that covers them; they are still checked to name a real
nox session or file. A new command in any of these pages must either run here or be listed.
"""

from __future__ import annotations

import ast
import re
import shlex
import sysconfig
import tomllib
from pathlib import Path

import pytest
from support import forkserver

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXT = "\n".join(page.read_text() for page in PAGES)

SKIPPED = {
    "python -m pip install nox && nox -s train": "installs nox and trains for minutes; "
    "test_training.py trains on the embedded corpus",
    "python -m pip install nox && nox -s tests": "the test suite itself",
    "python3 -m venv .venv && .venv/bin/python -m pip install nox && .venv/bin/nox -s tests": (
        "installs nox (from PyPI) into a new virtualenv, then the test suite itself"
    ),
    "nox -s grade": "grades all nine lessons; test_graders.py grades every lesson",
    "nox -s grade -- --watch windows": "runs until Ctrl-C; test_watch.py runs it, edits "
    "the lesson and stops it",
    "nox -s compare": "trains twice for 40 steps; test_compare.py runs compare on a small corpus",
    "nox -s course": "a server that runs until stopped; test_run_cells.py starts it",
    "nox -s train -- --steps 600 --out runs/longer": "minutes of training",
    "nox -s train -- --corpus time-machine": "downloads from Project Gutenberg (network); "
    "test_corpus.py downloads from a loopback server",
    "nox -s train -- --corpus path/to/book.txt": "a placeholder path; test_corpus.py and "
    "test_training.py train on text files",
    "nox -s tests": "the test suite itself",
    'nox -s tests -- -m "not slow"': "the test suite itself",
    "nox -s tests -- tests/gpt/test_model.py -x": "the test suite itself",
    "nox -s lint": "CI runs it as a session of its own",
    "python bench/train_throughput.py": "a benchmark: minutes",
    "python bench/train_throughput.py --corpus ../shared/data/time-machine.txt": "a benchmark, "
    "on a file outside the repository",
    "python bench/train_throughput.py --configs course-tiny --compile": "a benchmark: minutes",
    "python bench/train_throughput.py --device cuda": "a benchmark for a GPU; "
    "tests/bench/test_train_throughput.py runs its CPU fallback",
    "python bench/grading_latency.py": "a benchmark: minutes",
    "python bench/grading_latency.py --lesson windows": "a benchmark: a minute or two",
    "python bench/grading_latency.py --lesson windows --tree RELEASE/windows": "a benchmark, "
    "on a release folder that `instructor release` made",
    "python bench/autograde_throughput.py": "a benchmark: minutes",
    "python bench/hint_share.py": "a benchmark: grades every planted variant, minutes",
    # An external Dask cluster over TLS: machines and certificates of the reader's own;
    # tests/instructor/test_dask_cluster.py starts a scheduler and a worker apart, over TLS.
    "cd REPO && export PYTHONPATH=$PWD": "a placeholder folder, on each cluster machine",
    '"TLS=--tls-ca-file ca.pem --tls-cert cert.pem --tls-key key.pem"': "a shell variable",
    '"LOCAL=--dashboard-address 127.0.0.1:0"': "a shell variable",
    ".nox/dev/bin/dask scheduler --protocol tls --port 8786 $TLS $LOCAL": "a server until stopped",
    ".nox/dev/bin/dask worker tls://HOST:8786 --nworkers 2 --nthreads 1 $TLS $LOCAL": "a "
    "placeholder host",
    "export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True "
    "DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem "
    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=cert.pem "
    "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=key.pem": "shell variables",
    "nox -s autograde -- --scheduler tls://HOST:8786": "a placeholder host",
}
# Commands that must fail, as the pages say, with one line containing this text: a fresh
# clone's exercises are stubs, and training on them stops at the first one.
FAILS_WITH = {
    "nox -s train -- --lessons exercises": "is not implemented yet",
    "nox -s train -- --lessons exercises --out runs/mine": "is not implemented yet",
}


def readme_commands() -> list[str]:
    """The command lines of the pages' ```bash blocks, comments dropped."""
    blocks = re.findall(r"^```bash\n(.*?)^```", TEXT, flags=re.M | re.S)
    commands = []
    for block in blocks:
        # A line ending in a backslash goes on on the next one, as the shell reads it.
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:  # as written, quoting only the words with spaces
                commands.append(" ".join(f'"{w}"' if " " in w else w for w in words))
    return commands


def nox_sessions() -> dict[str, list[str]]:
    """Every session of noxfile.py -> the ``python`` arguments it runs (``["-m", MODULE]``)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    sessions = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("session" in ast.unparse(d) for d in node.decorator_list):
            continue
        args: list[str] = []
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "run":
                strings = [a.value for a in call.args if isinstance(a, ast.Constant)]
                if "-m" in strings:
                    args = strings[strings.index("-m") : strings.index("-m") + 2]
                    break
        sessions[node.name] = args
    return sessions


def as_python(command: str, tmp_path: Path) -> list[str]:
    """``nox -s NAME -- ARGS`` as the arguments of the python command that session runs
    (runs/ into tmp_path)."""
    words = shlex.split(command)
    assert words[:2] == ["nox", "-s"], command
    module = nox_sessions()[words[2]]
    assert module, f"nox -s {words[2]} runs no python module this test knows how to call"
    args = words[4:] if words[3:4] == ["--"] else words[3:]
    args = [str(tmp_path / a) if a.startswith("runs/") else a for a in args]
    return [*module, *args]


COMMANDS = readme_commands()


def test_the_pages_are_the_readme_and_docs() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "docs/instructors.md", "docs/developers.md", "docs/training.md"} <= names


def test_the_readme_links_every_page_of_docs() -> None:
    readme = PAGES[0].read_text()
    for page in PAGES[1:]:
        assert f"](docs/{page.name})" in readme, page.name


def test_the_readme_has_commands_and_every_skip_is_still_in_it() -> None:
    assert len(COMMANDS) >= 10
    assert set(SKIPPED) <= set(COMMANDS), set(SKIPPED) - set(COMMANDS)
    assert set(FAILS_WITH) <= set(COMMANDS), set(FAILS_WITH) - set(COMMANDS)


def test_every_nox_session_the_readme_names_exists() -> None:
    named = set(re.findall(r"nox -s ([a-z][a-z-]*)", TEXT))  # NAME: a placeholder
    assert named and named <= set(nox_sessions()), named - set(nox_sessions())


def _noxfile_constant(name: str):
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py has no {name}")


def test_the_environments_the_readme_names_are_the_noxfiles() -> None:
    named = set(re.findall(r"\.nox/([a-z]+)", TEXT))
    assert named and named <= set(_noxfile_constant("ENVIRONMENTS")), named
    assert "`grading` environment" not in TEXT  # an extra, not an environment


def test_the_torch_choice_the_readme_names_is_the_noxfiles() -> None:
    named = set(re.findall(r"COURSE_TORCH=([a-z]+)", TEXT))
    assert named and named <= set(_noxfile_constant("TORCH_CHOICES")), named


def test_the_console_commands_the_readme_names_exist() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    named = set(re.findall(r"`(course-[a-z]+)`", TEXT))
    assert named == set(scripts), named ^ set(scripts)


def test_the_environments_programs_the_readme_runs_are_installed() -> None:
    """``.nox/dev/bin/nbgrader ...``: this interpreter's environment holds what dev holds."""
    named = set(re.findall(r"\.nox/dev/bin/([a-z][a-z-]*)", TEXT))
    assert "nbgrader" in named
    here = Path(sysconfig.get_path("scripts"))
    for program in named:
        assert (here / program).exists() or (here / f"{program}.exe").exists(), program


@pytest.mark.parametrize("command", [c for c in COMMANDS if c in SKIPPED])
def test_skipped_commands_still_name_real_things(command: str) -> None:
    for part in command.split("&&"):
        words = shlex.split(part)
        if Path(words[0]).name == "nox" and words[1] == "-s":
            assert words[2] in nox_sessions(), command
        elif words[0] == "python" and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), command


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in SKIPPED])
def test_command_works_as_written(command: str, tmp_path: Path) -> None:
    done = forkserver.run(
        as_python(command, tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    if command in FAILS_WITH:
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and FAILS_WITH[command] in lines[0], done.stderr
    else:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "Traceback" not in done.stderr


def test_ci_runs_the_readmes_test_command_under_ci_true() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert script[-1] == "python -m pip install nox && nox -s tests" in COMMANDS
    assert 'export CI="${CI:-true}"' in script  # absent system packages fail, never skip
