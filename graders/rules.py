""" "By hand" rules, read from the student's code in the checker's own process.

A rule (``[[lesson.rule]]`` in course/lessons.toml) says that a function must compute a thing
itself: ``cross_entropy`` may not call a library cross-entropy, log-softmax or log-sum-exp. It is
enforced twice, and neither half runs where the student's code could change it:

* while the function runs, the worker watches the torch operations that reach the kernels
  (graders/worker.py, ``watched``), which catches every way of reaching a forbidden function,
  including names built at run time;
* before the function is graded, this module reads its source: the function, its default
  arguments and decorators, and every module-level name it uses, followed through the module
  (aliases, helper functions, classes, imports) and into the other modules of the submitted
  package that it imports. A forbidden name anywhere in that code, or a name looked up at run
  time (getattr, eval, importlib, ...: the reading could not follow it), breaks the rule; so
  does a tool that could switch the watch off (torch's dispatch internals, ctypes, threads,
  subprocesses) anywhere in any file of the package.

The reading over-approximates (a local variable that shares a module-level alias's name is
followed too): a correct submission trips it only by naming the forbidden functions in the
code that the rule covers, which the lesson asks not to do.
"""

from __future__ import annotations

import ast
from pathlib import Path

from core.manifest import Rule

# Names that could switch the worker's watch off, or run the computation outside it.
TAMPERING = frozenset(
    {
        "_python_dispatch",
        "_pop_mode",
        "_push_mode",
        "_disable_current_modes",
        "_unset_dispatch_mode",
        "_set_dispatch_mode",
        "_DisableTorchDispatch",
        "DisableTorchFunction",
        "DisableTorchFunctionSubclass",
        "_get_current_dispatch_mode_stack",
        "_C",
        "_ops",
        "redispatch",
        "_ExcludeDispatchKeyGuard",
        "_DisablePythonDispatcher",
        "_dispatch_tls_set_dispatch_key_excluded",
        "_pop_torch_dispatch_stack",
        "_push_on_torch_dispatch_stack",
        "TorchDispatchMode",
        "__torch_dispatch__",
        "ctypes",
        "subprocess",
        "multiprocessing",
        "threading",
        "_thread",
        "concurrent",
        "fork",
        "system",
        "popen",
        "grader_worker",
        # the watch's own state and hooks, in the student's process: its profile hook, the
        # frames and objects that reach it
        "setprofile",
        "settrace",
        "_getframe",
        "f_back",
        "f_globals",
        "f_locals",
        "gc",
    }
)

# Names that look code up at run time, which the reading could not follow: refused in the code
# that a rule covers (a by-hand function never needs them).
DYNAMIC = frozenset(
    {
        "getattr",
        "__getattribute__",
        "__dict__",
        "vars",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "__import__",
        "importlib",
        "import_module",
        "attrgetter",
        "methodcaller",
        "modules",
        "__builtins__",
        "builtins",
        "__globals__",
        "__code__",
    }
)


def breach(sources: dict[str, str], module: str, rule: Rule) -> str | None:
    """Why ``rule.function`` of ``module`` breaks the rule ("uses logsumexp (file, line 3)"), or
    None. ``sources``: every module of the submitted package by its dotted name in the package
    ("objective", "helpers.maths"). Source that does not parse is left to the import."""
    trees: dict[str, ast.Module] = {}
    for name, source in sources.items():
        try:
            trees[name] = ast.parse(source, f"{name}.py")
        except SyntaxError:
            continue
    for name, tree in trees.items():  # anything that could switch the watch off, anywhere
        found = _scan(tree, TAMPERING, None, prose=_prose(tree))
        if found is not None:
            return f"the submission uses {found[0]} ({_file(name)}, line {found[1]})"
    if module not in trees:
        return None
    bindings = {name: _module_bindings(tree) for name, tree in trees.items()}
    start = bindings[module].get(rule.function)
    if not start:
        return None
    forbidden = set(rule.names) | DYNAMIC
    seen: set[int] = set()
    queue = [(module, node) for node in start]
    while queue:
        where, node = queue.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found = _scan(node, forbidden, rule.function, prose=_prose(trees[where]))
        if found is not None:
            return f"{rule.function} uses {found[0]} ({_file(where)}, line {found[1]})"
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in bindings[where]:
                queue.extend((where, bound) for bound in bindings[where][inner.id])
            for other in _package_imports(inner, where, trees):  # into the package's modules
                queue.extend((other, statement) for statement in trees[other].body)
    return None


