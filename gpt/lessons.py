"""Which lesson implementations the provided code calls: ``load("solutions")`` or your own.

A lesson package holds one module per lesson (``tokens``, ``embeddings``, ... ``generation``)
with the functions of the course's exercise API. ``load`` imports them all once and hands
them around as one ``Lessons`` object, so ``lessons.training.train_step`` is the reference's
or the student's depending on which package was loaded, and nothing else changes.

``fill_in`` lets a student's package run before every lesson is done: each function still a
stub takes the reference's place (``gpt.compare``, ``gpt.generate``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

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


def is_stub(obj: Any) -> bool:
    """True when every function body of ``obj`` is just ``raise NotImplementedError(...)``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    bodies = [node.body for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]

    def raises_only(body: list[ast.stmt]) -> bool:
        code = [
            s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        return (
            len(code) == 1
            and isinstance(code[0], ast.Raise)
            and "NotImplementedError" in ast.unparse(code[0])
        )

    return bool(bodies) and all(raises_only(body) for body in bodies)


def replace(lessons: Lessons, old: object, new: object) -> None:
    """Put ``new`` wherever the lesson modules hold ``old``: under its own name and under the
    names other lessons imported it by (block.py's ``from .attention import attention``)."""
    for module in lessons.modules.values():
        for name, value in list(vars(module).items()):
            if value is old:
                setattr(module, name, new)


def fill_in(lessons: Lessons, reference: Lessons | None = None) -> tuple[list[str], list[str]]:
    """Fill the stubs of ``lessons`` with the reference's functions, wherever the lesson
    modules use them; returns (yours, fallbacks) as ``module.function`` names. Filling in
    again finds the same fallbacks (a function that is the reference's is one)."""
    reference = load(reference)
    yours, fallbacks = [], []
    if lessons is reference:  # the reference itself: every function its own
        return [
            f"{lesson.module}.{name}"
            for lesson in load_manifest().lessons
            for name in lesson.functions
        ], []
    for lesson in load_manifest().lessons:
        student, model = getattr(lessons, lesson.module), getattr(reference, lesson.module)
        for name in lesson.functions:
            function, stand_in = getattr(student, name), getattr(model, name)
            if function is stand_in or is_stub(function):
                replace(lessons, function, stand_in)
                fallbacks.append(f"{lesson.module}.{name}")
            else:
                yours.append(f"{lesson.module}.{name}")
    return yours, fallbacks
