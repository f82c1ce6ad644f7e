"""The lesson manifest, course/lessons.toml: lessons, their functions, checks, points and links.

The one source of truth for points and links: the graders, the site and the nbgrader tooling
all read it through this module.

    from core.manifest import load_manifest
    manifest = load_manifest()
    for lesson in manifest.lessons:
        for check in lesson.checks:
            print(check.id, check.points, check.link, check.url)

A lesson is a ``[[lesson]]`` table; its checks are ``[[lesson.check]]`` tables nested in it:

    [[lesson.check]]
    id = "lookup-matches-indexing"     # unique in the whole manifest
    function = "lookup"                # one of the lesson's functions
    points = 2                         # a positive integer; a check passes or fails whole
    hidden = false                     # hidden checks never ship to students
    hint = "..."                       # shown when the check fails: the likely mistake
    section = "embedding-lookup"       # optional; defaults to the function's section
    timeout = 20.0                     # optional; seconds per call (default 10)
    evidence = "claimed"               # optional; what the grade rests on (default observed)
    error_path = true                  # optional; counts only when the function's other checks pass
    [lesson.check.mistakes]            # optional: hints for specific mistakes a check diagnoses
    off-by-one = "..."
    [lesson.check.mistake_sections]    # optional: a mistake whose rule another section teaches
    off-by-one = "from-ids-to-vectors"

``evidence`` is one of EVIDENCE (docs/instructors.md, "What a grade rests on"): ``observed``
(values the checker receives as plain data, and what it sees and runs itself) or ``claimed``
(what only the student's process reports about itself: a module's mode during a call, whether
autograd was on). The checker's reading of the source is no evidence: it flags for review.
A function's claimed checks together are worth at most CLAIM_POINTS: its several claims are
one check, with a mistake for each. An ``error_path`` check ("raises ValueError ...") earns
its points only when the function's other selected checks pass, so an error raised with no
exercise written earns nothing.

A "by hand" rule is a ``[[lesson.rule]]`` table: the names in ``names``, where the code of
``function`` and what it uses names them, are flagged for review by the checker's reading
before anything runs (graders/rules.py; no point rests on it), and with ``allowlist = true`` so
is a torch operation there that is not elementwise, reduction or shape; ``message`` is the
hint of a breach. A rule with ``allow`` (schema names, e.g. ``aten::mul``) grades the function
on its operator graph (graders/graph.py): the worker traces the call, and the checker refuses
a graph with an op outside ``allow``, naming first one of the library's own ops in ``ops``
(e.g. ``aten::logsumexp``), then runs the graph itself:

    [[lesson.rule]]
    function = "cross_entropy"
    names = ["logsumexp"]
    allowlist = true
    message = "..."
    ops = ["aten::logsumexp"]
    allow = ["aten::sub", "aten::exp", "aten::sum", "aten::log", ...]

A function with a library twin that no rule forbids says why in the lesson's ``no_rule``
table: ``no_rule = { lookup = "F.embedding is the lookup itself" }``.

A lesson's ``builds_on`` table names, per function, the functions it calls: of the same
lesson by name, of an earlier lesson as ``module.function``. While the checker grades
``lm_loss`` it answers the worker's proxies for ``cross_entropy`` with a correct one, so a
mistake in one function costs only its own checks; while it grades ``self_attention`` it
answers for lesson 4's ``attention`` too, so a lesson is graded on its own code (its folder
holds the earlier lessons' modules as stubs). It is the one place that says so; the worker,
the checker, the report and the release read it here:

    builds_on = { lm_loss = ["cross_entropy"] }
    builds_on = { self_attention = ["split_heads", "attention.attention"] }

This module needs only the standard library, so the site can import it cheaply.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "course" / "lessons.toml"
# Where a grading writes its report unless told otherwise, and where its readers look for it
# (the compare, the live course's progress, the watch).
DEFAULT_REPORT = ROOT / "build" / "grading-report.json"
DEFAULT_TIMEOUT = 10.0

_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NAME = re.compile(r"^[A-Za-z_]\w*$")
_LESSON_KEYS = {
    "number": int,
    "slug": str,
    "title": str,
    "page": str,
    "module": str,
    "level": str,
    "functions": list,
    "sections": dict,
}
_OPTIONAL_LESSON_KEYS = {"check", "rule", "builds_on", "no_rule"}
_RULE_KEYS = {"function": str, "names": list, "message": str}
_OPTIONAL_RULE_KEYS = {"ops": list, "allow": list, "allowlist": bool}
_CHECK_KEYS = {"id": str, "function": str, "points": int, "hidden": bool, "hint": str}
_OPTIONAL_CHECK_KEYS = {
    "section": str,
    "timeout": (int, float),
    "mistakes": dict,
    "mistake_sections": dict,
    "evidence": str,
    "error_path": bool,
}
# What a check's grade rests on (docs/instructors.md, "What a grade rests on"): values the
# checker receives and what it sees and runs itself, or what only the student's process
# reports about itself, a claim: a function's claims are worth at most CLAIM_POINTS together.
EVIDENCE = ("observed", "claimed")
CLAIM_POINTS = 1


class ManifestError(ValueError):
    """course/lessons.toml is malformed; the message says where and what."""


@dataclass(frozen=True)
class Check:
    """One graded check: a pytest test (or several) tied to it by ``@pytest.mark.check(id)``."""

    id: str
    lesson: str  # the lesson's slug
    function: str
    points: int
    hidden: bool
    hint: str
    section: str
    page: str  # the chapter page, relative to course/
    mistakes: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    mistake_sections: Mapping[str, str] = field(default_factory=dict)  # key -> its own section
    evidence: str = "observed"  # one of EVIDENCE
    error_path: bool = False  # counts only when the function's other checks pass

    @property
    def link(self) -> str:
        """The chapter page and section anchor, relative to course/: ``chapters/01-x.md#y``."""
        return f"{self.page}#{self.section}"

    @property
    def url(self) -> str:
        """The same place on the built site (directory URLs): ``chapters/01-x/#y``."""
        return site_url(self.page, self.section)

    def mistake_hint(self, key: str | None, shared: Mapping[str, str] | None = None) -> str:
        """The hint for a diagnosed mistake (from this check's table, else from ``shared``:
        the mistakes of every check of the same function), or the default hint for None."""
        if key is None:
            return self.hint
        known = {**(shared or {}), **self.mistakes}
        try:
            return known[key]
        except KeyError:
            raise ManifestError(
                f"check {self.id!r} knows no mistake {key!r} (known for {self.function}: "
                f"{', '.join(sorted(known)) or 'none'})"
            ) from None


