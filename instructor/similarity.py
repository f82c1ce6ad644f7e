"""``similarity LESSON``: which submissions of a lesson look alike (instructors only).

Each student's newest submission of the lesson's module is compared with every other's:

1. *Normalised.* The code is read as Python tokens, so layout, comments, parentheses and
   trailing commas never count; every name the student chooses (variables, arguments,
   helpers, import aliases) becomes ``V`` and every literal ``L``, so a renamed copy reads the
   same; statements that do nothing (``pass``, a bare expression or docstring, ``x = x``,
   ``x += 0``, an assignment to a name never read) are left out, so a copy padded with no-ops
   reads the same.
2. *Fingerprinted.* Every run of :data:`K` normalised tokens is a fingerprint. What every
   student has read is no evidence (:class:`Taught`): the statements of the released stub and
   of the course's own code (each reference solution, each chapter's example:
   :func:`course_code`) are left out, then the runs they hold dropped, so two correct answers
   written apart in the chapter's idioms, in the order the algorithm sets, share next to
   nothing.
3. *Weighted by how few students share them.* A fingerprint two students share counts 1, one
   that ``n`` share counts 1 for each pair of them, ``2 / (n (n - 1))``: what every correct
   solution writes the same way (a one-line ``causal_mask``) counts next to nothing.
4. *Scored per pair*: the weight of the fingerprints both have, divided by the number of
   fingerprints either has (at least :data:`MIN_FINGERPRINTS`, so a few lines are never a
   large share). 100% is two submissions identical but for names, literals and no-ops, that
   nobody else's resembles; a short partial submission shares little with a whole one.

The HTML report lists the pairs, most similar first, says how to read the percentages and shows
each flagged pair side by side with the lines they share marked. It names students: it is for
the course staff only. A high score is a reason to read both, not proof.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import token
import tokenize
from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from core.atomic import atomic_write_bytes
from core.manifest import ROOT, load_manifest

from .autograde import STUDENT_ID
from .course import PACKAGE, Course
from .errors import SetupError

K = 8  # normalised tokens per fingerprint: about half a line of code
MIN_FINGERPRINTS = 24  # a pair's score is out of at least this many (a few lines of code)
DISPLAY_AT = 0.3  # pairs scoring at least this are flagged and shown side by side
NAME, LITERAL = "V", "L"
STRUCTURE = frozenset(";{}")  # the normalised tokens that end a statement, open and close a block
CODE_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)  # a chapter's example
_IDENTITY = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1, ast.Div: 1, ast.FloorDiv: 1, ast.Pow: 1}


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    share: float  # the pair's score, 0 to 1 (see the module's docstring)
    lines: dict[str, list[int]] = field(default_factory=dict, compare=False)  # shared lines


@dataclass(frozen=True)
class Fingerprints:
    """A submission's fingerprints, each with the source lines it covers."""

    lines: dict[tuple[str, ...], tuple[int, int]]


def _noop(statement: ast.stmt, read: set[str]) -> bool:
    """Whether a statement does nothing worth comparing (``read``: every name ever loaded)."""
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Constant | ast.Name)
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if len(names) != len(targets):
            return False  # an attribute or item is set: that is an effect
        value = statement.value
        same = isinstance(value, ast.Name) and all(n == value.id for n in names)
        return same or not any(n in read for n in names)
    if isinstance(statement, ast.AugAssign):
        value = statement.value
        return (
            isinstance(value, ast.Constant)
            and type(statement.op) in _IDENTITY
            and value.value == _IDENTITY[type(statement.op)]
        )
    return False


def _spans(tree: ast.Module) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the statements that do nothing are, as (start, end) token positions."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return [
        ((s.lineno, s.col_offset), (s.end_lineno or s.lineno, s.end_col_offset or 0))
        for s in ast.walk(tree)
        if isinstance(s, ast.stmt) and _noop(s, read)
    ]


