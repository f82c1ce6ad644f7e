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
import importlib.util
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
    again finds the same fallbacks (a function that is the reference's is one). Where there
    is no reference (the students' release), earlier lessons' functions come from the
    student's own lesson folders instead (``from_lesson_folders``), and no fallback is named."""
    if reference is None:
        try:
            reference = load(REFERENCE)
        except LessonsError:
            from_lesson_folders(lessons)
            return [name for name in _all_functions() if not _stubbed(lessons, name)], []
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


# -- the students' release: one folder per lesson --------------------------------------------


def _all_functions() -> list[str]:
    return [
        f"{lesson.module}.{name}" for lesson in load_manifest().lessons for name in lesson.functions
    ]


def _stubbed(lessons: Lessons, qualified: str) -> bool:
    module, _, name = qualified.partition(".")
    try:
        return is_stub(getattr(getattr(lessons, module), name))
    except (OSError, TypeError, SyntaxError):  # no source to read: not a stub
        return False


def lesson_folders(lessons: Lessons) -> tuple[Path, str] | None:
    """Where the students' release keeps each lesson's package, if ``lessons`` is one of
    them: (the release's folder, the package's name). The release is a folder per lesson,
    ``RELEASE/SLUG/`` with the student's package in ``RELEASE/SLUG/exercises/``
    (instructor/release.py), so lesson 4's own work is in ``RELEASE/attention/exercises/``
    beside the block lesson's folder."""
    package = _package_folder(lessons)
    if lesson_slug(lessons) is None:
        return None
    return package.parent.parent, package.name


def _package_folder(lessons: Lessons) -> Path:
    first = lessons.modules[modules()[0]]
    return Path(getattr(first, "__file__", "") or ".").resolve().parent


def lesson_slug(lessons: Lessons) -> str | None:
    """The lesson whose release folder holds ``lessons`` (``RELEASE/SLUG/exercises``), or None."""
    slug = _package_folder(lessons).parent.name
    return slug if slug in {lesson.slug for lesson in load_manifest().lessons} else None


def from_lesson_folders(lessons: Lessons) -> tuple[list[str], list[str]]:
    """In the students' release, every function of another lesson that ``lessons`` holds as a
    stub is taken from that lesson's own folder, where the student wrote it (``lesson_folders``),
    wherever the lesson modules use it; one not written there yet raises, in one line, which
    function is missing and the file to write it in. Returns (taken, missing) as
    ``module.function``. Nothing happens outside a release folder."""
    found = lesson_folders(lessons)
    if found is None:
        return [], []
    release, package = found
    here = _package_folder(lessons)
    taken, missing = [], []
    for lesson in load_manifest().lessons:
        folder = release / lesson.slug / package
        if folder.resolve() == here:
            continue  # this folder's own lesson: its stubs are the exercise
        module = getattr(lessons, lesson.module)
        theirs = _sibling(folder, lesson.module)
        for name in lesson.functions:
            function = getattr(module, name)
            if not _stubbed(lessons, f"{lesson.module}.{name}"):
                continue
            own = getattr(theirs, name, None) if theirs is not None else None
            if own is not None and not _is_stub_safe(own):
                replace(lessons, function, own)
                taken.append(f"{lesson.module}.{name}")
                continue
            where = folder / f"{lesson.module}.py"
            replace(lessons, function, _missing(name, lesson.number, where))
            missing.append(f"{lesson.module}.{name}")
    return taken, missing


def _is_stub_safe(obj: Any) -> bool:
    try:
        return is_stub(obj)
    except (OSError, TypeError, SyntaxError):
        return False


def _sibling(folder: Path, module: str) -> types.ModuleType | None:
    """``folder``'s lesson ``module`` (the student's package of another lesson's folder), under
    a package name of its own, or None where it is not there or does not import."""
    if not (folder / f"{module}.py").is_file():
        return None
    name = f"_lesson_folder_{folder.parent.name}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        if spec is None or spec.loader is None:
            return None
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        try:
            if (folder / "__init__.py").is_file():
                spec.loader.exec_module(package)
        except Exception:  # noqa: BLE001 - the student's other folder: taken only if it imports
            del sys.modules[name]
            return None
    try:
        return importlib.import_module(f"{name}.{module}")
    except Exception:  # noqa: BLE001 - as above
        return None


def _missing(name: str, number: int, where: Path) -> Any:
    """A stand-in for an earlier lesson's function not written yet: it raises, in one line,
    which function is missing and where to write it."""
    message = f"{name} (lesson {number}) is not written yet: write it in {where}"

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(message)

    missing.__name__ = missing.__qualname__ = name
    return missing
