"""Every command of the course: `nox -s NAME`. Sessions reuse their virtualenv.

A session installs its requirements only when pyproject.toml or constraints.txt changed
since its last install, so a second run starts in seconds.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

PYTHON = "3.11"
# GPT-2's merge ranks, offline: the sdist ships whisper/assets/gpt2.tiktoken. Its own
# dependencies (numba, triton, ...) are not needed, hence --no-deps; we never import whisper.
VOCAB_PACKAGE = "openai-whisper==20250625"


def _requirements(*extras: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    return wanted


def install(session: nox.Session, *extras: str, extra_packages: tuple[str, ...] = ()) -> None:
    """Install the project's requirements (plus extras) unless already up to date."""
    requirements = _requirements(*extras) + list(extra_packages)
    digest = hashlib.sha256(
        "\n".join(requirements).encode()
        + (ROOT / "constraints.txt").read_bytes()
        + VOCAB_PACKAGE.encode()
    ).hexdigest()
    stamp = Path(session.virtualenv.location) / ".course-requirements"
    if stamp.exists() and stamp.read_text() == digest:
        session.log("requirements up to date; skipping install")
        return
    session.install("-c", str(ROOT / "constraints.txt"), *requirements)
    session.install("--no-deps", VOCAB_PACKAGE)
    stamp.write_text(digest)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The project's own test suite (pytest); pass pytest options after `--`."""
    install(session, "test", "docs", "grading", extra_packages=("playwright>=1.40,<2", "ruff"))
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def train(session: nox.Session) -> None:
    """Train the reference GPT on the embedded corpus; options after `--` (see --help)."""
    install(session)
    session.run("python", "-m", "solutions.train", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff over the whole tree."""
    session.install("ruff>=0.5,<1")
    session.run("ruff", "check", ".")
    formatted = ["solutions", "graders", "tools", "tests", "bench", "site", "noxfile.py"]
    session.run("ruff", "format", "--check", *formatted)


@nox.session(python=PYTHON)
def exercises(session: nox.Session) -> None:
    """Regenerate exercises/ from solutions/ (instructors; overwrites exercises/)."""
    session.run("python", "tools/generate_exercises.py", *session.posargs)


@nox.session(python=PYTHON)
def compare(session: nox.Session) -> None:
    """Train with your functions beside the reference; options after `--` (see --help)."""
    install(session)
    session.run("python", "-m", "graders.compare", *session.posargs)


@nox.session(python=PYTHON)
def generate(session: nox.Session) -> None:
    """Continue a prompt with GPT-2 or a trained run: `nox -s generate -- "PROMPT" [--model M]`."""
    install(session)
    session.run("python", "-m", "solutions.generate", *session.posargs)


DOCS_ENV = {"NO_MKDOCS_2_WARNING": "1"}  # silences Material's end-of-life banner


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the site strictly into build/site (COURSE_INSTRUCTOR=1: build/site-instructor)."""
    install(session, "docs")
    session.run(
        "python",
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-f",
        "mkdocs.yml",
        *session.posargs,
        env=DOCS_ENV,
    )


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Serve the course site with live reload at http://127.0.0.1:8000/."""
    install(session, "docs")
    session.run(
        "python", "-m", "mkdocs", "serve", "-f", "mkdocs.yml", *session.posargs, env=DOCS_ENV
    )


def _instructor(session: nox.Session, command: str) -> None:
    install(session, "grading", "test")
    session.run("python", "-m", "graders.instructor", command, *session.posargs)


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """Instructors: nbgrader course in build/nbgrader (source/, release/); lessons after `--`."""
    _instructor(session, "release")


@nox.session(python=PYTHON)
def collect(session: nox.Session) -> None:
    """Instructors: zips in build/nbgrader/downloaded/LESSON/archive/ -> submitted/."""
    _instructor(session, "collect")


@nox.session(python=PYTHON)
def autograde(session: nox.Session) -> None:
    """Instructors: collect, grade (sandboxed, parallel), record, feedback, export; see --help."""
    _instructor(session, "autograde")


@nox.session(python=PYTHON)
def feedback(session: nox.Session) -> None:
    """Instructors: feedback HTML in build/nbgrader/feedback/ (hidden tests stripped)."""
    _instructor(session, "feedback")


@nox.session(python=PYTHON)
def export(session: nox.Session) -> None:
    """Instructors: build/nbgrader/grades.csv and grades-by-check.csv from the gradebook."""
    _instructor(session, "export")


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Instructors: what the class gets wrong, build/nbgrader/reports/mistakes.html and .csv."""
    _instructor(session, "report")


@nox.session(python=PYTHON)
def grade(session: nox.Session) -> None:
    """Grade exercises/: points, a hint and a lesson link per failed check.

    `nox -s grade -- embeddings` grades one lesson; `-- --hidden` adds the hidden checks
    (instructors); `-- --target DIR` grades another package; see `-- --help`.
    """
    install(session, "test")
    session.run("python", "-m", "graders", *session.posargs)
