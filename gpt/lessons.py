"""Which lesson implementations the provided code calls: ``load("solutions")`` or your own.

A lesson package holds one module per lesson (``tokens``, ``embeddings``, ... ``generation``)
with the functions of the course's exercise API. ``load`` imports them all once and hands
them around as one ``Lessons`` object, so ``lessons.training.train_step`` is the reference's
or the student's depending on which package was loaded, and nothing else changes.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

from core.manifest import load_manifest

REFERENCE = "solutions"
# Whose lessons the chapters' code imports through gpt.chapter (the site's build sets REFERENCE).
CHAPTER_ENV = "COURSE_CHAPTER_LESSONS"


class LessonsError(ImportError):
    """A lesson package that cannot be found or imported, said in one line."""


class Lessons:
    """The lesson modules of one package, as attributes: ``lessons.attention.causal_mask``
    (every lesson of the manifest, in course order)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.modules: dict[str, types.ModuleType] = {}
        for module in modules():
            name = f"{package}.{module}"
            try:
                self.modules[module] = importlib.import_module(name)
            except Exception as error:  # a student's syntax error, a missing file, ...
                raise LessonsError(
                    f"cannot import {name}: {type(error).__name__}: {error}; fix the module "
                    f"(or pass --lessons {REFERENCE} to use the reference)"
                ) from error

    def __getattr__(self, module: str) -> types.ModuleType:
        try:
            return self.__dict__["modules"][module]
        except KeyError:
            raise AttributeError(f"no lesson module {module!r} in {self!r}") from None

    def __repr__(self) -> str:
        return f"Lessons({self.package!r})"

    def __deepcopy__(self, memo: dict) -> Lessons:  # modules are shared, never copied
        return self


def modules() -> tuple[str, ...]:
    """The lesson modules, in course order, from the manifest."""
    return tuple(lesson.module for lesson in load_manifest().lessons)


def load(spec: str | Path | Lessons | None = None) -> Lessons:
    """The lessons of a package: a name on ``sys.path`` (``solutions``, ``exercises``) or the
    path of a package folder (``path/to/exercises``); None means the reference."""
    if isinstance(spec, Lessons):
        return spec
    spec = REFERENCE if spec is None else str(spec)
    path = Path(spec)
    if path.is_dir() or "/" in spec or "\\" in spec:
        folder = path.resolve()
        first = modules()[0]
        if not (folder / f"{first}.py").is_file():
            raise LessonsError(
                f"{spec} is not a lesson package (no {first}.py in it); pass the folder "
                "of your lesson modules, such as exercises"
            )
        if str(folder.parent) not in sys.path:
            sys.path.insert(0, str(folder.parent))
        spec = folder.name
    return _cached(spec)


_loaded: dict[str, Lessons] = {}


def _cached(package: str) -> Lessons:
    if package not in _loaded:
        _loaded[package] = Lessons(package)
    return _loaded[package]
