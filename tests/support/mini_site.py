"""A small build of the course site for tests: a few pages, the real hooks, in seconds.

The build's config sits in a folder of links to the repository, inherits mkdocs.yml
(``INHERIT``) and leaves out every page but the chosen ones, so what the tests see is what
the full site shows on those pages. mkdocs reads its paths from the config's folder; the
command runs in the repository, forked from the tests' warm template (support/forkserver.py),
which has imported torch and matplotlib for the chapters' examples.
"""

from __future__ import annotations

import os
from pathlib import Path

from support import forkserver

ROOT = Path(__file__).resolve().parents[2]
LINKED = [
    "core",
    "course",
    "site",
    "solutions",
    "exercises",
    "graders",
    "gpt",
    "live",
    "pyproject.toml",
]


def build_mini_site(
    directory: Path, nav: dict[str, str], env: dict[str, str] | None = None
) -> Path:
    """Build the home page and ``nav`` (title -> page under course/) into ``directory``/out.

    Returns that folder; a failed build fails the calling test with mkdocs' own message.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name in [*LINKED, "mkdocs.yml"]:
        (directory / name).symlink_to(ROOT / name)
    pages = {"index.md", *nav.values()}
    left_out = sorted(
        p.relative_to(ROOT / "course").as_posix()
        for p in (ROOT / "course").rglob("*.md")
        if p.relative_to(ROOT / "course").as_posix() not in pages
    )
    config = [
        "INHERIT: mkdocs.yml",
        "site_dir: out",
        "exclude_docs: |",
        "  *.toml",
        "  __pycache__/",
    ]
    config += [f"  {page}" for page in left_out]
    config += ["validation:", "  links:", "    not_found: info", "nav:", "  - Home: index.md"]
    config += [f"  - {title}: {page}" for title, page in nav.items()]
    (directory / "test.yml").write_text("\n".join(config) + "\n")
    built = forkserver.run(
        ["-m", "mkdocs", "build", "-q", "-f", str(directory / "test.yml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1", **(env or {})),
    )
    assert built.returncode == 0, built.stderr[-5000:]
    return directory / "out"