@dataclass(frozen=True)
class Rule:
    """A "by hand" rule: operations that must not run, and names that must not appear, in
    ``function`` (see the module docstring)."""

    function: str
    ops: tuple[str, ...]
    names: tuple[str, ...]
    message: str
    # The only operations the function may run (overloads aside), when the rule lists them:
    # an op that computes the forbidden thing under another name is refused as well.
    allow: tuple[str, ...] = ()
    # The reading allows only elementwise, reduction and shape operations of torch in the
    # function's code (graders/rules.py's ALLOWED).
    allowlist: bool = False

    @property
    def traced(self) -> bool:
        """Whether the function is graded on its operator graph (graders/graph.py): a rule
        that lists the operations it allows."""
        return bool(self.allow)


@dataclass(frozen=True)
class Lesson:
    number: int
    slug: str
    title: str
    page: str
    module: str
    level: str
    functions: tuple[str, ...]
    sections: Mapping[str, str]
    checks: tuple[Check, ...]
    rules: tuple[Rule, ...] = ()
    builds_on: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    # functions with a library twin that no rule forbids, and why (``no_rule``)
    no_rule: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def dependencies(self, function: str) -> tuple[str, ...]:
        """The functions that ``function`` calls (its ``builds_on`` entry): this lesson's by
        name, an earlier lesson's as ``module.function``."""
        return self.builds_on.get(function, ())

    def own_dependencies(self, function: str) -> tuple[str, ...]:
        """The functions of this lesson that ``function`` calls."""
        return tuple(name for name in self.dependencies(function) if "." not in name)

    def earlier_dependencies(self, function: str, through: bool = False) -> tuple[str, ...]:
        """The earlier lessons' functions that ``function`` calls, as ``module.function``;
        ``through``: also those that it calls through this lesson's functions it calls
        (``transformer_block`` through ``self_attention``: lesson 4's ``attention``)."""
        found: dict[str, None] = {}
        seen, todo = {function}, [function]
        while todo:
            for name in self.dependencies(todo.pop(0)):
                if "." in name:
                    found[name] = None
                elif through and name not in seen:
                    seen.add(name)
                    todo.append(name)
        return tuple(found)

    def rule(self, function: str) -> Rule | None:
        return next((rule for rule in self.rules if rule.function == function), None)

    @property
    def traces(self) -> bool:
        """Whether a function of the lesson is graded on its operator graph."""
        return any(rule.traced for rule in self.rules)

    def selected_checks(self, hidden: bool) -> tuple[Check, ...]:
        """The public checks, plus the hidden ones when ``hidden``."""
        return tuple(c for c in self.checks if hidden or not c.hidden)

    def max_points(self, hidden: bool) -> int:
        return sum(c.points for c in self.selected_checks(hidden))

    def function_points(self, function: str) -> int:
        """The points of ``function``'s checks, public and hidden (0 while it has none)."""
        return sum(c.points for c in self.checks if c.function == function)

    def link(self, function: str) -> str:
        return f"{self.page}#{self.sections[function]}"

    def mistakes(self, function: str) -> dict[str, str]:
        """Every diagnosed mistake of ``function``, over all its checks: key -> hint."""
        found: dict[str, str] = {}
        for check in self.checks:
            if check.function == function:
                found.update(check.mistakes)
        return found

    def mistake_section(self, check: Check, key: str | None) -> str:
        """The section that teaches the rule a diagnosed mistake ``key`` breaks: the mistake's
        own (``mistake_sections`` of the check that names it), else that check's."""
        if key is None:
            return check.section
        for each in (check, *(c for c in self.checks if c.function == check.function)):
            if key in each.mistakes:
                return each.mistake_sections.get(key, each.section)
        return check.section


