"""The lessons as the chapters' code imports them: ``from gpt.chapter.tokens import encode``.

One name, two meanings:

- when the site is built, the reference (``solutions``): the site's hooks set
  ``COURSE_CHAPTER_LESSONS=solutions``, so every page shows what the reference computes;
- when you run a chapter's code yourself (its notebook, a block pasted into a script), your
  lessons, ``exercises`` (or the package that ``COURSE_CHAPTER_LESSONS`` names). Every function
  you have not written yet (its body only raises ``NotImplementedError``) is then the
  reference's, and one line says which; where there is no reference (the release students get
  has no ``solutions/``) such a function of this lesson stays as it is and raises, naming the
  section to read, and one of an earlier lesson is your own from that lesson's folder beside
  this one (``../attention/exercises/attention.py`` for the block lesson's ``attention``), or
  raises, in one line, naming that file to write it in.

Importing this module registers ``gpt.chapter.<module>`` for every lesson module, so the usual
``from gpt.chapter.block import layer_norm`` works, and ``gpt.chapter.lessons`` is the same
lessons as one ``Lessons`` object, for provided code that takes one (``GPT(config, lessons)``).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from .lessons import (
    CHAPTER_ENV,
    REFERENCE,
    Lessons,
    LessonsError,
    fill_in,
    from_lesson_folders,
    is_stub,
    load,
    modules,
)

STUDENT = "exercises"
lessons: Lessons  # the lessons now in use: set by use(), which runs on import


def stubs(yours: Lessons) -> list[str]:
    """The functions of ``yours`` not written yet, as ``module.function``."""
    from core.manifest import load_manifest

    return [
        f"{lesson.module}.{name}"
        for lesson in load_manifest().lessons
        for name in lesson.functions
        if is_stub(getattr(getattr(yours, lesson.module), name))
    ]


def summary(stubs: list[str]) -> str:
    """``tokens (all), block: gelu, mlp``: the stubs by lesson module, in course order."""
    from core.manifest import load_manifest

    parts = []
    for lesson in load_manifest().lessons:
        names = [stub.split(".", 1)[1] for stub in stubs if stub.split(".")[0] == lesson.module]
        if names and len(names) == len(lesson.functions):
            parts.append(f"{lesson.module} (all)")
        elif names:
            parts.append(f"{lesson.module}: {', '.join(names)}")
    return "; ".join(parts)


def use(spec: str | Path | None = None, *, fill: bool = True) -> tuple[Lessons, str]:
    """Make ``gpt.chapter.<module>`` the lessons of ``spec`` (default: ``COURSE_CHAPTER_LESSONS``,
    else ``exercises``), with ``fill`` filled in from the reference where not done yet; (the
    lessons, the line that says whose they are: "" for the reference)."""
    global lessons
    spec = spec if spec is not None else os.environ.get(CHAPTER_ENV) or STUDENT
    chosen = load(spec)
    line = ""
    if chosen.package != REFERENCE:
        reference: Lessons | None = None
        if fill:
            try:
                reference = load(REFERENCE)
            except LessonsError:
                pass  # the students' release: no reference to fill in from
        # the reference stands in wherever a lesson module holds a stub (block's attention too);
        # in the release, earlier lessons' functions come from their own lesson folders
        taken: list[str] = []
        if reference is not None:
            missing = fill_in(chosen, reference)[1]
        else:
            taken = from_lesson_folders(chosen)[0]
            missing = stubs(chosen)
        line = f"gpt.chapter: your lessons ({chosen.package})"
        if taken:
            line += f"; from your other lesson folders: {summary(taken)}"
        if missing and reference is not None:
            line += f"; not done yet, so the reference's: {summary(missing)}"
        elif missing:
            line += f"; not done yet, so they raise until you write them: {summary(missing)}"
    this = sys.modules[__name__]
    for name in modules():
        module: types.ModuleType = getattr(chosen, name)
        sys.modules[f"{__name__}.{name}"] = module
        setattr(this, name, module)
    lessons = chosen
    return chosen, line


_, _line = use()
if _line:
    print(_line)
