"""The checker's reading of the submitted package: evidence for an instructor's review, never a
grade.

A by-hand function (``[[lesson.rule]]`` in course/lessons.toml) is graded on what it computes:
the checker runs its operator graph. What only its source can show is flagged for review, with
file and line: ``adamw_step`` building a ``torch.optim`` optimizer runs the same elementwise
operators as a step written by hand. The report lists it under ``flagged``; no point rests on it.

The reading, in the checker's own process, before any of the student's code runs:

* decodes each file as Python's importer does (a PEP 263 coding line, a UTF-8 byte-order mark:
  ``tokenize.detect_encoding``) and names the file, the line and the cause of what it cannot
  read, decode or parse (``Package.unreadable``): such a file fails its lesson's import, by the
  submission's doing, and that one line says why;
* reads only what a lesson's grading imports: its module and the package's modules that one
  imports, each parsed once, within MAX_FILE_BYTES a file and MAX_PACKAGE_BYTES in all (what is
  over is flagged, not read);
* follows a by-hand function's code through the module-level names it uses (helpers, aliases,
  classes, names imported from the package's own modules), reading each definition once: the
  work grows with the size of the code (``Package.work`` counts it);
* counts what it finds against the rule's function whose code reaches it, naming the helper
  that holds it, never against the package.

Evidence: a name the rule forbids (as an attribute, an imported name, a ``getattr`` string); in
an ``allowlist`` rule's code, a torch function named by its path (``torch.optim.AdamW``,
``F.softmax``) that is not an elementwise, reduction or shape operation (ALLOWED); and code the
reading cannot follow (``exec`` and its kind, ``getattr`` of torch with a computed name). Not
evidence: docstrings, comments, the module's ``if __name__ == "__main__":`` block, what the
function never reaches, and the names a student defines (variables, parameters, helpers).
"""

from __future__ import annotations

import ast
import collections
import io
import tokenize
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.manifest import Rule

ALIAS = "submission"  # the package's name in the worker (graders/worker/serving.py)
MAX_FILE_BYTES = 1_000_000  # a lesson module is tens of kilobytes
MAX_PACKAGE_BYTES = 4_000_000  # all the files one grading's reading reads
MAX_FLAGS = 5  # per function: enough for a reviewer to find the lines
MAX_HOPS = 32  # re-exports followed from module to module (a cycle ends there)

# Builtins that run code the reading cannot see, when the function reaches them, and the same
# by their modules' paths, with the other ways code arrives as data.
UNFOLLOWED = frozenset({"eval", "exec", "compile", "__import__"})
UNFOLLOWED_PATHS = frozenset(
    {
        "importlib.import_module",
        "importlib.__import__",
        *(f"builtins.{name}" for name in UNFOLLOWED),
        # code that arrives as data: a pickle's or marshal's payload, a function made of it
        *(f"{module}.{name}" for module in ("pickle", "marshal") for name in ("load", "loads")),
        "types.FunctionType",
        "types.CodeType",
    }
)

# The torch names an ``allowlist`` rule's code may reach by path (in-place forms included): any
# elementwise, reduction, shape, indexing and creation operation, dtypes and constants, and
# the module paths on the way to them. A path through any other name is evidence.
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
        "median",
        # products (einsum and matmul are not any exercise's twin)
        "matmul", "mm", "bmm", "mv", "dot", "inner", "outer", "einsum", "tensordot",
        # shape and indexing
        "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t",
        "swapaxes", "swapdims", "movedim", "moveaxis", "broadcast_to", "broadcast_tensors",
        "broadcast_shapes", "repeat_interleave", "tile", "cat", "concat", "concatenate",
        "stack", "hstack", "vstack", "split", "chunk", "unbind", "narrow", "select",
        "index_select", "gather", "take_along_dim", "masked_select", "nonzero", "argwhere",
        "scatter", "scatter_add", "index_add", "index_fill", "index_copy", "index_put",
        "masked_scatter", "flip", "roll", "tril", "triu", "diagonal", "one_hot",
        # creation and conversion
        "tensor", "as_tensor", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
        "full_like", "empty_like", "arange", "linspace", "eye", "clone",
        # types, dtypes, constants, autograd switches
        "is_floating_point", "is_complex", "is_tensor", "Tensor", "Size", "finfo", "iinfo",
        "result_type", "promote_types", "get_default_dtype", "float16", "float32", "float64",
        "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool", "long", "float", "pi",
        "e", "inf", "nan", "no_grad", "enable_grad", "is_grad_enabled", "dtype", "device",
        # module paths: what follows them is judged on its own
        "torch", "nn", "functional", "special", "linalg",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Flag:
    """Something for an instructor to read by hand: where, why, and the by-hand function whose
    code reaches it (None: a file the reading could not read or follow)."""

    file: str
    line: int
    reason: str
    function: str | None = None

    def __str__(self) -> str:
        return f"{self.file}, line {self.line}: {self.reason}"