@dataclass(frozen=True)
class Manifest:
    lessons: tuple[Lesson, ...]
    path: Path | None = None

    def lesson(self, name: str) -> Lesson:
        """A lesson by slug, module name or number; KeyError naming the valid slugs."""
        for lesson in self.lessons:
            if name in (lesson.slug, lesson.module, str(lesson.number)):
                return lesson
        raise KeyError(f"unknown lesson {name!r}; valid lessons: {', '.join(self.slugs)}")

    @property
    def slugs(self) -> list[str]:
        return [lesson.slug for lesson in self.lessons]

    @property
    def checks(self) -> list[Check]:
        return [check for lesson in self.lessons for check in lesson.checks]

    def dependencies(self, qualified: str) -> tuple[str, ...]:
        """``builds_on`` of ``module.function``: the names it calls (() if none)."""
        lesson = self._of_module(qualified)
        return () if lesson is None else lesson.dependencies(qualified.partition(".")[2])

    def earlier_dependencies(self, qualified: str) -> tuple[str, ...]:
        """The earlier lessons' functions that ``module.function`` calls, itself or through
        its own lesson's functions, as ``module.function`` (() if none)."""
        lesson = self._of_module(qualified)
        function = qualified.partition(".")[2]
        return () if lesson is None else lesson.earlier_dependencies(function, through=True)

    def _of_module(self, qualified: str) -> Lesson | None:
        module = qualified.partition(".")[0]
        return next((lesson for lesson in self.lessons if lesson.module == module), None)

    def check(self, check_id: str) -> Check:
        for check in self.checks:
            if check.id == check_id:
                return check
        raise KeyError(f"no check {check_id!r} in the manifest")


