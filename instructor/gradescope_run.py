"""Gradescope's ``run_autograder`` for one lesson: grade the upload, write ``results.json``.

This file travels in the autograder zip that :mod:`.gradescope` builds and runs there, as a
script, from ``/autograder/source`` (the zip's contents): standard library only at import,
the course's graders at run time. Gradescope puts the student's upload in
``/autograder/submission/`` and reads ``/autograder/results/results.json``
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). The upload is the lesson's
module (``MODULE.py``, alone or inside the released ``exercises/`` folder); the rest of the
package is the released one, as in nbgrader autograde. Hidden checks are reported with
visibility ``after_published``: students see them once the instructor publishes the grades,
and never with their inputs or expected values; public checks keep what the student's code
returned and what it should have.

The student's code never runs unisolated. Before grading, the runner starts the bubblewrap
sandbox (``--sandbox``) when ``bwrap`` is on PATH and can start; else (Gradescope's containers
usually lack the privilege bubblewrap needs) the worker runs as the unprivileged user
``STUDENT_USER`` that ``setup.sh`` creates (graders/worker_user.py), with ``LOCKED`` (the secret
half, the hidden graders, the full manifest), the run's seed and its report unreadable to it:
the runner makes them so and starts a probe as that user to check it. Where neither works,
``results.json`` says so and nothing is graded. The seed reaches the checker in a file only
root reads (``--seed-file``), never in the environment.

``python3 gradescope_run.py --setup`` is ``setup.sh``'s last step: it creates the user, locks
``LOCKED`` and checks that grading can run here, a line per check.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent
PACKAGE = "exercises"
TIMEOUT = 900  # seconds for the grading run (Gradescope's own limit is set on its page)
MIN_PYTHON = (3, 11)
STUDENT_USER = "gradescope-student"  # the worker's user where bubblewrap cannot start
LOCKED = ("graders/secret", "graders/hidden", "course")  # the checker's alone (root's)
SYSTEM_TOOLS = "/usr/bin:/bin:/usr/sbin:/sbin"  # where root finds useradd, never the PATH
LEAKED = 3  # the probe's exit status when it could read what it must not
# Run as the worker's user: it must import torch and read the provided package and the
# target (sys.argv[1], joined with os.pathsep), and must read nothing of sys.argv[2:].
PROBE = """\
import os, sys
import torch
for path in sys.argv[1].split(os.pathsep):
    os.listdir(path)
readable = []
for path in sys.argv[2:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
    except OSError:
        continue
    readable.append(path)
print(" ".join(readable))
sys.exit(3 if readable else 0)
"""


@dataclass(frozen=True)
class Isolation:
    """How the student's code is kept from the checker: words for the log, and what the
    grading command needs for it (options and environment)."""

    name: str
    options: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


class NotIsolated(RuntimeError):
    """Neither the sandbox nor the unprivileged user can run the student's code here."""


def results(report: dict[str, Any], site: str | None = None) -> dict[str, Any]:
    """Gradescope's results.json from the harness's JSON report: a test per check, its links
    on the course site at ``site``."""
    tests = []
    notes = []
    for lesson in report.get("lessons", []):
        if lesson.get("import_error"):
            notes.append(
                f"Your module failed to import, so its checks could not run: "
                f"{lesson['import_error']}"
            )
        for row in lesson["checks"]:
            tests.append(
                {
                    "name": f"{row['id']} ({row['function']})",
                    "score": row["points"],
                    "max_score": row["max_points"],
                    "output": check_output(row, site),
                    "visibility": "after_published" if row.get("hidden") else "visible",
                }
            )
    if not report.get("complete", True):
        notes.append(
            "The grading run stopped before every check was graded (the autograder's time "
            "limit): the checks it did not reach score 0."
        )
    graded: dict[str, Any] = {"tests": tests, "stdout_visibility": "hidden"}
    if notes:
        graded["output"] = "\n".join(notes)
    return graded


def check_output(row: dict[str, Any], site: str | None) -> str:
    """A check's text: for a failure its hint, and for a public check what the code returned
    against what it should have (a hidden check's detail never shows); then its section."""
    words = []
    if not row.get("passed"):
        words.append(row.get("hint") or "")
        if not row.get("hidden"):
            words.append(row.get("detail") or "")
    where = row.get("url") or row.get("link")
    if where and site and "://" not in where:
        where = site.rstrip("/") + "/" + where
    if where:
        words.append(f"Read: {where}")
    return "\n".join(w for w in words if w)


def failed(why: str) -> dict[str, Any]:
    """A run that graded nothing: 0 points, and what to do, as the whole result."""
    return {"score": 0, "output": why, "tests": [], "stdout_visibility": "hidden"}


def not_graded(why: str) -> dict[str, Any]:
    """The autograder itself cannot grade here: the student is told it is not their doing."""
    print(f"not graded: {why}", flush=True)
    return failed(
        f"Not graded: {why}. This is a fault of the course's autograder, not of your "
        "submission: the course staff must fix it, and can regrade your submission then."
    )


def find_upload(submission: Path, module: str) -> Path | None:
    """The student's ``MODULE.py``: in the released folder layout or uploaded alone."""
    for candidate in (submission / PACKAGE / f"{module}.py", submission / f"{module}.py"):
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    found = sorted(
        p for p in submission.rglob(f"{module}.py") if p.is_file() and not p.is_symlink()
    )
    return found[0] if found else None


def lock_secrets(source: Path | None = None) -> list[Path]:
    """Make ``LOCKED`` of ``source`` (default: ``SOURCE``) readable by its owner alone (the
    checker's user, root on Gradescope); returns the folders locked."""
    locked = []
    for name in LOCKED:
        top = (source or SOURCE) / name
        if not top.is_dir():
            continue
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o700 if path.is_dir() else 0o600)
        locked.append(top)
    return locked


