"""The instructors' HTML reports rendered from templates (``instructor/templates/``).

Jinja2 with autoescape on for every template: a student's name, a line of their code, a hint or
an exception's message is text wherever it lands in a page, so nothing a submission holds can
add markup to a report the course staff opens. ``StrictUndefined`` makes a name a template uses
but the caller did not pass an error, never an empty cell.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATES = "templates"  # the folder beside this module, shipped as package data


@cache
def environment() -> Environment:
    # Imported here: only the report commands need Jinja2, not every instructor command.
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader(__package__ or "instructor", TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["number"] = number
    env.filters["percent"] = percent
    return env


def number(value: float) -> str:
    """Points as the reports print them: 5, 2.5 (never 5.0)."""
    return f"{value:g}"


def render(template: str, **context: Any) -> str:
    """The named template (``class_report.html``) rendered with these values, escaped."""
    return environment().get_template(template).render(**context)


def percent(share: float) -> str:
    """A share of 1 as a whole percentage: 0.456 -> 46%."""
    return f"{share:.0%}"