def public_view(data: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's raw data without its hidden checks: what the student release may read."""
    lessons = []
    for lesson in data.get("lesson", []):
        lesson = dict(lesson)
        lesson["check"] = [c for c in lesson.get("check", []) if not c.get("hidden")]
        lessons.append(lesson)
    return {**data, "lesson": lessons}


def site_url(page: str, section: str | None = None) -> str:
    """``chapters/01-x.md`` + ``y`` -> ``chapters/01-x/#y`` (MkDocs directory URLs)."""
    stem = page[: -len(".md")] if page.endswith(".md") else page
    if stem == "index" or stem.endswith("/index"):
        stem = stem[: -len("index")].rstrip("/")
    url = f"{stem}/" if stem else ""
    return f"{url}#{section}" if section else url


def load_manifest(path: Path | str | None = None) -> Manifest:
    """Read and validate the manifest (default: course/lessons.toml).

    The manifest is immutable, so a file read once (by the same path, so that ``path`` is the
    one given) is not parsed again while it is unchanged: same inode, size, modification and
    change times (an edit changes the last). Autograde asks for it per submission, and parsing
    costs about 15 ms."""
    path = Path(path) if path is not None else MANIFEST
    try:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            if key in _LOADED:
                return _LOADED[key]
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file (the lesson manifest)") from None
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{path}: not valid TOML: {error}") from None
    manifest = parse_manifest(data, source=str(path), path=path)
    _LOADED.clear()  # one manifest is in use at a time; keep only the latest
    _LOADED[key] = manifest
    return manifest


_LOADED: dict[tuple[str, int, int, int, int], Manifest] = {}


def parse_manifest(
    data: Mapping[str, Any], source: str = "lessons.toml", path: Path | None = None
) -> Manifest:
    """Validate parsed TOML and build the manifest; ManifestError says what is wrong, and where."""
    raw_lessons = data.get("lesson")
    if not isinstance(raw_lessons, list) or not raw_lessons:
        raise ManifestError(f"{source}: no [[lesson]] tables")
    lessons = [_lesson(raw, f"{source}: lesson {i + 1}") for i, raw in enumerate(raw_lessons)]
    for attribute in ("number", "slug", "module", "page"):
        _unique([getattr(lesson, attribute) for lesson in lessons], f"{source}: lesson {attribute}")
    ids = [check.id for lesson in lessons for check in lesson.checks]
    _unique(ids, f"{source}: check id")
    for i, lesson in enumerate(lessons):
        _earlier_dependencies(lesson, lessons, f"{source}: lesson {i + 1}")
    return Manifest(lessons=tuple(lessons), path=path)


def _earlier_dependencies(lesson: Lesson, lessons: list[Lesson], where: str) -> None:
    """A ``module.function`` in ``builds_on`` names a function of an earlier lesson."""
    by_module = {other.module: other for other in lessons}
    for function in lesson.builds_on:
        for name in lesson.earlier_dependencies(function):
            module, _, called = name.partition(".")
            other = by_module.get(module)
            if other is None or called not in other.functions or other.number >= lesson.number:
                raise ManifestError(
                    f"{where}: builds_on.{function} names {name!r}, which is no function of an "
                    "earlier lesson (write MODULE.FUNCTION of a lesson with a smaller number)"
                )


def _unique(values: list, what: str) -> None:
    seen: set = set()
    for value in values:
        if value in seen:
            raise ManifestError(f"{what} {value!r} appears more than once")
        seen.add(value)


def _typed(raw: Mapping[str, Any], required: dict, optional: dict, where: str) -> None:
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in required:
        if key not in raw:
            raise ManifestError(f"{where}: missing {key!r}")
    for key, kind in {**required, **optional}.items():
        if key in raw and kind is not None:
            value = raw[key]
            if isinstance(value, bool) and kind is not bool:
                raise ManifestError(f"{where}: {key!r} must be {_kind_name(kind)}, not a boolean")
            if not isinstance(value, kind):
                raise ManifestError(f"{where}: {key!r} must be {_kind_name(kind)}, got {value!r}")


def _kind_name(kind: type | tuple) -> str:
    names = {
        int: "an integer",
        str: "a string",
        bool: "true or false",
        list: "an array",
        dict: "a table",
        float: "a number",
    }
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _lesson(raw: Any, where: str) -> Lesson:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: not a table")
    _typed(raw, _LESSON_KEYS, dict.fromkeys(_OPTIONAL_LESSON_KEYS), where)
    where = f"{where.rsplit(':', 1)[0]}: lesson {raw['slug']!r}"
    if not _SLUG.match(raw["slug"]):
        raise ManifestError(f"{where}: slug must be lowercase words joined by '-'")
    if not _NAME.match(raw["module"]):
        raise ManifestError(f"{where}: module {raw['module']!r} is not a Python module name")
    functions = raw["functions"]
    if not functions or not all(isinstance(f, str) and _NAME.match(f) for f in functions):
        raise ManifestError(f"{where}: functions must be a non-empty array of Python names")
    _unique(functions, f"{where}: function")
    sections = raw["sections"]
    for function in functions:
        if function not in sections:
            raise ManifestError(f"{where}: sections has no section for function {function!r}")
    for function, section in sections.items():
        if function not in functions:
            raise ManifestError(f"{where}: sections names {function!r}, not one of its functions")
        if not isinstance(section, str) or not _SLUG.match(section):
            raise ManifestError(f"{where}: section of {function!r} must be a heading id")
    raw_checks = raw.get("check", [])
    if not isinstance(raw_checks, list):
        raise ManifestError(f"{where}: 'check' must be an array of tables ([[lesson.check]])")
    checks = tuple(_check(c, raw, f"{where}, check {i + 1}") for i, c in enumerate(raw_checks))
    _claims_capped(checks, where)
    seen: dict[tuple[str, str], str] = {}
    for check in checks:
        for key, hint in check.mistakes.items():
            if seen.setdefault((check.function, key), hint) != hint:
                raise ManifestError(
                    f"{where}: mistake {key!r} of {check.function} has two different hints"
                )
    raw_rules = raw.get("rule", [])
    if not isinstance(raw_rules, list):
        raise ManifestError(f"{where}: 'rule' must be an array of tables ([[lesson.rule]])")
    number = raw["number"]
    rules = tuple(
        _rule(r, functions, number, f"{where}, rule {i + 1}") for i, r in enumerate(raw_rules)
    )
    _unique([rule.function for rule in rules], f"{where}: rule for function")
    builds_on = _builds_on(raw.get("builds_on", {}), functions, where)
    no_rule = raw.get("no_rule", {})
    if not isinstance(no_rule, dict):
        raise ManifestError(f'{where}: no_rule must be a table of function = "reason"')
    for function, reason in no_rule.items():
        if function not in functions or not isinstance(reason, str) or not reason.strip():
            raise ManifestError(
                f"{where}: no_rule.{function} must name a function of the lesson and give a reason"
            )
        if function in {rule.function for rule in rules}:
            raise ManifestError(f"{where}: {function} has a rule and a no_rule reason")
    return Lesson(
        number=raw["number"],
        slug=raw["slug"],
        title=raw["title"],
        page=raw["page"],
        module=raw["module"],
        level=raw["level"],
        functions=tuple(functions),
        sections=MappingProxyType(dict(sections)),
        checks=checks,
        rules=rules,
        builds_on=builds_on,
        no_rule=MappingProxyType({k: v.strip() for k, v in no_rule.items()}),
    )


def _claims_capped(checks: tuple[Check, ...], where: str) -> None:
    """A function's claimed checks, public and hidden together, are worth CLAIM_POINTS at most:
    a forged report of what the student's process did buys no more than that, however many
    behaviours it claims. Several claims of one function are one check with a mistake each."""
    claimed: dict[str, list[Check]] = {}
    for check in checks:
        if check.evidence == "claimed":
            claimed.setdefault(check.function, []).append(check)
    for function, found in claimed.items():
        total = sum(check.points for check in found)
        if total > CLAIM_POINTS:
            ids = ", ".join(check.id for check in found)
            raise ManifestError(
                f"{where}: {function}'s claimed checks ({ids}) are worth {total} points; a "
                f"function's claims are worth {CLAIM_POINTS} at most: make them one check"
            )


def _builds_on(raw: Any, functions: list[str], where: str) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: builds_on must be a table of function = [functions]")
    table: dict[str, tuple[str, ...]] = {}
    for function, names in raw.items():
        if function not in functions:
            raise ManifestError(f"{where}: builds_on names {function!r}, not one of its functions")
        # an earlier lesson's function is MODULE.FUNCTION, checked once every lesson is read
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(n, str) and (n in functions or _qualified(n)) for n in names)
        ):
            raise ManifestError(
                f"{where}: builds_on.{function} must list other functions of the lesson "
                "(or MODULE.FUNCTION of an earlier lesson)"
            )
        _unique(list(names), f"{where}: builds_on.{function} entry")
        if function in names:
            raise ManifestError(f"{where}: builds_on.{function} names {function!r} itself")
        table[function] = tuple(names)
    return MappingProxyType(table)


