"""axe-core, the accessibility engine browsers' own audits use, for the site's browser tests.

npm's ``axe-core`` package is one JavaScript file that a test injects into a page and runs
there (``axe.run``). It is installed once, with npm, into ``build/cache/`` (ignored by git),
keyed by the version range below, so later runs need no network; nothing of it is committed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AXE_CORE = "~4.14.1"  # the range npm installs from: a newer minor version may add rules
CACHE = ROOT / "build" / "cache" / f"axe-core-{AXE_CORE.strip('~^')}"
SCRIPT = CACHE / "node_modules" / "axe-core" / "axe.min.js"


def axe_core_script() -> tuple[Path | None, str]:
    """The path of ``axe.min.js`` (installed if it is not yet), or None and why not."""
    if SCRIPT.is_file():
        return SCRIPT, ""
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm is not installed (`apt-get install -y npm`): axe-core comes with it"
    CACHE.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(CACHE)]
    try:
        done = subprocess.run(
            [*command, f"axe-core@{AXE_CORE}"], capture_output=True, text=True, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"npm could not install axe-core ({error})"
    if done.returncode != 0 or not SCRIPT.is_file():
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return None, f"npm could not install axe-core@{AXE_CORE} (offline?): {lines[-1]}"
    return SCRIPT, ""