class _Unreadable(Exception):
    """A file the reading cannot read: line 0 where Python itself may (too large to read)."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(reason)
        self.file, self.line, self.reason = file, line, reason


def decode(data: bytes, file: str) -> str:
    """``data`` as Python's importer reads it: the encoding of its coding line or byte-order
    mark (UTF-8 without either). Raises _Unreadable with the line and the cause."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:  # an unknown codec, or a byte-order mark and another coding
        raise _Unreadable(file, error.lineno or 1, f"SyntaxError: {error.msg}") from None
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        start = getattr(error, "start", 0)
        line = data.count(b"\n", 0, start) + 1
        shown = encoding.removesuffix("-sig")
        raise _Unreadable(
            file,
            line,
            f"SyntaxError: byte 0x{data[start]:02x} is not {shown}; save the file as {shown}",
        ) from None


def parse(data: bytes, file: str) -> ast.Module:
    """The module ``data`` holds, parsed as the importer parses it; _Unreadable if it cannot be."""
    text = decode(data, file)
    try:
        return ast.parse(text, file)
    except SyntaxError as error:
        raise _Unreadable(file, error.lineno or 1, f"SyntaxError: {error.msg}") from None
    except ValueError as error:  # null bytes
        raise _Unreadable(file, 1, f"SyntaxError: {error}") from None
    except (MemoryError, RecursionError) as error:  # nesting deeper than the parser's stack
        raise _Unreadable(
            file, 1, f"{type(error).__name__}: nested too deeply for Python's parser"
        ) from None


