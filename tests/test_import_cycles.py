"""No import cycle anywhere in the project's packages.

A cycle means two modules can only be understood (and loaded) together; lazy imports inside
functions hide one from Python but not from the reader, so they count too. The graph is read
with ``ast`` from the source, without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def packages() -> list[Path]:
    """The top-level folders that are Python packages (an ``__init__.py``)."""
    return sorted(p.parent for p in ROOT.glob("*/__init__.py") if not p.parent.name.startswith("."))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in packages():
        for path in package.rglob("*.py"):
            if "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b` depends on the module a.b where there is one, else on a.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            # `import a.b.c` depends on a.b.c (that Python runs a/__init__ first is how
            # packages load, not a dependency of this module's on a).
            pieces = target.split(".")
            deepest = [".".join(pieces[:end]) for end in range(len(pieces), 0, -1)]
            candidate = next((c for c in deepest if c in known), None)
            if candidate is not None and candidate != name:
                found.add(candidate)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as the list of modules around it), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_walker_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_walker_reads_relative_imports(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from .course import Course\nfrom . import export\nimport gpt.model\n")
    known = {"instructor.course", "instructor.export", "instructor", "gpt", "gpt.model"}
    # `from . import export` is the module instructor.export, not the package's __init__.
    assert imports_of("instructor.collect", source, known) == {
        "instructor.course",
        "instructor.export",
        "gpt.model",
    }


def reached_from(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that ``start`` imports, directly or through others."""
    seen: set[str] = set()
    waiting = [start]
    while waiting:
        for target in graph[waiting.pop()] - seen:
            seen.add(target)
            waiting.append(target)
    return seen


def test_the_provided_code_does_not_depend_on_the_graders():
    """gpt/ ships to students as the course's provided code: what it needs of a grading (the
    report's path, a lesson's fingerprint) lives in core/, below both."""
    graph = import_graph()
    leaks = {
        name: sorted(t for t in reached_from(graph, name) if t.partition(".")[0] == "graders")
        for name in graph
        if name.partition(".")[0] == "gpt"
    }
    assert not {name: found for name, found in leaks.items() if found}


def test_the_layering_check_sees_an_import_through_another_module():
    graph = {"gpt.a": {"core.b"}, "core.b": {"graders.c"}, "graders.c": set()}
    assert reached_from(graph, "gpt.a") == {"core.b", "graders.c"}
