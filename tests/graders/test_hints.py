"""No hint gives the answer away: every hint of course/lessons.toml (defaults and mistake
tables) and every message the graders can show a student is searched for expressions copied
from the reference bodies (between the solution markers of solutions/*.py)."""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from pathlib import Path

import pytest

from core.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
MIN_CHARS = 8  # a copied span this long (spaces removed) is an expression, not a name
# A span counts only when it holds one of these: a call, an index, arithmetic or a comparison.
# Dotted names alone (torch.multinomial, model.eval) are the course's vocabulary, not answers.
CODE_OPERATORS = set("[]=+-*/<>%@~:")
# Where the graders keep the text they show: hints, details and the harness' messages.
GRADER_FILES = sorted(
    [
        *(ROOT / "graders" / "public").glob("test_*.py"),
        *(ROOT / "graders" / "hidden").glob("test_*.py"),
        ROOT / "graders" / "hints.py",
        ROOT / "graders" / "checking.py",
        ROOT / "graders" / "report.py",
        ROOT / "graders" / "terminal.py",
    ]
)
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?(?:e-?\d+)?|\.\.\.|\*\*|//|[<>=!]=|\S")
OPERAND = re.compile(r"[A-Za-z_]\w*|\d")


def solution_bodies() -> list[str]:
    """The code between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` in solutions/*.py."""
    bodies = []
    for path in sorted((ROOT / "solutions").glob("*.py")):
        inside, lines = False, []
        for line in path.read_text().splitlines():
            if line.strip() == "# BEGIN SOLUTION":
                inside, lines = True, []
            elif line.strip() == "# END SOLUTION":
                inside = False
                bodies.append("\n".join(lines))
            elif inside:
                lines.append(line)
    return bodies