@dataclass
class _Module:
    """One parsed file: where each module-level name is bound, and what its imports name."""

    name: str
    file: str
    tree: ast.Module
    bound: dict[str, list[ast.AST]]  # name -> the statements (or values) that bind it
    imported: dict[str, str]  # name -> the dotted path it was imported as ("torch.nn.functional")
    modules: list[str]  # every module its imports name, dotted ("submission.helpers", "torch")
    work: int = 0  # syntax nodes its indexing visited

    @classmethod
    def of(cls, name: str, file: str, tree: ast.Module) -> _Module:
        module = cls(name, file, tree, {}, {}, [])
        for statement in _top_level(tree.body):
            module._bind(statement)
        return module

    def _bind(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            paths = _imports(statement, self.name)
            self.imported.update(paths)
            if isinstance(statement, ast.Import):
                self.modules += [alias.name for alias in statement.names]
            else:  # ``from .x import y``: x, and x.y where that is a module
                self.modules += [path.rpartition(".")[0] for path in paths.values()]
                self.modules += list(paths.values())
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.bound.setdefault(statement.name, []).append(statement)
        elif isinstance(statement, ast.For | ast.AsyncFor):
            for node in ast.walk(statement.target):
                if isinstance(node, ast.Name):
                    self.bound.setdefault(node.id, []).append(statement.iter)
        elif isinstance(statement, ast.With | ast.AsyncWith):
            for item in statement.items:
                for node in ast.walk(item.optional_vars or ast.Pass()):
                    if isinstance(node, ast.Name):
                        self.bound.setdefault(node.id, []).append(item.context_expr)
        else:
            for node in ast.walk(statement):
                self.work += 1
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    self.bound.setdefault(node.id, []).append(statement)
            alias = _alias(statement)
            if alias is not None and alias[1] in self.imported:  # ``F = torch.nn.functional``
                name, root, parts = alias
                self.imported[name] = ".".join([self.imported[root], *parts])


_Next = tuple[_Module, ast.AST, str]  # a definition to read: its module, its node, its name


class Package:
    """The submitted package, read as its lessons' grading needs it. ``source`` gives a module's
    bytes by its dotted name in the package ("objective", "helpers.maths"), None where there is
    no such module, or raises _Unreadable."""

    def __init__(self, source: Callable[[str], tuple[str, bytes] | None]) -> None:
        self._source = source  # module name -> (its file, its bytes), None where there is none
        self._modules: dict[str, _Module | None] = {}
        self.unreadable: dict[str, Flag] = {}  # module -> why Python cannot import its file
        self.unfollowed: dict[str, Flag] = {}  # module -> why the reading left it out
        self.work = 0  # syntax nodes the reading visited, indexing and following, in all
        self.read_bytes = 0  # of the files parsed, in all

    @classmethod
    def read(cls, target: Path) -> Package:
        """The package in the folder ``target``."""
        target = Path(target)

        def source(name: str) -> tuple[str, bytes] | None:
            parts = name.split(".")
            for path in (
                target.joinpath(*parts).with_suffix(".py"),
                target.joinpath(*parts, "__init__.py"),
            ):
                file = path.relative_to(target).as_posix()
                try:
                    if not path.is_file():
                        continue
                    size = path.stat().st_size
                    if size > MAX_FILE_BYTES:
                        raise _Unreadable(
                            file, 0, f"{size} bytes, over the reading's {MAX_FILE_BYTES}"
                        )
                    return file, path.read_bytes()
                except OSError as error:
                    raise _Unreadable(
                        file, 0, f"cannot be read: {error.strerror or error}"
                    ) from None
            return None

        return cls(source)

    @classmethod
    def of_sources(cls, sources: Mapping[str, str | bytes]) -> Package:
        """The package of ``sources`` (module name -> its text or bytes)."""

        def source(name: str) -> tuple[str, bytes] | None:
            text = sources.get(name)
            if text is None:
                return None
            return _file(name), text.encode("utf-8") if isinstance(text, str) else text

        return cls(source)

    def module(self, name: str) -> _Module | None:
        """The parsed module ``name``, or None (absent, unreadable, too large: then said in
        ``unreadable`` or ``unfollowed``)."""
        if name in self._modules:
            return self._modules[name]
        self._modules[name] = None
        try:
            found = self._source(name)
            if found is None:
                return None
            file, data = found
            if self.read_bytes + len(data) > MAX_PACKAGE_BYTES:
                raise _Unreadable(file, 0, f"the files read before it reach {MAX_PACKAGE_BYTES}")
            self.read_bytes += len(data)
            tree = parse(data, file)
        except _Unreadable as problem:
            if problem.line == 0:  # Python may import it; the reading leaves it out
                self.unfollowed[name] = Flag(problem.file, 1, f"not read: {problem.reason}")
            else:
                self.unreadable[name] = Flag(problem.file, problem.line, problem.reason)
            return None
        self._modules[name] = module = _Module.of(name, file, tree)
        self.work += module.work
        return module

    def imports_of(self, name: str) -> list[str]:
        """``name`` and the package's modules its import runs, transitively, in import order:
        the files a lesson's import reads (a file that does not parse adds only itself)."""
        order: list[str] = []
        waiting, seen = [name], set()
        while waiting:
            current = waiting.pop()
            if current in seen:
                continue
            seen.add(current)
            module = self.module(current)
            if module is None and current not in self.unreadable | self.unfollowed:
                continue
            order.append(current)
            if module is not None:
                found = [m.split(".", 1)[1] for m in module.modules if m.startswith(ALIAS + ".")]
                waiting.extend(reversed(found))
        return order

    def cannot_import(self, name: str) -> Flag | None:
        """The first of the files ``name``'s import reads that Python cannot parse, or None."""
        for module in self.imports_of(name):
            if module in self.unreadable:
                return self.unreadable[module]
        return None

    def review(self, name: str, rules: tuple[Rule, ...] | list[Rule]) -> list[Flag]:
        """What the instructor should read in module ``name``'s package: files its import reads
        that the reading left out, then each rule's evidence. (A file Python cannot parse is
        not here: it fails the lesson's import, whose one line, ``cannot_import``, says why.)"""
        flags = [self.unfollowed.get(module) for module in self.imports_of(name)]
        found = [flag for flag in flags if flag is not None]
        for rule in rules:
            found += self.evidence(name, rule)
        return found

    def evidence(self, name: str, rule: Rule) -> list[Flag]:
        """What in the code ``rule.function`` of module ``name`` reaches only its source shows."""
        module = self.module(name)
        if module is None or rule.function not in module.bound:
            return []
        reading = _Reading(self, rule)
        for node in module.bound[rule.function]:
            reading.visit(module, node, rule.function)
        return reading.flags


class _Reading:
    """One rule's walk through the code its function reaches: each node once."""

    def __init__(self, package: Package, rule: Rule) -> None:
        self.package = package
        self.rule = rule
        self.forbidden = frozenset(rule.names)
        self.flags: list[Flag] = []
        self._seen: set[int] = set()

    def visit(self, module: _Module, start: ast.AST, holder: str) -> None:
        waiting: list[tuple[_Module, ast.AST, str]] = [(module, start, holder)]
        while waiting:
            where, node, holder = waiting.pop()
            if id(node) in self._seen:
                continue
            self._seen.add(id(node))
            waiting.extend(self._scan(where, node, holder))

    def _scan(self, module: _Module, node: ast.AST, holder: str) -> Iterator[_Next]:
        """Flag what ``node`` holds; yield the definitions it uses, to be read in turn."""
        covered: set[int] = set()  # the inner parts of an attribute path, judged with it
        local: dict[str, str] = {}  # names this code imports itself
        for inner in _code(node):  # breadth first: a path comes before its parts
            self.package.work += 1
            if isinstance(inner, ast.Import | ast.ImportFrom):
                paths = _imports(inner, module.name)
                local.update(paths)
                for path in paths.values():
                    self._judge(module, inner, path, holder)
                    yield from self._into_package(path)
            elif isinstance(inner, ast.Attribute):
                covered.add(id(inner.value))
                if id(inner) not in covered:
                    yield from self._attribute(module, inner, local, holder)
            elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                yield from self._name(module, inner, local, holder, id(inner) in covered)
            elif isinstance(inner, ast.Call):
                self._getattr(module, inner, local, holder)

    def _name(
        self, module: _Module, node: ast.Name, local: dict[str, str], holder: str, root: bool
    ) -> Iterator[_Next]:
        path = local.get(node.id) or module.imported.get(node.id)
        if path is not None:
            if not root:  # a path's root is judged with the path
                self._judge(module, node, path, holder)
                yield from self._into_package(path)
        elif node.id in module.bound:
            yield from ((module, bound, node.id) for bound in module.bound[node.id])
        elif node.id in UNFOLLOWED:
            self._flag(module, node, f"runs code the reading cannot follow ({node.id})", holder)

    def _attribute(
        self, module: _Module, node: ast.Attribute, local: dict[str, str], holder: str
    ) -> Iterator[_Next]:
        parts: list[str] = []
        base: ast.AST = node
        while isinstance(base, ast.Attribute):
            parts.insert(0, base.attr)
            base = base.value
        root = base.id if isinstance(base, ast.Name) else None
        path = None if root is None else local.get(root) or module.imported.get(root)
        if path is None:  # an attribute of the student's own object: only its names are judged
            if any(part in self.forbidden for part in parts):
                shown = ".".join([root or "(...)", *parts])
                self._flag(module, node, f"uses {shown}", holder)
            return
        full = ".".join([path, *parts])
        self._judge(module, node, full, holder)
        yield from self._into_package(full)

    def _getattr(self, module: _Module, node: ast.Call, local: dict[str, str], holder: str) -> None:
        if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args):
            return
        name = node.args[1] if len(node.args) > 1 else None
        target = node.args[0]
        root = target.id if isinstance(target, ast.Name) else None
        path = None if root is None else local.get(root) or module.imported.get(root)
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            if path is not None:
                self._judge(module, node, f"{path}.{name.value}", holder)
            elif name.value in self.forbidden:
                self._flag(module, node, f"uses {name.value}", holder)
        elif path is not None and path.split(".")[0] == "torch":
            self._flag(module, node, f"looks a name of {path} up at run time", holder)

    def _judge(self, module: _Module, node: ast.AST, path: str, holder: str) -> None:
        """A dotted path the code names: a forbidden name on it, or (allowlist) a torch path
        through anything but an allowed operation."""
        parts = path.split(".")
        if parts[0] == ALIAS:  # the package's own code: read where it is defined instead
            return
        named = [part for part in parts if part in self.forbidden]
        if path in UNFOLLOWED_PATHS:
            self._flag(module, node, f"runs code the reading cannot follow ({path})", holder)
        elif named:
            self._flag(module, node, f"uses {path}", holder)
        elif self.rule.allowlist and parts[0] == "torch":
            outside = [part for part in parts[1:] if not _allowed(part)]
            if outside:
                what = "not an elementwise, reduction or shape operation"
                self._flag(module, node, f"uses {path}, {what}", holder)

    def _into_package(self, path: str) -> Iterator[_Next]:
        """The definition a path names in the package's own modules, to be read in turn
        (through the modules that import it from one another, a bounded number of hops)."""
        for _ in range(MAX_HOPS):
            parts = path.split(".")
            if parts[0] != ALIAS:
                return
            for cut in range(len(parts), 1, -1):
                other = self.package.module(".".join(parts[1:cut]))
                if other is not None:
                    break
            else:
                return
            rest = parts[cut:]
            if not rest:
                return
            if rest[0] not in other.imported:
                yield from ((other, bound, rest[0]) for bound in other.bound.get(rest[0], []))
                return
            path = ".".join([other.imported[rest[0]], *rest[1:]])

    def _flag(self, module: _Module, node: ast.AST, what: str, holder: str) -> None:
        if len(self.flags) >= MAX_FLAGS:
            return
        function = self.rule.function
        where = "" if holder == function else f" (in {holder}, which {function} uses)"
        flag = Flag(module.file, getattr(node, "lineno", 1), f"{function} {what}{where}", function)
        if flag not in self.flags:
            self.flags.append(flag)


