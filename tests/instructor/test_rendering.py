"""The reports' templates: shipped beside the module, every value escaped, a missing value an
error rather than an empty cell."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_template_is_package_data_and_jinja2_is_declared_by_the_grading_extra():
    from instructor.rendering import TEMPLATES

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = project["tool"]["setuptools"]["package-data"]["instructor"]
    templates = sorted((ROOT / "instructor" / TEMPLATES).glob("*"))
    assert {"class_report.html", "similarity.html"} <= {p.name for p in templates}
    assert all(any(p.match(pattern) for pattern in shipped) for p in templates), shipped
    grading = project["project"]["optional-dependencies"]["grading"]
    jinja = [r for r in grading if r.lower().startswith("jinja2")]
    assert jinja and "<" in jinja[0] and ">=" in jinja[0], grading  # a range, not bare


def test_a_value_is_escaped_and_a_missing_one_is_an_error(tmp_path, monkeypatch):
    from jinja2 import UndefinedError

    from instructor import rendering

    environment = rendering.environment()
    page = environment.from_string("<p title='{{ who }}'>{{ who }}: {{ 2.0 | number }}</p>")
    shown = page.render(who="<script>alert('x')</script> & \"co\"")
    assert "<script>" not in shown and "'x'" not in shown
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;co&#34;: 2" in shown
    with pytest.raises(UndefinedError):
        environment.from_string("{{ nobody }}").render()
    assert rendering.percent(0.456) == "46%" and rendering.number(2.5) == "2.5"
