"""The examples in the lesson docstrings (which students read in their stubs) are true."""

from __future__ import annotations

import doctest
import importlib
import math

import pytest
import torch

from gpt.lessons import modules

# generation's functions need a model, so its docstrings carry no runnable example.
LESSON_MODULES = [name for name in modules() if name != "generation"]


@pytest.mark.parametrize("name", LESSON_MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"solutions.{name}")
    result = doctest.testmod(
        module,
        optionflags=doctest.NORMALIZE_WHITESPACE,
        extraglobs={"torch": torch, "math": math},
    )
    assert result.attempted > 0, f"solutions/{name}.py has no docstring example"
    assert result.failed == 0
