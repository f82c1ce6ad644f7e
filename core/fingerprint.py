"""Which files a lesson's grading read, and a fingerprint (sha256) of them.

A lesson's result holds for the code it graded: its module and the package's modules that
module imports (``from .attention import attention`` in block.py), followed transitively. The
fingerprint is recorded with the lesson in the grading report; a reader (``gpt.compare``)
computes it again to tell a result of the code as it is now from one of an older version.

A grade holds for the graders that gave it, too: :func:`graders_digest` fingerprints them, and
instructor autograde (and a plain ``nbgrader autograde``) reuses a recorded result only while
both fingerprints are unchanged.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from pathlib import Path


def lesson_files(target: Path, module: str) -> list[Path]:
    """``module``'s file in the package folder ``target`` and, transitively, the package's
    modules it imports (relatively, or by the package's own name), sorted by name. A file that
    does not parse contributes itself only."""
    target = Path(target)
    seen: set[str] = set()
    waiting = [module]
    while waiting:
        name = waiting.pop()
        path = target / f"{name}.py"
        if name in seen or not path.is_file():
            continue
        seen.add(name)
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue  # Python cannot parse it either: the lesson's import says why
        waiting.extend(_imported(tree, target.name))
    return sorted(target / f"{name}.py" for name in seen)


def _imported(tree: ast.Module, package: str) -> list[str]:
    """The names of the package's modules that the import statements of ``tree`` could read."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            if node.level == 0:
                if parts[:1] != [package]:
                    continue
                parts = parts[1:]
            elif node.level > 1:
                continue  # above the package
            # ``from .attention import x`` reads attention; ``from . import attention`` too
            names.extend(parts[:1] or [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    names.append(parts[1])
    return names


def files_digest(files: Mapping[str, Path]) -> str:
    """sha256 of ``files`` (name -> path): each name and its file's bytes, in name order."""
    summed = hashlib.sha256()
    for name, path in sorted(files.items()):
        data = path.read_bytes()
        summed.update(f"{name}\0{len(data)}\0".encode())
        summed.update(data)
    return summed.hexdigest()


def fingerprint(target: Path, module: str) -> str:
    """The digest of ``lesson_files(target, module)``, by file name."""
    return files_digest({path.name: path for path in lesson_files(target, module)})


def graders_digest(root: Path | None = None) -> str:
    """sha256 of what decides a grade besides the submission: every ``.py`` file of the
    ``graders`` package under ``root`` (default: this tree; the public and hidden checks, the
    oracles, the checker and the worker) and ``course/lessons.toml`` (points, rules, hints)."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1]
    files = {
        path.relative_to(root).as_posix(): path
        for path in (root / "graders").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    manifest = root / "course" / "lessons.toml"
    if manifest.is_file():
        files["course/lessons.toml"] = manifest
    return files_digest(files)
