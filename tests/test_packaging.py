"""What pyproject.toml, constraints.txt and LICENSE promise: commands, pins, a licence, and a
non-editable install refused in one line."""

from __future__ import annotations

import importlib
import importlib.util
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The packages whose output the site's hooks and JavaScript read: pinned exactly.
DOCS_STACK = {
    "mkdocs",
    "mkdocs-material",
    "markdown-exec",
    "mkdocs-quiz",
    "latex2mathml",
    "markdown",
}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", line
            pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _ranges() -> dict[str, Requirement]:
    project = PROJECT["project"]
    every = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in every}


def test_the_docs_stack_and_torch_are_pinned_within_the_projects_ranges() -> None:
    pins, ranges = _pins(), _ranges()
    assert DOCS_STACK | {"torch"} <= set(pins), DOCS_STACK - set(pins)
    for name, version in pins.items():
        if name in ranges:
            assert ranges[name].specifier.contains(version), (name, version, ranges[name])
    markdown = ranges["markdown"].specifier
    assert markdown.contains("3.7") and not markdown.contains("3.6"), markdown


def test_the_licence_is_the_one_pyproject_names() -> None:
    assert PROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert PROJECT["project"]["license-files"] == ["LICENSE"]


@pytest.mark.parametrize("command", sorted(PROJECT["project"]["scripts"]))
def test_every_console_command_names_a_main_function(command: str) -> None:
    module, _, function = PROJECT["project"]["scripts"][command].partition(":")
    assert callable(getattr(importlib.import_module(module), function)), command


def _backend():
    system = PROJECT["build-system"]
    (folder,) = system["backend-path"]
    path = ROOT / folder / f"{system['build-backend']}.py"
    spec = importlib.util.spec_from_file_location("course_build_backend", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_wheel_is_refused_in_one_line_and_an_editable_install_is_not() -> None:
    backend = _backend()
    for hook in ("get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"):
        with pytest.raises(SystemExit) as refused:
            getattr(backend, hook)()
        message = str(refused.value.code)
        assert "\n" not in message and "pip install -e ." in message, message
    with pytest.raises(SystemExit):
        backend.build_wheel("dist")
    from setuptools import build_meta

    assert backend.build_editable is build_meta.build_editable
    assert backend.get_requires_for_build_editable is build_meta.get_requires_for_build_editable
