"""JupyterHub's proxy, ``configurable-http-proxy``, from npm, for the JupyterHub class test.

JupyterHub is a Python package (the dev environment's ``hub`` extra); its proxy is a Node.js
program published on npm only. It is installed into ``.nox/npm/`` (beside the shared
virtualenvs, git-ignored), once: ``nox -s tests`` runs this file first
(``python tests/support/hub_proxy.py``), and the test installs it itself when it is run
without nox. Where npm is absent the test is skipped, under ``CI`` failed (as
:mod:`support.system_packages` does for Debian's packages).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

try:
    from support.system_packages import under_ci
except ModuleNotFoundError:  # run as a script (by nox): this folder is first on sys.path
    from system_packages import under_ci  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
PREFIX = ROOT / ".nox" / "npm"
# The major version JupyterHub 5 and 6 are tested with; npm picks the newest 5.x.
PACKAGE = "configurable-http-proxy@^5"
PROXY = PREFIX / "node_modules" / ".bin" / "configurable-http-proxy"


def install() -> Path:
    """The proxy's path, installing it with npm first if it is not there yet (one installer at
    a time: the pytest workers and nox may ask together). Raises ``FileNotFoundError`` naming
    what is missing where npm is not installed, ``RuntimeError`` with npm's last line where
    the install failed."""
    if PROXY.exists():
        return PROXY
    npm = shutil.which("npm")  # system_packages' finder: nox -s tests installs it with apt
    if npm is None:
        raise FileNotFoundError(
            "npm is not installed (`apt-get install -y npm`): JupyterHub's proxy, "
            "configurable-http-proxy, comes from npm"
        )
    PREFIX.mkdir(parents=True, exist_ok=True)
    with FileLock(PREFIX.parent / "npm.lock"):
        if not PROXY.exists():
            done = subprocess.run(
                [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", PACKAGE],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if done.returncode != 0 or not PROXY.exists():
                lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
                raise RuntimeError(f"npm install {PACKAGE} failed: {lines[-1]}")
    return PROXY


def main() -> int:
    """Install the proxy; exits 0 where npm is missing (the test skips), 1 under CI then."""
    try:
        print(f"JupyterHub's proxy: {install()}", flush=True)
    except (FileNotFoundError, RuntimeError) as error:
        print(f"{error}: the JupyterHub class test will be skipped", file=sys.stderr)
        return 1 if under_ci() else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
