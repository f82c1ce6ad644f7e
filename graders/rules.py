""" "By hand" rules, read from the student's code in the checker's own process.

A rule (``[[lesson.rule]]`` in course/lessons.toml) says that a function must compute a thing
itself: ``cross_entropy`` may not call a library cross-entropy, log-softmax or log-sum-exp. It is
enforced twice, and neither half runs where the student's code could change it:

* while the function runs, the worker watches the torch operations that reach the kernels
  (graders/worker.py, ``watched``), which catches every way of reaching a forbidden function,
  including names built at run time;
* before the function is graded, this module reads its source: the function, its default
  arguments and decorators, and every module-level name it uses, followed through the module
  (aliases, helper functions, classes, imports). A forbidden name anywhere in that code, or a
  tool that could switch the watch off (torch's dispatch-mode internals, ctypes, a
  subprocess), breaks the rule.

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
        "TorchDispatchMode",
        "__torch_dispatch__",
        "ctypes",
        "subprocess",
        "multiprocessing",
        "system",
        "popen",
    }
)


def breach(source: str, filename: str, rule: Rule) -> str | None:
    """Why ``rule.function`` in ``source`` breaks the rule ("uses logsumexp (file, line 3)"),
    or None. Source that does not parse is left to the import, which reports it."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return None
    bindings = _module_bindings(tree)
    start = bindings.get(rule.function)
    if not start:
        return None
    forbidden = set(rule.names)
    # Bare strings (docstrings, which may well explain what not to call) are not code.
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    seen: set[int] = set()
    queue = list(start)
    while queue:
        node = queue.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for inner in ast.walk(node):
            if id(inner) in prose:
                continue
            found = _forbidden_name(inner, forbidden, rule.function)
            if found is not None:
                line = getattr(inner, "lineno", getattr(node, "lineno", "?"))
                return f"{rule.function} uses {found} ({filename}, line {line})"
            if isinstance(inner, ast.Name) and inner.id in bindings:
                queue.extend(bindings[inner.id])
    return None


def breach_in(target: Path, module: str, rule: Rule) -> str | None:
    """``breach`` for ``target/module.py`` (None when the file cannot be read)."""
    path = Path(target) / f"{module}.py"
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return breach(source, path.name, rule)


def _forbidden_name(node: ast.AST, forbidden: set[str], own: str) -> str | None:
    if isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Name):
        name = node.id
        if name == own:  # the function calling itself, by its own name
            return None
    elif isinstance(node, ast.alias):  # import x / from m import x as y
        for part in node.name.split("."):
            if part in forbidden or part in TAMPERING:
                return part
        return None
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # getattr(F, "...")
        name = node.value
    else:
        return None
    if name in forbidden or name in TAMPERING:
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
