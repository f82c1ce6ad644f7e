"""MkDocs hook: a conclusion the prose draws from a printed output is checked against it.

A page states what its examples' printed numbers must show in a comment of its source::

    <!-- claim: with AdamW the forgotten division barely changes the step
    printed: ^AdamW .* ratio (?P<adamw>[\\d.]+)$
    holds: 0.99 < adamw < 1.01
    -->

``printed:`` lines are regular expressions searched, line by line (``re.M``), in the text of
the built page, after markdown-exec has run the examples; their named groups are numbers.
``holds:`` is an expression over those names (arithmetic, comparisons, ``and``/``or``/``not``,
``abs``, ``min``, ``max``, ``log``). A pattern that matches nothing, or an expression that is
false, is a warning naming the page and the claim, so ``mkdocs build --strict`` fails: the
chapter's sentence and its example can no longer drift apart silently. The comment itself is
removed from the page.
"""

from __future__ import annotations

import ast
import html
import logging
import math
import re
from dataclasses import dataclass, field

log = logging.getLogger("mkdocs.hooks.claims")

CLAIM = re.compile(r"^[ \t]*<!--[ \t]*claim:(?P<body>.*?)-->[ \t]*\n?", re.MULTILINE | re.DOTALL)
SCRIPT = re.compile(r"<(script|style)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
TAG = re.compile(r"<[^>]+>")
FUNCTIONS = {"abs": abs, "min": min, "max": max, "log": math.log}
ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Pow,
    ast.Compare,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Eq,
    ast.NotEq,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Call,
)


class ClaimError(ValueError):
    """A claim written so that it cannot be checked."""


@dataclass
class Claim:
    statement: str
    patterns: list[re.Pattern[str]] = field(default_factory=list)
    holds: str = ""


def _check_expression(text: str, names: set[str]) -> ast.Expression:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ClaimError(f"'holds: {text}' is not an expression ({error.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, ALLOWED):
            raise ClaimError(
                f"'holds: {text}' uses {type(node).__name__}; write arithmetic and "
                "comparisons of the printed names only"
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        ):
            raise ClaimError(f"'holds: {text}' calls a function other than {sorted(FUNCTIONS)}")
        if isinstance(node, ast.Name) and node.id not in names | set(FUNCTIONS):
            raise ClaimError(
                f"'holds: {text}' names '{node.id}', which no printed: pattern captures "
                f"(they capture {sorted(names)})"
            )
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise ClaimError(f"'holds: {text}' has a constant that is not a number")
    return tree


def parse_claim(body: str) -> Claim:
    """One claim comment's body (what follows ``claim:``) -> its statement, patterns, test."""
    lines = [line.strip() for line in body.splitlines()] or [""]
    claim = Claim(statement=lines[0])  # the rest of the "claim:" line
    if not claim.statement:
        raise ClaimError("a claim needs its statement after 'claim:'")
    for line in lines[1:]:
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "printed" and value:
            try:
                claim.patterns.append(re.compile(value, re.MULTILINE))
            except re.error as error:
                raise ClaimError(
                    f"'printed: {value}' is not a regular expression ({error})"
                ) from None
        elif key == "holds" and value and not claim.holds:
            claim.holds = value
        elif line:
            raise ClaimError(
                f"claim '{claim.statement}': the line '{line}' is neither 'printed: REGEX' "
                "nor one 'holds: EXPRESSION'"
            )
    if not claim.patterns or not claim.holds:
        raise ClaimError(
            f"claim '{claim.statement}' needs at least one 'printed:' line and one 'holds:' line"
        )
    names = {name for pattern in claim.patterns for name in pattern.groupindex}
    _check_expression(claim.holds, names)
    return claim


def page_text(content: str) -> str:
    """What a reader sees of a built page: no tags, no scripts, entities decoded."""
    return html.unescape(TAG.sub("", SCRIPT.sub("", content)))


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def verdict(claim: Claim, text: str) -> str | None:
    """None when the claim holds in ``text``, else why not (one line)."""
    values: dict[str, float] = {}
    for pattern in claim.patterns:
        found = pattern.search(text)
        if found is None:
            return f"no printed line matches '{pattern.pattern}'"
        for name, value in found.groupdict().items():
            try:
                values[name] = _number(value)
            except (TypeError, ValueError):
                return f"'{name}' captured {value!r}, which is not a number"
    tree = _check_expression(claim.holds, set(values))
    if eval(compile(tree, "<claim>", "eval"), {"__builtins__": {}, **FUNCTIONS}, values):
        return None
    shown = ", ".join(f"{name} = {value:g}" for name, value in values.items())
    return f"'{claim.holds}' is false for the printed {shown}"


# --------------------------------------------------------------------------- MkDocs events

CLAIMS: dict[str, list[Claim]] = {}


def on_config(config, **kwargs):
    CLAIMS.clear()
    return config


def on_page_markdown(markdown: str, page, config, files, **kwargs):
    src = page.file.src_uri
    claims = []
    for m in CLAIM.finditer(markdown):
        try:
            claims.append(parse_claim(m.group("body")))
        except ClaimError as error:
            log.warning(f"claims hook: {src}: {error}")
    CLAIMS[src] = claims
    return CLAIM.sub("", markdown)


def on_page_content(content: str, page, config, files, **kwargs):
    src = page.file.src_uri
    text = page_text(content)
    for claim in CLAIMS.get(src, []):
        why = verdict(claim, text)
        if why is not None:
            log.warning(
                f"claims hook: {src} claims '{claim.statement}', but {why}; change the "
                "sentence or the example so that they agree"
            )
    return content