def _checker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(SOURCE), PYTHONSAFEPATH="1", **(extra or {}))
    env.pop("COURSE_INPUT_SEED", None)  # the seed travels in its file only
    return env


def _last_line(text: str, fallback: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else fallback


def _probe(
    command: list[str], cwd: Path | str, env: dict[str, str]
) -> subprocess.CompletedProcess[str] | str:
    """The probe's finished process, or (a string) why it could not run."""
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)


def probe_sandbox() -> str | None:
    """None when graders/sandbox.py can start its sandbox here, else why not."""
    code = (
        "import sys; from pathlib import Path; from graders.sandbox import worker_command; "
        "worker_command([], Path(sys.argv[1]), sandbox=True)"
    )
    done = _probe([sys.executable, "-c", code, str(SOURCE)], SOURCE, _checker_env())
    if isinstance(done, str):
        return done
    return None if done.returncode == 0 else _last_line(done.stderr, f"exit {done.returncode}")


def probe_user(readable: list[Path], unreadable: list[Path]) -> str | None:
    """None when the worker can run as ``STUDENT_USER`` (Python and torch start, ``readable``
    can be read) and ``unreadable`` is out of its reach, else why not."""
    if os.geteuid() != 0:
        return "the autograder does not run as root, so it cannot switch to that user"
    from graders.worker_user import WorkerUserError, user_prefix

    try:
        prefix = user_prefix(STUDENT_USER)
    except WorkerUserError as error:
        return str(error)
    command = [*prefix, sys.executable, "-I", "-c", PROBE]
    command += [os.pathsep.join(map(str, readable)), *map(str, unreadable)]
    with tempfile.TemporaryDirectory(prefix="gradescope-probe-") as work:
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"}
        done = _probe(command, work, env)
    if isinstance(done, str):
        return done
    if done.returncode == 0:
        return None
    if done.returncode == LEAKED:
        return f"user {STUDENT_USER} can read {done.stdout.strip()}, which must be root's alone"
    why = _last_line(done.stderr, f"exit {done.returncode}")
    return f"user {STUDENT_USER} cannot run the grading worker ({sys.executable}): {why}"


def choose_isolation(target: Path, secret: list[Path]) -> Isolation:
    """The sandbox where it starts, else the unprivileged user where it works (with
    ``secret`` out of its reach); raises :class:`NotIsolated` saying why neither does."""
    reasons = []
    if shutil.which("bwrap"):
        why = probe_sandbox()
        if why is None:
            return Isolation("the bubblewrap sandbox", ("--sandbox",))
        reasons.append(f"the bubblewrap sandbox cannot start here ({why})")
    else:
        reasons.append("bubblewrap is not installed (no bwrap on PATH)")
    why = probe_user([SOURCE / "gpt", target], [*lock_secrets(), *secret])
    if why is None:
        print(f"not sandboxed: {reasons[0]}", flush=True)
        from graders.worker_user import WORKER_USER_VARIABLE

        return Isolation(
            f"the unprivileged user {STUDENT_USER}", (), {WORKER_USER_VARIABLE: STUDENT_USER}
        )
    reasons.append(f"and the unprivileged fallback does not work: {why}")
    raise NotIsolated("; ".join(reasons))


@contextmanager
def workspace(upload: Path | None, module: str) -> Iterator[tuple[Path, Path, Path]]:
    """The grading run's folders, removed after: the target package (the released one with
    ``upload`` as ``MODULE.py``) in a folder every user may read but not change, and the run's
    own folder (the checker's alone) holding the seed file; yields (target, private, seed)."""
    with (
        tempfile.TemporaryDirectory(prefix="gradescope-") as private,
        tempfile.TemporaryDirectory(prefix="gradescope-upload-") as shared,
    ):
        os.chmod(shared, 0o755)
        target = Path(shared) / PACKAGE
        shutil.copytree(SOURCE / PACKAGE, target)
        if upload is not None:
            shutil.copyfile(upload, target / f"{module}.py")
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        seed = Path(private) / "seed"
        seed.touch(0o600)
        seed.write_text(f"{secrets.randbelow(2**63 - 1) + 1}\n", encoding="utf-8")
        yield target, Path(private), seed