def _code(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first) without annotations: a type hint names, it does not run."""
    waiting = collections.deque([node])
    while waiting:
        current = waiting.popleft()
        yield current
        for field, value in ast.iter_fields(current):
            if field in ("annotation", "returns"):
                continue
            if isinstance(value, list):
                waiting.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                waiting.append(value)


def _alias(statement: ast.stmt) -> tuple[str, str, list[str]] | None:
    """``name = root.a.b``: (name, root, [a, b]), the module-level aliases of an import."""
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return None
    parts: list[str] = []
    value = statement.value
    while isinstance(value, ast.Attribute):
        parts.insert(0, value.attr)
        value = value.value
    return (statement.targets[0].id, value.id, parts) if isinstance(value, ast.Name) else None


def _allowed(name: str) -> bool:
    return name in ALLOWED or (
        name.endswith("_") and not name.startswith("_") and name[:-1] in ALLOWED
    )


def _file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _imports(node: ast.Import | ast.ImportFrom, where: str) -> dict[str, str]:
    """The names an import binds and the dotted path of each: the package's own modules under
    ALIAS (relative imports resolved from module ``where``)."""
    found: dict[str, str] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                found[alias.asname] = alias.name
            else:
                found[alias.name.split(".")[0]] = alias.name.split(".")[0]
        return found
    if node.level:
        package = where.split(".")[: -node.level] if node.level <= where.count(".") + 1 else []
        base = ".".join([ALIAS, *package, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    for alias in node.names:
        if alias.name != "*":
            found[alias.asname or alias.name] = f"{base}.{alias.name}"
    return found


def _is_main(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: what runs only when the file runs as a script."""
    test = statement.test if isinstance(statement, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, inside if/try/with/for blocks too (still module level), but
    the ``__main__`` block's."""
    waiting = list(reversed(body))
    while waiting:
        statement = waiting.pop()
        if isinstance(statement, ast.If):
            inner = statement.orelse if _is_main(statement) else statement.body + statement.orelse
            waiting.extend(reversed(inner))
        elif isinstance(statement, ast.Try | ast.TryStar):
            handlers = [s for h in statement.handlers for s in h.body]
            inner = statement.body + handlers + statement.orelse + statement.finalbody
            waiting.extend(reversed(inner))
        elif isinstance(statement, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
            if not isinstance(statement, ast.While):
                yield statement  # its target or ``as`` name is bound by its header
            waiting.extend(reversed(statement.body + getattr(statement, "orelse", [])))
        else:
            yield statement