def breach_in(target: Path, module: str, rule: Rule) -> str | None:
    """``breach`` for the package in ``target`` (files that cannot be read are left out)."""
    target = Path(target)
    sources: dict[str, str] = {}
    for path in sorted(target.rglob("*.py")):
        try:
            sources[".".join(path.relative_to(target).with_suffix("").parts)] = path.read_text(
                encoding="utf-8"
            )
        except (OSError, UnicodeDecodeError):
            continue
    return breach(sources, module, rule)


def _file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _prose(tree: ast.Module) -> set[int]:
    """Bare strings (docstrings, which may well explain what not to call) are not code."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _scan(
    node: ast.AST,
    names: set[str] | frozenset[str],
    own: str | None,
    prose: set[int] | frozenset[int] = frozenset(),
) -> tuple[str, int | str] | None:
    for inner in ast.walk(node):
        if id(inner) in prose:
            continue
        found = _forbidden_name(inner, names, own)
        if found is not None:
            return found, getattr(inner, "lineno", getattr(node, "lineno", "?"))
    return None


def _package_imports(node: ast.AST, where: str, trees: dict[str, ast.Module]) -> list[str]:
    """The package's own modules that an import statement names (relative, or by the name
    the worker gives the package, or by a module's own name)."""
    names: list[str] = []
    if isinstance(node, ast.ImportFrom):
        base = where.split(".")[: -node.level] if node.level else []
        stem = [*base, *(node.module.split(".") if node.module else [])]
        if stem[:1] == ["submission"]:
            stem = stem[1:]
        names.append(".".join(stem))
        names.extend(".".join([*stem, alias.name]) for alias in node.names)
    elif isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            names.append(".".join(parts[1:] if parts[0] == "submission" else parts))
    return [name for name in names if name in trees and name != where]


def _forbidden_name(
    node: ast.AST, forbidden: set[str] | frozenset[str], own: str | None
) -> str | None:
    if isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Name):
        name = node.id
        if name == own:  # the function calling itself, by its own name
            return None
    elif isinstance(node, ast.alias):  # import x / from m import x as y
        for part in node.name.split("."):
            if part in forbidden:
                return part
        return None
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # getattr(F, "...")
        name = node.value
    else:
        return None
    if name in forbidden:
        return name
    return None


def _module_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Every module-level statement that binds a name, by that name."""
    bindings: dict[str, list[ast.AST]] = {}

    def bind(name: str, node: ast.AST) -> None:
        bindings.setdefault(name, []).append(node)

    for statement in _top_level(tree.body):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(statement.name, statement)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            for alias in statement.names:
                bind((alias.asname or alias.name).split(".")[0], alias)
        else:
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bind(node.id, statement)
        # globals assigned inside functions (global x; x = ...) are bound by that function
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for node in ast.walk(statement):
                if isinstance(node, ast.Global):
                    for name in node.names:
                        bind(name, statement)
    return bindings


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, looking inside if/try/with blocks (still module level)."""
    found: list[ast.stmt] = []
    for statement in body:
        found.append(statement)
        if isinstance(statement, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, field, [])
                for item in inner:
                    if isinstance(item, ast.ExceptHandler):
                        found.extend(_top_level(item.body))
                    elif isinstance(item, ast.stmt):
                        found.extend(_top_level([item]))
    return found