def code_tokens(source: str) -> list[str]:
    """Python's tokens of a body (comments and layout dropped)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    text = "\n".join(line.strip() for line in source.splitlines())  # bodies are indented
    tokens = tokenize.generate_tokens(io.StringIO(text + "\n").readline)
    return [t.string for t in tokens if t.type not in skip and t.string]


def is_code(span: list[str]) -> bool:
    """Two operands (names or numbers) joined by an operator or a whole call, at least
    MIN_CHARS long, and no bracket closed that the span did not open (no fragments)."""
    joined = "".join(span)
    if len(joined) < MIN_CHARS:
        return False
    depth = 0
    for token in span:
        depth += token.strip() in "([{"
        depth -= token in ")]}"
        if depth < 0:
            return False
    operands = sum(1 for t in span if OPERAND.match(t) and not keyword.iskeyword(t))
    has_operator = any(ch in CODE_OPERATORS for t in span for ch in t) or (
        "(" in joined and ")" in joined
    )
    return operands >= 2 and has_operator


def text_tokens(text: str) -> list[str]:
    """The tokens of prose, spaced as formatted code would be: a space before ``(`` or ``[``
    stays (``logits [6, 10]`` names a shape; ``logits[6]`` indexes), every other goes."""
    tokens: list[str] = []
    for match in TOKEN.finditer(text):
        token = match.group()
        spaced = match.start() > 0 and text[match.start() - 1].isspace()
        if (
            spaced
            and token in "(["
            and tokens
            and (OPERAND.match(tokens[-1]) or tokens[-1] in ")]")
            and not keyword.iskeyword(tokens[-1])
        ):
            token = " " + token
        tokens.append(token)
    return tokens


def copied_spans(text: str, solution: set[str], longest: int) -> list[str]:
    """Spans of ``text`` (as tokens, spaces removed) that are code spans of a solution body."""
    tokens = text_tokens(text)
    found = []
    for i in range(len(tokens)):
        for j in range(i + 2, min(len(tokens), i + longest) + 1):
            span = tokens[i:j]
            if is_code(span) and "".join(span) in solution:
                found.append("".join(span))
    # Report the longest spans only (each shorter one inside them is the same leak).
    return [s for s in found if not any(s != t and s in t for t in found)]


@pytest.fixture(scope="module")
def solution_spans() -> tuple[set[str], int]:
    spans: set[str] = set()
    longest = 0
    for body in solution_bodies():
        tokens = code_tokens(body)
        longest = max(longest, len(tokens))
        for i in range(len(tokens)):
            for j in range(i + 2, min(len(tokens), i + 40) + 1):
                if is_code(tokens[i:j]):
                    spans.add("".join(tokens[i:j]))
    assert len(spans) > 500, "no solution bodies found (markers renamed?)"
    return spans, 40


def manifest_hints() -> list[tuple[str, str]]:
    """Every check's hint and mistake hints, and every "by hand" rule's message."""
    hints = []
    manifest = load_manifest()
    for check in manifest.checks:
        hints.append((f"{check.id}: hint", check.hint))
        for key, text in check.mistakes.items():
            hints.append((f"{check.id}: mistake {key}", text))
    for lesson in manifest.lessons:
        for rule in getattr(lesson, "rules", ()):
            hints.append((f"{lesson.slug}: rule for {rule.function}", rule.message))
    return hints


def grader_strings() -> list[tuple[str, str]]:
    """Every string literal (f-string parts too) in the graders' student-facing files."""
    found = []
    for path in GRADER_FILES:
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.append((where, node.value))
    return found


def test_the_search_finds_copied_code(solution_spans):
    spans, longest = solution_spans
    assert copied_spans("read the rows: table[ids] has shape [*S, C]", spans, longest)
    assert copied_spans("convert with .to(table.dtype) first", spans, longest)
    assert copied_spans("perplexity = math.exp(float(loss))", spans, longest)
    assert copied_spans("inputs ids[..., :-1]", spans, longest)
    assert not copied_spans("pass ignore_index on; use torch.multinomial", spans, longest)
    assert not copied_spans("average over the targets that are not ignored", spans, longest)


@pytest.mark.parametrize("where, text", manifest_hints(), ids=lambda v: str(v)[:60])
def test_no_manifest_hint_copies_the_solution(solution_spans, where, text):
    spans, longest = solution_spans
    leaks = copied_spans(text, spans, longest)
    assert not leaks, f"{where} gives away the solution's code {leaks}: {text!r}"


def test_no_grader_message_copies_the_solution(solution_spans):
    spans, longest = solution_spans
    leaks = [
        f"{where}: {copied_spans(text, spans, longest)} in {text!r}"
        for where, text in grader_strings()
        if copied_spans(text, spans, longest)
    ]
    assert not leaks, "grader messages give away the solution's code:\n" + "\n".join(leaks)


def test_every_mistake_a_grader_names_has_a_hint():
    """``fail(detail, "key")`` names a mistake of the lesson's manifest (else the student would
    see the check's default hint and a grader problem instead)."""
    manifest = load_manifest()
    unknown = []
    for path in GRADER_FILES:
        if not path.name.startswith("test_"):
            continue
        lesson = manifest.lesson(path.stem.removeprefix("test_"))
        known = {key for check in lesson.checks for key in check.mistakes}
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "fail"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value not in known
            ):
                unknown.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.args[1].value}")
    assert not unknown, "mistakes without a hint in course/lessons.toml: " + ", ".join(unknown)


# A check's own hint is shown when the check does not recognise the mistake, so it says what
# behaviour the check expects; advice ("use ...", "pass ... on") is for recognised mistakes.
IMPERATIVES = {
    "use",
    "pass",
    "call",
    "add",
    "divide",
    "return",
    "set",
    "convert",
    "compare",
    "keep",
    "drop",
    "leave",
    "raise",
    "merge",
    "split",
    "slice",
    "look",
    "build",
    "start",
    "crop",
    "transpose",
    "accept",
    "clip",
    "accumulate",
    "sample",
    "read",
    "rank",
    "fill",
    "count",
}


