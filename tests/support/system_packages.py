"""The system packages some tests need, found in one place.

Debian's ``bubblewrap`` sandboxes graded code, ``chromium`` drives the browser tests, ``npm``
installs axe-core for the accessibility test and JupyterHub's proxy for the JupyterHub class
test (:mod:`support.hub_proxy`), and ``postgresql`` serves the shared-gradebook test. A test
asks with ``require(PACKAGE)``: it gets the path it needs, or is skipped with one line naming
the package and the command that installs it, which pytest's summary (``-ra``) shows. Under
``CI`` the absence fails the test instead: a CI machine that lost a package must not turn its
tests into skips unnoticed.

``nox -s tests`` runs this file first (``python tests/support/system_packages.py``): as root
with apt-get it installs what is missing, otherwise it prints the one command to run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


@functools.cache
def _sandbox_works(bwrap: str) -> str | None:
    """None when ``bwrap`` can make an empty sandbox like the grader's, else why not (as a
    non-root user it needs unprivileged user namespaces, which Ubuntu 24.04 restricts)."""
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
    probe += ["--proc", "/proc", "--dev", "/dev", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
    return None if done.returncode == 0 else lines[0]


def _bubblewrap() -> Path | None:
    found = shutil.which("bwrap")
    return Path(found) if found else None


def _chromium() -> Path | None:
    # Debian's own build; the tests launch it through Playwright with this path.
    path = Path("/usr/bin/chromium")
    return path if path.exists() else None


def _npm() -> Path | None:
    # Debian's npm, or the one Node.js's own packages bring: it installs axe-core for the
    # accessibility test (tests/support/axe.py) and JupyterHub's proxy (tests/support/hub_proxy.py).
    found = shutil.which("npm")
    return Path(found) if found else None


def _postgresql() -> Path | None:
    """The folder holding initdb and postgres: on PATH, or Debian's versioned folder."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


# Debian package -> what finds it (None: absent).
PACKAGES: dict[str, Callable[[], Path | None]] = {
    "bubblewrap": _bubblewrap,
    "chromium": _chromium,
    "npm": _npm,
    "postgresql": _postgresql,
}


def under_ci() -> bool:
    """``CI`` is set, as CI services do (``CI=true``); ``CI=false`` or ``0`` is not CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing() -> list[str]:
    return [name for name, find in PACKAGES.items() if find() is None]


def install_command(names: list[str]) -> str:
    prefix = "" if _is_root() else "sudo "
    return f"{prefix}apt-get install -y {' '.join(names)}"


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the calling test with ``reason``; fail it under CI, which must run every test."""
    import pytest

    if under_ci():
        pytest.fail(f"{reason}, and CI must run every test", pytrace=False)
    pytest.skip(reason)


def require(name: str) -> Path:
    """The path of system package ``name``; skips the test (fails it under CI) when absent."""
    found = PACKAGES[name]()
    if found is None:
        reason = f"{name} is not installed (`{install_command([name])}`)"
    elif name == "bubblewrap" and (why := _sandbox_works(str(found))):
        reason = (
            f"bubblewrap cannot make a sandbox here ({why}): it needs root or unprivileged user "
            "namespaces (graders/sandbox.py says which settings)"
        )
    else:
        return found
    skip_or_fail(reason)


def main() -> int:
    """Install what is missing where this process can (root, apt-get), else name the command.

    Exits 0 either way (the tests that need a package skip), except under CI, where a package
    that is still missing is an error.
    """
    absent = missing()
    if absent and _is_root() and shutil.which("apt-get") and sys.platform.startswith("linux"):
        print(f"installing the system packages the tests need: {' '.join(absent)}", flush=True)
        env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
        quiet = {"stdout": subprocess.DEVNULL, "env": env}
        subprocess.run(["apt-get", "update", "-qq"], check=False, **quiet)
        subprocess.run(["apt-get", "install", "-y", "-qq", *absent], check=False, **quiet)
        absent = missing()
    if not absent:
        return 0
    print(
        f"{', '.join(absent)} not installed: the tests that need them will be skipped; "
        f"install with `{install_command(absent)}`",
        file=sys.stderr,
    )
    return 1 if under_ci() else 0


if __name__ == "__main__":
    sys.exit(main())