def load_config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SOURCE / "gradescope.json").read_text(encoding="utf-8"))
    return data


def grade(root: Path) -> dict[str, Any]:
    try:
        python_version()
    except RuntimeError as error:
        return not_graded(f"the graders need a newer Python than this autograder's {error}")
    config = load_config()
    lesson, module = config["lesson"], config["module"]
    upload = find_upload(root / "submission", module)
    if upload is None:
        return failed(
            f"no {module}.py in the submission: upload the lesson's module "
            f"({PACKAGE}/{module}.py) and submit again"
        )
    with workspace(upload, module) as (target, private, seed):
        try:
            isolation = choose_isolation(target, [private, seed])
        except NotIsolated as error:
            return not_graded(f"the student's code cannot be run isolated here: {error}")
        print(f"grading with the student's code in {isolation.name}", flush=True)
        report_path = private / "report.json"
        command = [sys.executable, "-m", "graders", lesson, "--target", str(target), "--hidden"]
        command += ["--json", str(report_path), "--seed-file", str(seed), *isolation.options]
        try:
            subprocess.run(
                command,
                cwd=SOURCE,
                env=_checker_env(isolation.env),
                stdin=subprocess.DEVNULL,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pass  # the report holds the checks graded so far
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return not_graded(
                "the grading run ended without a report (the autograder's log says why)"
            )
    return results(report, config.get("site_url"))


def python_version(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> str:
    """The running Python's version, if the graders can run on it."""
    text = ".".join(map(str, version))
    if version < MIN_PYTHON:
        raise RuntimeError(f"{text}: setup.sh installs 3.11 (deadsnakes)")
    return text


def _packages() -> str:
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import tiktoken  # noqa: F401
    import torch

    import graders.runner  # noqa: F401

    cuda = torch.version.cuda
    build = "CPU build" if cuda is None else f"CUDA {cuda} build: PyPI's, the CPU one is enough"
    return f"torch {torch.__version__} ({build})"


def _vocabulary() -> str:
    from gpt.vocab import VOCAB_INSTALL, ranks_path

    path = ranks_path()
    if path is None:
        raise RuntimeError(f"GPT-2's merge ranks are not installed: {VOCAB_INSTALL}")
    return str(path)


def ensure_user() -> str:
    """``STUDENT_USER``, created (a system user without home or shell) when missing."""
    import pwd

    try:
        return f"uid {pwd.getpwnam(STUDENT_USER).pw_uid}"
    except KeyError:
        pass
    useradd = shutil.which("useradd", path=SYSTEM_TOOLS)
    if os.geteuid() != 0 or not useradd:
        raise RuntimeError("it is missing, and only root with useradd can create it")
    made = subprocess.run(
        [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            STUDENT_USER,
        ],
        capture_output=True,
        text=True,
    )
    try:  # another setup may have created it meanwhile
        return f"created, uid {pwd.getpwnam(STUDENT_USER).pw_uid}"
    except KeyError:
        raise RuntimeError(_last_line(made.stderr, f"useradd: exit {made.returncode}")) from None


def _isolation() -> str:
    with workspace(None, "") as (target, private, seed):
        return choose_isolation(target, [private, seed]).name


def setup() -> int:
    """``setup.sh``'s last step: a line per check that grading can run here; 1 if one fails."""
    checks: list[tuple[str, Callable[[], str]]] = [
        (f"Python {'.'.join(map(str, MIN_PYTHON))} or later", python_version),
        ("the grader's packages", _packages),
        ("GPT-2's vocabulary", _vocabulary),
        (f"the unprivileged user {STUDENT_USER}", ensure_user),
        ("the student's code isolated", _isolation),
    ]
    failures = 0
    for what, check in checks:
        try:
            print(f"ok: {what}: {check()}", flush=True)
        except (ImportError, OSError, RuntimeError, ValueError) as error:
            failures += 1
            print(f"FAILED: {what}: {error}", flush=True)
    print("the autograder is ready" if not failures else f"{failures} check(s) failed", flush=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--setup"]:
        return setup()
    if args:
        print("usage: gradescope_run.py [--setup]", file=sys.stderr)
        return 2
    root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # Gradescope: the student's code, as another user, cannot write there
        out.parent.chmod(0o755)
    data = json.dumps(grade(root), indent=1) + "\n"
    partial = out.with_name(".results.json.partial")
    partial.write_text(data, encoding="utf-8")
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
