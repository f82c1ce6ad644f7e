"""What every lesson's variants share: the ``Variant``, writing a submission with variants
spliced in, grouping them into grading rounds, and what a wrong variant's failed checks must say.

Each ``Variant`` replaces one function (or class, or method) of a copy of solutions/ with its
``source``. A wrong variant declares the ``mistake`` it makes and must lose points on its
function, the first failed check (a public one) naming that mistake; a right one must keep
every point.
"""

from __future__ import annotations

import ast
import functools
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.manifest import Manifest
from graders import hints

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Variant:
    module: str  # the lesson module, e.g. "windows"
    name: str  # the function or class, or "Class.method"
    label: str  # a short name for the test id
    source: str  # the replacement definition
    mistake: str | None = None  # for a wrong variant: the key of the mistake it makes (below)

    @property
    def function(self) -> str:
        return self.name.split(".")[0]

    @property
    def id(self) -> str:
        return f"{self.module}.{self.name}:{self.label}"


def V(  # noqa: N802
    module: str, name: str, label: str, mistake: str | None, source: str
) -> Variant:
    return Variant(module, name, label, source, mistake)


def changed(source: str, old: str, new: str) -> str:
    """``source`` with its one line ``old`` replaced by ``new`` (a planted mistake)."""
    assert source.count(old) == 1, old
    return source.replace(old, new)


def replace_definition(source: str, name: str, new: str) -> str:
    """``source`` with the definition of ``name`` ("f", "C" or "C.method") replaced by ``new``."""
    tree = ast.parse(source)
    scope: list[ast.stmt] = tree.body
    *outer, last = name.split(".")
    for part in outer:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == part).body
    node = next(
        n
        for n in scope
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef) and n.name == last
    )
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines(keepends=True)
    body = textwrap.indent(textwrap.dedent(new).strip("\n") + "\n", " " * node.col_offset)
    return "".join(lines[: first - 1]) + body + "".join(lines[node.end_lineno :])


def build_target(directory: Path, variants: list[Variant] | tuple[Variant, ...] = ()) -> Path:
    """A copy of solutions/ in ``directory``/submission with ``variants`` applied."""
    target = directory / "submission"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    for variant in variants:
        path = target / f"{variant.module}.py"
        path.write_text(replace_definition(path.read_text(), variant.name, variant.source))
    return target


@functools.cache
def lessons_used(module: str) -> frozenset[str]:
    """The other lesson modules that ``module`` of solutions/ imports (``from .attention import
    attention``): where no trusted version of those is plugged in (the released graders), a
    variant of one of them changes what ``module``'s functions compute."""
    tree = ast.parse((ROOT / "solutions" / f"{module}.py").read_text())
    return frozenset(
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    )


def apart(a: Variant, b: Variant) -> bool:
    """Whether ``a`` and ``b`` may be graded together with the submission's own dependencies:
    different functions, neither of them in a lesson that the other's lesson imports (the
    reading of the package costs no function a point: it only flags for review)."""
    if (a.module, a.function) == (b.module, b.function):
        return False
    return a.module not in lessons_used(b.module) and b.module not in lessons_used(a.module)


def rounds(
    variants: list[Variant], together: Callable[[Variant, Variant], bool] | None = None
) -> list[list[Variant]]:
    """Variants in as few groups as ``apart`` allows, each group graded in one run: no two in a
    group touch the same function, and none is in a lesson that another's lesson imports (block
    uses attention's and embeddings' functions). The graders plug trusted versions of a
    function's own lesson dependencies in, so variants of different functions never disturb
    each other. A grader run's fixed cost (a worker that imports torch) is paid per group.
    ``together``: a further condition on every pair of a group."""
    groups: list[list[Variant]] = []
    for variant in variants:
        for group in groups:
            if all(
                apart(variant, other) and (together is None or together(variant, other))
                for other in group
            ):
                group.append(variant)
                break
        else:
            groups.append([variant])
    return groups


# A mistake key is one of: a key of a ``[lesson.check.mistakes]`` table of the function's
# checks in course/lessons.toml (its diagnosis); ``check:<id>``, a check that tests this one
# behaviour and whose own hint says it; ``by-hand``, the lesson's "by hand" rule for the
# function; or one of the harness's own diagnoses below.
HARNESS = {"in-place": hints.IN_PLACE, "not-plain": hints.NOT_PLAIN}
BY_HAND = "by-hand"


def mistake_hint(variant: Variant, manifest: Manifest) -> str:
    """The hint that names ``variant``'s mistake."""
    lesson = manifest.lesson(variant.module)
    key = variant.mistake
    assert key is not None, f"{variant.id} declares no mistake"
    if key in HARNESS:
        return HARNESS[key]
    if key == BY_HAND:
        rule = lesson.rule(variant.function)
        assert rule is not None, f"{variant.id}: {variant.function} has no by-hand rule"
        return rule.message
    if key.startswith("check:"):
        check = next(c for c in lesson.checks if c.id == key.removeprefix("check:"))
        assert check.function == variant.function, f"{variant.id}: {key} checks another function"
        return check.hint
    known = lesson.mistakes(variant.function)
    assert key in known, f"{variant.id}: {variant.function} has no mistake {key!r}"
    return known[key]


def assert_hints_name_the_mistake(variant: Variant, failed: list[dict], manifest: Manifest) -> None:
    """A wrong variant's failed checks (in the report's order): the first is public and its hint
    names the variant's mistake, every other is listed under it (the same hint, or the report's
    ``explained_by`` pointing at it: one mistake, one message), and no failed check names a
    mistake it did not make."""
    expected = mistake_hint(variant, manifest)

    def names(hint: str | None) -> bool:  # a refused graph's hint adds its cause after a colon
        return hint == expected or (hint or "").startswith(expected + ": ")

    shown = "; ".join(f"{c['id']}: {c['hint']} [{c['detail']}]" for c in failed)
    public = [c for c in failed if not c["hidden"]]
    assert public, f"{variant.id}: caught by hidden checks only; {shown}"
    assert names(public[0]["hint"]), (
        f"{variant.id}: the first hint does not name the mistake {variant.mistake!r} "
        f"({expected!r}); {shown}"
    )
    apart = [
        c["id"] for c in failed[1:] if not names(c["hint"]) and c["explained_by"] != failed[0]["id"]
    ]
    assert not apart, f"{variant.id}: {apart} are not listed under its mistake; {shown}"
    others = set(manifest.lesson(variant.module).mistakes(variant.function).values()) - {expected}
    wrong = [c["id"] for c in failed if c["hint"] in others]
    assert not wrong, f"{variant.id}: {wrong} name a mistake it did not make; {shown}"