def test_a_check_own_hint_describes_behaviour_not_a_fix():
    advice = [
        f"{check.id}: {check.hint!r}"
        for check in load_manifest().checks
        if check.hint.split()[0].lower() in IMPERATIVES
    ]
    assert not advice, "default hints that give advice instead of the expected behaviour: " + (
        "; ".join(advice)
    )


# A hint names the one clause of the contract that broke, and the report adds the link: no hint
# restates a whole contract. Hidden checks' own hints may sum their contract up (they vary every
# input), but the mistakes they name are one clause too.
HINT_LIMIT = 120


def test_every_hint_is_one_clause():
    long = [
        f"{check.id}: {key}: {text!r}"
        for check in load_manifest().checks
        for key, text in ([] if check.hidden else [("hint", check.hint)])
        + list(check.mistakes.items())
        if ";" in text or len(text) > HINT_LIMIT
    ]
    assert not long, f"hints of more than one clause (a ';' or over {HINT_LIMIT} characters): " + (
        "; ".join(long)
    )


# -- links: every check and every recognised mistake links to the section that teaches its rule

HEADING = re.compile(r"^(#{1,6})\s.*\{#([a-z0-9-]+)\}")


def section_text(page: str, section: str) -> str | None:
    """The text of the section ``{#section}`` of ``page`` (under course/), its subsections
    included, or None when the page has no such heading."""
    lines = (ROOT / "course" / page).read_text(encoding="utf-8").splitlines()
    found: list[str] | None = None
    level = 0
    for line in lines:
        heading = HEADING.match(line)
        if heading and found is not None and len(heading.group(1)) <= level:
            break
        if heading and heading.group(2) == section:
            found, level = [], len(heading.group(1))
        if found is not None:
            found.append(line)
    return None if found is None else "\n".join(found)


def linked_sections() -> list[tuple[str, str, str, str]]:
    """(what links, page, section, function) for every check and every mistake of one."""
    links = []
    manifest = load_manifest()
    for lesson in manifest.lessons:
        for check in lesson.checks:
            links.append((check.id, check.page, check.section, check.function))
            for key in check.mistakes:
                section = lesson.mistake_section(check, key)
                links.append((f"{check.id}: {key}", check.page, section, check.function))
    return links


@pytest.mark.parametrize("where, page, section, function", linked_sections(), ids=str)
def test_every_link_goes_to_a_section_about_its_function(where, page, section, function):
    text = section_text(page, section)
    assert text is not None, f"{where} links to {page}#{section}, which has no such heading"
    assert function in text, f"{where} links to {page}#{section}, which never names {function}"


# Rules taught in a section of their own, away from their function's exercise section: the
# section, and a word of the rule that it uses.
TAUGHT_AT = {
    ("ce-ignore-index", "mean-over-all"): ("ignore-index-and-padding", "not ignored"),
    ("ce-all-ignored", "zero-when-all-ignored"): ("ignore-index-and-padding", "NaN"),
    ("ce-large-logits", "overflow"): ("overflow", "infinity"),
    ("ce-matches-torch", "no-max-back"): ("overflow", "maximum"),
    ("attention-causal-mask", "mask-inverted"): ("causal-mask", "True"),
    ("nearest-cosine", "includes-self"): ("nearest-rows", "its own neighbour list"),
    ("nearest-pairs", "tensors"): ("nearest-rows", "Python numbers"),
}


@pytest.mark.parametrize("check_id, key", sorted(TAUGHT_AT), ids=str)
def test_a_mistake_links_where_its_rule_is_taught(check_id, key):
    manifest = load_manifest()
    check = manifest.check(check_id)
    section = manifest.lesson(check.lesson).mistake_section(check, key)
    expected, words = TAUGHT_AT[(check_id, key)]
    assert section == expected, f"{check_id}: {key} links to {section}, not to {expected}"
    assert words in (section_text(check.page, section) or "")