def _qualified(name: str) -> bool:
    module, dot, function = name.partition(".")
    return bool(dot) and module.isidentifier() and function.isidentifier()


def _rule(raw: Any, functions: list[str], number: int, where: str) -> Rule:
    """The rule; ``{lesson}`` in its message is the lesson's number."""
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: not a table")
    _typed(raw, _RULE_KEYS, _OPTIONAL_RULE_KEYS, where)
    if raw["function"] not in functions:
        raise ManifestError(f"{where}: unknown function {raw['function']!r}")
    for key in ("ops", "names", "allow"):
        if not all(isinstance(v, str) and v for v in raw.get(key, ())):
            raise ManifestError(f"{where}: {key} must be an array of non-empty strings")
    if not raw["names"] or not raw["message"].strip():
        raise ManifestError(f"{where}: a rule needs names and a message")
    if raw.get("allow") and not raw.get("ops"):
        raise ManifestError(f"{where}: allow lists the ops a graph may hold: give ops too")
    return Rule(
        function=raw["function"],
        ops=tuple(raw.get("ops", ())),
        names=tuple(raw["names"]),
        message=raw["message"].strip().replace("{lesson}", str(number)),
        allow=tuple(raw.get("allow", ())),
        allowlist=raw.get("allowlist", False),
    )