def _chosen_names(tree: ast.Module, kept: set[str]) -> set[str]:
    """The names a student chose: bound in the module, other than the stub's own."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names - kept


def public_names(stub: str) -> set[str]:
    """The functions and classes the stub defines: the lesson's interface, kept as written."""
    try:
        tree = ast.parse(stub)
    except SyntaxError:
        return set()
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def normalise(source: str, kept: Set[str] = frozenset()) -> list[tuple[str, int]]:
    """The code's tokens as compared, each with its line: chosen names ``V`` (not a call's
    keyword, which names the callee's parameter), literals ``L``; no-op statements, comments,
    layout, parentheses and trailing commas left out. Code that does not parse is compared as
    its words and symbols, each word a name."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, ValueError, tokenize.TokenError):
        words = []
        for number, line in enumerate(source.splitlines(), start=1):
            for word in re.findall(r"\w+|[^\w\s]", line):
                shown = LITERAL if word[0].isdigit() else word
                words.append((NAME if word.isidentifier() else shown, number))
        return words
    skip = _spans(tree)
    chosen = _chosen_names(tree, set(kept) | set(dir(builtins)))
    keywords = {
        (k.lineno, k.col_offset) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg
    }
    code = [t for t in tokens if t.type not in (token.NL, token.COMMENT)]
    out: list[tuple[str, int]] = []
    previous = ""
    for at, tok in enumerate(code):
        structure = tok.type in (token.NEWLINE, token.INDENT, token.DEDENT)
        if not structure and any(start <= tok.start and tok.end <= end for start, end in skip):
            continue
        if tok.type == token.NAME:
            own = tok.string in chosen and previous != "." and tok.start not in keywords
            text = NAME if own else tok.string
        elif tok.type in (token.NUMBER, token.STRING):
            text = LITERAL
        elif tok.type == token.OP:
            text = tok.string
            after = code[at + 1].string if at + 1 < len(code) else ""
            if text in "()" or (text == "," and after in (")", "]", "}")):
                continue
        elif structure:
            text = {token.NEWLINE: ";", token.INDENT: "{", token.DEDENT: "}"}[tok.type]
            if text == ";" and out and out[-1][0] in (";", "{", "}"):
                continue  # the line of a statement left out
        else:
            continue  # the end
        out.append((text, tok.start[0]))
        previous = tok.string
    return out


@dataclass(frozen=True)
class Taught:
    """Code every student has read (the stub, :func:`course_code`), normalised: its statements
    and its fingerprints. What a submission shares with it is no sign of copying."""

    statements: frozenset[tuple[str, ...]] = frozenset()
    grams: frozenset[tuple[str, ...]] = frozenset()

    @classmethod
    def of(cls, texts: Iterable[str], kept: Set[str] = frozenset()) -> Taught:
        statements: set[tuple[str, ...]] = set()
        grams: set[tuple[str, ...]] = set()
        for text in texts:
            tokens = normalise(text, kept)
            statements |= {tuple(tokens[at][0] for at in s) for s in _statements(tokens)}
            grams |= set(_grams(tokens))
        return cls(frozenset(statements), frozenset(grams))


def fingerprints(source: str, stub: str = "", taught: Taught | None = None) -> Fingerprints:
    """The fingerprints of a submission (runs of :data:`K` normalised tokens), each with the
    first and last line it covers, but for what ``taught`` holds (by default the stub's): its
    statements are left out (two honest solutions follow the same idioms in the order the
    algorithm sets, and share the runs across them), then its runs dropped (a statement
    written as the course writes it but for a part)."""
    kept = public_names(stub)
    taught = taught if taught is not None else Taught.of([stub], kept)
    found: dict[tuple[str, ...], tuple[int, int]] = {}
    for gram, span in _grams(_untaught(normalise(source, kept), taught.statements)).items():
        if gram not in taught.grams and not STRUCTURE.issuperset(gram):
            found.setdefault(gram, span)
    return Fingerprints(found)


def _statements(tokens: list[tuple[str, int]]) -> list[list[int]]:
    """The normalised tokens' statements, each as the indices of its tokens (the structure
    tokens between them, ``;`` ``{`` ``}``, belong to none)."""
    found: list[list[int]] = [[]]
    for at, (text, _line) in enumerate(tokens):
        if text in STRUCTURE:
            found.append([])
        else:
            found[-1].append(at)
    return [statement for statement in found if statement]


def _untaught(tokens: list[tuple[str, int]], taught: Set[tuple[str, ...]]) -> list[tuple[str, int]]:
    """The tokens without the statements ``taught`` holds: what is left is what the student
    wrote otherwise than the course shows it. The structure around a statement left out goes
    with it, so two submissions do not match on their gaps alone."""
    if not taught:
        return tokens
    gone = {
        at for s in _statements(tokens) if tuple(tokens[at][0] for at in s) in taught for at in s
    }
    kept: list[tuple[str, int]] = []
    for at, item in enumerate(tokens):
        if at in gone or (item[0] == ";" and kept and kept[-1][0] in STRUCTURE):
            continue
        kept.append(item)
    return kept


def course_code() -> list[str]:
    """The code the course shows every student: each lesson's reference solution (a correct
    answer is often one of few ways to write it: its unavoidable lines) and every Python example
    of the chapters (where the idioms are taught). Two honest solutions share these statements
    because both students read them, not because one copied the other."""
    code = [path.read_text("utf-8") for path in sorted((ROOT / "solutions").glob("*.py"))]
    for page in sorted((ROOT / "course" / "chapters").glob("*.md")):
        code += CODE_BLOCK.findall(page.read_text("utf-8"))
    return code


def _grams(tokens: list[tuple[str, int]]) -> dict[tuple[str, ...], tuple[int, int]]:
    grams: dict[tuple[str, ...], tuple[int, int]] = {}
    for at in range(len(tokens) - K + 1):
        run = tokens[at : at + K]
        grams.setdefault(tuple(t for t, _ in run), (run[0][1], run[-1][1]))
    return grams


def rank(sources: dict[str, str], stub: str = "", taught: Iterable[str] = ()) -> list[Pair]:
    """Every pair of submissions (student -> source), most similar first; what they share with
    the stub and ``taught`` (code every student has read: :func:`course_code`) counts for no
    pair (see :func:`fingerprints`)."""
    known = Taught.of([stub, *taught], public_names(stub))
    prints = {s: fingerprints(source, stub, known) for s, source in sources.items()}
    shared_by = Counter(gram for found in prints.values() for gram in found.lines)
    pairs = []
    for first, second in combinations(sorted(prints), 2):
        a, b = prints[first], prints[second]
        both = a.lines.keys() & b.lines.keys()
        weight = sum(2 / (shared_by[gram] * (shared_by[gram] - 1)) for gram in both)
        either = max(len(a.lines.keys() | b.lines.keys()), MIN_FINGERPRINTS)
        lines = {
            student: sorted(
                {n for gram in both for n in range(found.lines[gram][0], found.lines[gram][1] + 1)}
            )
            for student, found in ((first, a), (second, b))
        }
        pairs.append(Pair(first, second, weight / either, lines))
    return sorted(pairs, key=lambda p: (-p.share, p.first, p.second))


def compare(course: Course, lesson: str, to: Path | None = None) -> tuple[Path, list[Pair]]:
    """Write ``reports/similarity-LESSON.html``; returns it and the pairs, most similar first."""
    module = f"{load_manifest().lesson(lesson).module}.py"
    stub = course.source / lesson / PACKAGE / module
    students = [
        s
        for s in course.students(lesson)
        if STUDENT_ID.match(s) and (course.submitted / s / lesson / PACKAGE / module).is_file()
    ]
    if len(students) < 2:
        raise SetupError(f"fewer than two submissions of {lesson}: nothing to compare")
    sources = {
        s: (course.submitted / s / lesson / PACKAGE / module).read_text(errors="replace")
        for s in students
    }
    pairs = rank(sources, stub.read_text() if stub.is_file() else "", course_code())
    path = Path(to or course.root / "reports") / f"similarity-{lesson}.html"
    atomic_write_bytes(path, render_html(lesson, sources, pairs).encode("utf-8"))
    return path, pairs


def render_html(lesson: str, sources: dict[str, str], pairs: list[Pair]) -> str:
    """The page, from ``templates/similarity.html``: the pairs, most similar first (the flagged
    ones and at least ten), then each flagged pair side by side, its shared lines marked."""
    from .rendering import render

    flagged = [p for p in pairs if p.share >= DISPLAY_AT]
    return render(
        "similarity.html",
        lesson=lesson,
        submissions=len(sources),
        pairs=pairs,
        listed=pairs[: max(len(flagged), 10)],
        flagged=[
            {
                "first": pair.first,
                "second": pair.second,
                "share": pair.share,
                "sides": [
                    (student, _marked(sources[student], pair.lines.get(student, [])))
                    for student in (pair.first, pair.second)
                ],
            }
            for pair in flagged
        ],
        display_at=DISPLAY_AT,
    )


def _marked(source: str, shared: list[int]) -> list[tuple[str, bool]]:
    """Each line of a submission, with whether the pair shares it."""
    marked = set(shared)
    return [(line, n in marked) for n, line in enumerate(source.splitlines(), start=1)]
