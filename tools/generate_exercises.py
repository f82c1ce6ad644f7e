"""Generate the student package ``exercises/`` from the reference ``solutions/``.

Every lesson module of ``solutions/`` (one per lesson of course/lessons.toml) is copied with
each region between a ``# BEGIN SOLUTION`` and a ``# END SOLUTION`` line replaced by a stub
that raises ``NotImplementedError`` naming the function, its lesson and the section that
explains it. Signatures and docstrings come across unchanged, so the two packages cannot
drift. Nothing else goes into ``exercises/``: the provided code is the ``gpt`` package, which
takes either package's lessons.

    python tools/generate_exercises.py           # rewrite exercises/
    python tools/generate_exercises.py --check   # exit 1 if exercises/ is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is tools/. Only then: loaded by instructor.release from another
# tree (a course's copy), the module must not put that tree's packages before the caller's.
if __name__ == "__main__" and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.manifest import Lesson, load_manifest, site_url  # noqa: E402

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_DEF = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")

PACKAGE_DOC = '''"""Your package: fill in the stubs, lesson by lesson.

Every function that raises ``NotImplementedError`` is an exercise; its docstring says what to
compute. Grade your work with ``nox -s grade`` (or ``nox -s grade -- LESSON``) in the course's
repository; in a lesson folder of a class's release, with the lesson's notebook or
``python -m graders LESSON`` (``--watch`` re-grades on every save). Every module here is one
lesson and all of it is yours. The provided code (the GPT, data pipeline, training
and generation CLIs) is the ``gpt`` package beside this one, and it calls your functions when
asked to: ``nox -s train -- --lessons exercises`` trains a GPT on your own code.

This package was generated from the reference solution by tools/generate_exercises.py.
"""
'''


def load_lessons(root: Path = ROOT) -> dict[str, Lesson]:
    """The manifest's lessons (``root``/course/lessons.toml), keyed by module name."""
    manifest = load_manifest(root / "course" / "lessons.toml")
    return {lesson.module: lesson for lesson in manifest.lessons}


def _owner(lines: list[str], at: int, indent: int) -> tuple[str, str]:
    """The innermost function (and its class, if any) that encloses line ``at``."""
    names: list[str] = []
    for line in reversed(lines[:at]):
        match = _DEF.match(line)
        if match and len(match.group(1)) < indent:
            names.append(match.group(3))
            indent = len(match.group(1))
            if indent == 0:
                break
    function = names[0]
    top = names[-1]
    return (f"{top}.{function}" if top != function else function), top


def stub_source(source: str, module: str, lesson: Lesson | None, site: str = "") -> str:
    """``source`` with every solution region replaced by a NotImplementedError stub, whose
    message names the section that teaches it: ``course/PAGE#SECTION`` in the repository, the
    section's address on the course site ``site`` in a student release (which has no course/
    pages)."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() != BEGIN:
            out.append(line)
            i += 1
            continue
        if lesson is None:
            raise ValueError(f"solutions/{module}.py has solution markers but no lesson")
        indent = len(line) - len(line.lstrip())
        name, top = _owner(lines, i, indent)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise ValueError(f"solutions/{module}.py: {BEGIN} at line {i + 1} is never closed")
        section = lesson.sections.get(top, "")
        if site:
            where = site.rstrip("/") + "/" + site_url(lesson.page, section or None)
        else:
            where = "course/" + (f"{lesson.page}#{section}" if section else lesson.page)
        message = (
            f"{name} in exercises/{module}.py is not implemented yet "
            f"(lesson {lesson.number}, {lesson.title}: see {where})"
        )
        out.append(" " * indent + f"raise NotImplementedError({message!r})\n")
        i = end + 1
    return "".join(out)


def render(root: Path = ROOT, site: str = "") -> dict[str, str]:
    """Every file of the generated package: relative name -> text (``site``: the course
    site's address the stubs' messages link to, in a release; see :func:`stub_source`)."""
    lessons = load_lessons(root)
    files = {"__init__.py": PACKAGE_DOC}
    for path in sorted((root / "solutions").glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = path.stem
        if module not in lessons:
            raise ValueError(
                f"solutions/{module}.py is no lesson of course/lessons.toml: provided code "
                "belongs in gpt/, which students get as it is"
            )
        files[path.name] = stub_source(path.read_text(), module, lessons[module], site)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if exercises/ is stale")
    args = parser.parse_args(argv)
    target = ROOT / "exercises"
    wanted = render()
    present = {p.name: p.read_text() for p in target.glob("*.py")} if target.exists() else {}
    stale = sorted(
        name for name in wanted.keys() | present.keys() if wanted.get(name) != present.get(name)
    )
    if args.check:
        if stale:
            print(
                "exercises/ is out of date with solutions/: "
                + ", ".join(stale)
                + "\nRun `python tools/generate_exercises.py` and commit the result."
            )
            return 1
        print(f"exercises/ is up to date ({len(wanted)} modules).")
        return 0
    target.mkdir(exist_ok=True)
    for name in stale:
        if name in wanted:
            (target / name).write_text(wanted[name])
        else:
            (target / name).unlink()
    print(f"wrote {len(stale)} of {len(wanted)} modules in exercises/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