def _check(raw: Any, lesson: Mapping[str, Any], where: str) -> Check:
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: not a table")
    if isinstance(raw.get("id"), str):
        where = f"{where} ({raw['id']!r})"
    _typed(raw, _CHECK_KEYS, _OPTIONAL_CHECK_KEYS, where)
    if not _SLUG.match(raw["id"]):
        raise ManifestError(f"{where}: id must be lowercase words joined by '-'")
    function = raw["function"]
    if function not in lesson["functions"]:
        raise ManifestError(
            f"{where}: unknown function {function!r}; the lesson's functions are "
            f"{', '.join(lesson['functions'])}"
        )
    if raw["points"] <= 0:
        raise ManifestError(f"{where}: points must be positive")
    if not raw["hint"].strip():
        raise ManifestError(f"{where}: empty hint")
    section = raw.get("section", lesson["sections"].get(function))
    if not section or not _SLUG.match(section):
        raise ManifestError(f"{where}: missing section (and none for {function!r} in sections)")
    mistakes = raw.get("mistakes", {})
    for key, hint in mistakes.items():
        if not _SLUG.match(key) or not isinstance(hint, str) or not hint.strip():
            raise ManifestError(f"{where}: mistake {key!r} needs a slug key and a non-empty hint")
    mistake_sections = raw.get("mistake_sections", {})
    for key, mistake_section in mistake_sections.items():
        if key not in mistakes or not isinstance(mistake_section, str):
            raise ManifestError(f"{where}: mistake_sections names {key!r}, not one of its mistakes")
        if not _SLUG.match(mistake_section):
            raise ManifestError(f"{where}: the section of mistake {key!r} must be a heading id")
    timeout = float(raw.get("timeout", DEFAULT_TIMEOUT))
    if timeout <= 0:
        raise ManifestError(f"{where}: timeout must be positive")
    evidence = raw.get("evidence", "observed")
    if evidence not in EVIDENCE:
        raise ManifestError(f"{where}: evidence must be one of {', '.join(EVIDENCE)}")
    if evidence == "claimed" and raw["points"] > CLAIM_POINTS:
        raise ManifestError(
            f"{where}: a claimed check (what only the student's process reports) is worth at "
            f"most {CLAIM_POINTS} point, not {raw['points']}"
        )
    return Check(
        id=raw["id"],
        lesson=lesson["slug"],
        function=function,
        points=raw["points"],
        hidden=raw["hidden"],
        hint=raw["hint"].strip(),
        section=section,
        page=lesson["page"],
        mistakes=MappingProxyType({k: v.strip() for k, v in mistakes.items()}),
        timeout=timeout,
        mistake_sections=MappingProxyType(dict(mistake_sections)),
        evidence=evidence,
        error_path=raw.get("error_path", False),
    )
