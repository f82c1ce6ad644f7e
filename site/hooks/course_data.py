"""The course's data as the site's hooks see it: the repository root and the lesson manifest.

Not a hook (see markdown_scan.py for how the hooks import it). The manifest is read through its
one loader, ``core.manifest``, which caches it, so every hook may ask for it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from core.manifest import Lesson


def repository_root(config: Any) -> Path:
    """The folder of mkdocs.yml, put on sys.path: the manifest's loader and the chapters'
    exec'd examples (``gpt.chapter``) import from it, even when mkdocs runs as a console script
    (whose sys.path[0] is the environment's bin/)."""
    root = Path(config.config_file_path).resolve().parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root


def load_lessons(config: Any) -> list[Lesson]:
    """The manifest's lessons (``docs_dir/lessons.toml``) in number order."""
    repository_root(config)
    from core.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(Path(config.docs_dir) / "lessons.toml")
    except ManifestError as error:
        raise PluginError(f"course hooks: {error}") from None
    return sorted(manifest.lessons, key=lambda lesson: lesson.number)


def nav_pages(nav: Any) -> list[str]:
    """The pages of mkdocs.yml's nav, in order (its nested sections and titles flattened)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []
