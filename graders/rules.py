""" "By hand" rules, read from the student's code in the checker's own process, before any of
it runs.

A rule (``[[lesson.rule]]`` in course/lessons.toml) says that a function must compute a thing
itself: ``cross_entropy`` may not call a library cross-entropy, log-softmax or log-sum-exp. The
grade rests on this reading alone (the worker's watch of the torch operations,
graders/worker/by_hand.py, runs beside the student's code and only gives honest slips an early
hint). The reading covers:

* the whole package, every file, module-level code included: code that reaches the grader or
  hides what it calls is refused wherever it is (``HIDING``: ``sys.modules`` and the rest of
  ``sys`` but a few plain attributes, frames, ``gc``, ``ctypes``, ``importlib``, ``eval``,
  ``getattr`` with a computed name, tensor subclasses and ``as_subclass``, classes that define
  how they are pickled or how torch treats them, threads and processes, torch's dispatch
  internals). Such a package breaks every rule, and the report flags it for review.
* the rule's function: its source, default arguments, decorators and annotations, and every
  module-level name it uses, followed through the module (aliases, helpers, classes, imports)
  and into the other modules of the package that it imports. A name the rule forbids anywhere
  in that code breaks it; so does a name looked up at run time (``DYNAMIC``). A rule with
  ``allowlist = true`` allows only elementwise, reduction, shape and creation operations of
  torch there (``ALLOWED``): a torch function or method that is not one of them (the library's
  named version of the exercise, or anything that computes it under another name) breaks it.

The reading over-approximates (a local variable that shares a module-level alias's name is
followed too): a correct submission trips it only by naming the forbidden functions in the
code that the rule covers, which the lesson asks not to do.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from core.manifest import Rule

# Anywhere in the package: names that reach the grader, its watch or the torch dispatcher, or
# that run code where no one looks (threads, processes).
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
        "TorchFunctionMode",
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
        # frames, the interpreter's hooks and its objects: what reaches the grader's own state
        "setprofile",
        "settrace",
        "_getframe",
        "currentframe",
        "inspect",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "__traceback__",
        "gc",
        # code that hides what it calls
        "importlib",
        "import_module",
        "__import__",
        "builtins",
        "__builtins__",
        "__globals__",
        "__code__",
        "__closure__",
        "__subclasses__",
        "__bases__",
        "__mro__",
        "__getattr__",
        "__getattribute__",
        "__setattr__",
        "__delattr__",
        # tensors that run code of their own: when torch calls them, when they are pickled
        "as_subclass",
        "_make_subclass",
        "_make_wrapper_subclass",
        "__torch_function__",
        "__torch_dispatch__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "copyreg",
        # torch's registries of kernels and overrides
        "library",
        "overrides",
    }
)

# Anywhere in the package: builtins that hide what they call, when called by name.
HIDDEN_CALLS = frozenset({"eval", "exec", "compile"})

# The only attributes of ``sys`` the package may use: plain values and the streams.
SYS_PLAIN = frozenset(
    {
        "stdout",
        "stderr",
        "stdin",
        "maxsize",
        "float_info",
        "version_info",
        "platform",
        "argv",
        "exit",
    }
)

# Classes a submission may not derive from: tensors (their methods run when torch or the
# grader touches them).
TENSOR_BASES = frozenset({"Tensor", "Parameter", "Buffer"})

# In the code a rule covers: names that look code up at run time, which the reading could not
# follow (a by-hand function never needs them).
DYNAMIC = frozenset(
    {
        "getattr",
        "setattr",
        "__dict__",
        "vars",
        "globals",
        "locals",
        "attrgetter",
        "methodcaller",
        "modules",
    }
)

# The torch operations a rule with ``allowlist = true`` allows (in-place forms included): any
# elementwise, reduction, shape, indexing and creation operation, the attributes of a tensor
# and the results of a reduction, dtypes and constants. Anything else of torch is refused.
ALLOWED = frozenset(
    {
        # elementwise
        "abs", "absolute", "acos", "arccos", "acosh", "arccosh", "asin", "arcsin", "asinh",
        "arcsinh", "atan", "arctan", "atan2", "arctan2", "atanh", "arctanh", "add", "sub",
        "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
        "neg", "negative", "positive", "pow", "float_power", "square", "sqrt", "rsqrt",
        "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
        "tan", "sinh", "cosh", "tanh", "sigmoid", "erf", "erfc", "relu", "sign", "sgn",
        "signbit", "copysign", "ceil", "floor", "round", "trunc", "fix", "frac", "fmod",
        "remainder", "clamp", "clamp_min", "clamp_max", "clip", "maximum", "minimum", "fmax",
        "fmin", "where", "lerp", "addcmul", "addcdiv", "hypot", "nan_to_num", "masked_fill",
        "eq", "ne", "lt", "le", "gt", "ge", "equal", "not_equal", "less", "less_equal",
        "greater", "greater_equal", "isclose", "allclose", "isnan", "isinf", "isfinite",
        "isneginf", "isposinf", "logical_and", "logical_or", "logical_not", "logical_xor",
        "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "deg2rad", "rad2deg",
        # reductions
        "sum", "nansum", "mean", "nanmean", "var", "std", "var_mean", "std_mean", "max", "min",
        "amax", "amin", "aminmax", "argmax", "argmin", "prod", "cumsum", "cumprod", "cummax",
        "cummin", "count_nonzero", "any", "all", "sort", "argsort", "topk", "kthvalue",
        "median", "values", "indices",
        # products (einsum and matmul are not any exercise's twin)
        "matmul", "mm", "bmm", "mv", "dot", "inner", "outer", "einsum", "tensordot",
        # shape and indexing
        "shape", "size", "dim", "ndim", "ndimension", "numel", "nelement", "reshape", "view",
        "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
        "transpose", "t", "T", "mT", "swapaxes", "swapdims", "movedim", "moveaxis", "expand",
        "expand_as", "broadcast_to", "broadcast_tensors", "broadcast_shapes", "repeat",
        "repeat_interleave", "tile", "cat", "concat", "concatenate", "stack", "hstack",
        "vstack", "split", "chunk", "unbind", "narrow", "select", "index_select", "gather",
        "take_along_dim", "masked_select", "nonzero", "argwhere", "scatter", "scatter_add",
        "index_add", "index_fill", "index_copy", "index_put", "masked_scatter", "flip", "roll",
        "tril", "triu", "diagonal", "contiguous", "one_hot",
        # creation and conversion
        "tensor", "as_tensor", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
        "full_like", "empty_like", "arange", "linspace", "eye", "new_tensor", "new_zeros",
        "new_ones", "new_full", "new_empty", "clone", "detach", "to", "type_as", "float",
        "double", "half", "long", "int", "bool", "item", "tolist", "fill", "zero", "copy",
        # attributes, types, dtypes, constants, autograd switches
        "dtype", "device", "requires_grad", "grad", "is_floating_point", "is_complex",
        "is_tensor", "Tensor", "Size", "finfo", "iinfo", "result_type", "promote_types",
        "get_default_dtype", "float16", "float32", "float64", "bfloat16", "int8", "int16",
        "int32", "int64", "uint8", "pi", "e", "inf", "nan", "no_grad", "enable_grad",
        "is_grad_enabled",
        # module paths: what follows them is read on its own
        "torch", "nn", "functional", "special", "linalg",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Breach:
    """Where and why a rule is broken: ``reason`` names the offending name."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.file}, line {self.line})"


@dataclass(frozen=True)
class Package:
    """The submitted package, parsed: every module by its dotted name in the package
    ("objective", "helpers.maths"). Source that does not parse is left to the import."""

    trees: dict[str, ast.Module]

    @classmethod
    def of_sources(cls, sources: dict[str, str]) -> Package:
        trees: dict[str, ast.Module] = {}
        for name, source in sources.items():
            try:
                trees[name] = ast.parse(source, f"{name}.py")
            except (SyntaxError, ValueError):
                continue
        return cls(trees)

    @classmethod
    def read(cls, target: Path) -> Package:
        """Every ``.py`` file under ``target`` (files that cannot be read are left out)."""
        target = Path(target)
        sources: dict[str, str] = {}
        for path in sorted(target.rglob("*.py")):
            try:
                name = ".".join(path.relative_to(target).with_suffix("").parts)
                sources[name] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        return cls.of_sources(sources)

    @functools.cached_property
    def hiding(self) -> Breach | None:
        """The first thing anywhere in the package that reaches the grader or hides what it
        calls, or None."""
        for name, tree in self.trees.items():
            found = _hiding(tree)
            if found is not None:
                return Breach(_file(name), found[1], f"the submission uses {found[0]}")
        return None

    def breach(self, module: str, rule: Rule) -> Breach | None:
        """Why ``rule.function`` of ``module`` breaks the rule, or None."""
        if self.hiding is not None:
            return self.hiding
        if module not in self.trees:
            return None
        bindings = {name: _module_bindings(tree) for name, tree in self.trees.items()}
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
            prose = _prose(self.trees[where])
            found = _scan(node, forbidden, bindings[where], rule.function, prose)
            if found is None and rule.allowlist:
                found = _outside_allowlist(node, prose)
            if found is not None:
                return Breach(_file(where), found[1], f"{rule.function} uses {found[0]}")
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and inner.id in bindings[where]:
                    queue.extend((where, bound) for bound in bindings[where][inner.id])
                for other in _package_imports(inner, where, self.trees):
                    queue.extend((other, statement) for statement in self.trees[other].body)
        return None


def breach(sources: dict[str, str], module: str, rule: Rule) -> Breach | None:
    """``Package.breach`` for the package of ``sources`` (module name -> source)."""
    return Package.of_sources(sources).breach(module, rule)


def breach_in(target: Path, module: str, rule: Rule) -> Breach | None:
    """``Package.breach`` for the package in ``target``."""
    return Package.read(target).breach(module, rule)


def _file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _line(node: ast.AST, default: int = 0) -> int:
    return getattr(node, "lineno", default)


def _prose(tree: ast.Module) -> set[int]:
    """Bare strings (docstrings, which may well explain what not to call) are not code."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _names(node: ast.AST) -> list[str]:
    """The identifiers a node names: a name, an attribute, the parts of an imported name or
    module, a defined function or class, and a string (``getattr(F, "...")``)."""
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.alias):
        return node.name.split(".")
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.ImportFrom) and node.module:
        return node.module.split(".")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def _hiding(tree: ast.Module) -> tuple[str, int] | None:
    """What in one file reaches the grader or hides what it calls: (what, line)."""
    prose = _prose(tree)
    sys_names = _sys_aliases(tree)
    line = 0
    for node in ast.walk(tree):
        if id(node) in prose:
            continue
        line = _line(node, line)
        for name in _names(node):
            if name in TAMPERING:
                return name, line
        if isinstance(node, ast.ImportFrom) and node.module == "sys":
            for alias in node.names:
                if alias.name not in SYS_PLAIN:
                    return f"sys.{alias.name}", line
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in sys_names and node.attr not in SYS_PLAIN:
                return f"sys.{node.attr}", line
        if isinstance(node, ast.Attribute) and node.attr == "__class__":
            if isinstance(node.ctx, ast.Store | ast.Del):  # an object's class switched
                return "__class__ =", line
        found = _hiding_call(node) or _hiding_class(node)
        if found is not None:
            return found, line
    # ``sys`` as a value (passed on, stored): whatever receives it could reach sys.modules
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in sys_names and id(node) not in bases:
            return "sys (as a value)", _line(node)
    return None


def _sys_aliases(tree: ast.Module) -> set[str]:
    """The names a file gives the module ``sys`` (``import sys``, ``import sys as s``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sys":
                    found.add(alias.asname or "sys")
    return found


def _hiding_call(node: ast.AST) -> str | None:
    """``getattr``/``setattr``/``delattr`` with a name computed at run time, ``eval`` and its
    kind, a class made by ``type(name, bases, namespace)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None
    name = node.func.id
    if name in HIDDEN_CALLS:
        return name
    if name in ("getattr", "setattr", "delattr", "hasattr"):
        given = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
            return f"{name} with a computed name"
        if name == "setattr" and given.value == "__class__":
            return "setattr(..., '__class__', ...)"
    if name == "type" and len(node.args) == 3:
        return "type(name, bases, namespace)"
    return None


def _hiding_class(node: ast.AST) -> str | None:
    """A class derived from a tensor (its methods run where torch or the grader touch it)."""
    if not isinstance(node, ast.ClassDef):
        return None
    for base in node.bases:
        for inner in ast.walk(base):
            for name in _names(inner):
                if name in TENSOR_BASES:
                    return f"a tensor subclass ({node.name})"
    return None


def _scan(
    node: ast.AST,
    forbidden: set[str] | frozenset[str],
    bindings: dict[str, list[ast.AST]],
    own: str,
    prose: set[int],
) -> tuple[str, int] | None:
    line = _line(node)
    for inner in ast.walk(node):
        if id(inner) in prose:
            continue
        line = _line(inner, line)
        if isinstance(inner, ast.Name) and (inner.id == own or inner.id in bindings):
            continue  # the function itself, or a module-level name: followed, not judged
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # a name the student defines is theirs
        for name in _names(inner):
            if name in forbidden:
                return name, line
    return None


@functools.cache
def _torch_names() -> frozenset[str]:
    """Every public name of torch, its tensors and its functional and maths namespaces, and
    their submodules: what an allowlist rule judges (other names are the student's own)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    spaces = [torch, torch.Tensor, F, torch.nn, torch.special, torch.linalg, torch.fft]
    names = {name for space in spaces for name in dir(space) if not name.startswith("__")}
    return frozenset(names | {"optim", "ops", "aten", "utils", "distributions", "func"})


def _allowed(name: str) -> bool:
    return name in ALLOWED or (
        name.endswith("_") and not name.startswith("_") and name[:-1] in ALLOWED
    )


def _outside_allowlist(node: ast.AST, prose: set[int]) -> tuple[str, int] | None:
    """A torch name in ``node`` that is not an allowed operation: an attribute (``F.x``,
    ``t.x()``), a name imported from torch, a torch module imported."""
    torch_names = _torch_names()
    line = _line(node)
    for inner in ast.walk(node):
        if id(inner) in prose:
            continue
        line = _line(inner, line)
        names: list[str] = []
        if isinstance(inner, ast.Attribute):
            names = [inner.attr]
        elif isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] == "torch":
            names = [*(inner.module or "").split(".")[1:], *(a.name for a in inner.names)]
        elif isinstance(inner, ast.Import):
            names = [
                p for a in inner.names if a.name.startswith("torch.") for p in a.name.split(".")
            ]
        for name in names:
            if name in torch_names and not _allowed(name):
                return f"{name}, not an elementwise, reduction or shape operation", line
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


def _module_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Every module-level statement that binds a name, by that name."""
    bindings: dict[str, list[ast.AST]] = {}

    def bind(name: str, node: ast.AST) -> None:
        bindings.setdefault(name, []).append(node)

    for statement in _top_level(tree.body):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(statement.name, statement)
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                bind((alias.asname or alias.name).split(".")[0], alias)
        elif isinstance(statement, ast.ImportFrom):  # the module's name is read too
            for alias in statement.names:
                bind(alias.asname or alias.name, statement)
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
