"""The student release's answers to the proxies of earlier lessons' functions, replayed.

The block lesson's ``self_attention`` calls lesson 4's ``attention``, and its folder holds
lesson 4's module as a stub. The instructor's checker answers such a call with its trusted
code (graders/secret/dependencies.py), which never ships; so at release time, while the public
checks grade the reference, every question the worker's proxies ask of an earlier lesson's
function is recorded with its answer (graders/answers.py, ``record_dependency``), and here a
question is answered with the recorded answer of the recorded question it matches: the same
structure, equal integers, strings and flags, and close tensors (a student's own split of the
heads rounds otherwise than the reference's). A tensor too large to record (GPT-2's token
table) is recorded as its digest and must be equal bit for bit; it is a check's own input.

A question that matches nothing recorded (a mistake upstream changed what the function asks)
is answered by the submission's own function (``Unrecorded``: the worker calls it), as it
would be without a proxy. The release decides no grade, so nothing here is a bound on what a
student may ask; only the instructor's checker is (its ``Answers``).
"""

from __future__ import annotations

from typing import Any

from core.manifest import load_manifest

# The trusted code's errors that the worker raises in the caller, as the student's own would.
RAISED = ("ValueError", "TypeError", "IndexError", "KeyError")
RTOL, ATOL = 1e-4, 1e-5  # how close a tensor of a question must be to the recorded one


class Refused(Exception):
    """A question this checker will not answer; the message says why."""


class Raised(Refused):
    """The trusted implementation raised one of ``RAISED`` on the question's arguments, as the
    student's own would (``add_positions`` past the position table): the worker raises the
    same type in the caller, so that a check of that error grades the caller's handling."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Unrecorded(Refused):
    """No recorded question matches: the submission's own function answers (the worker)."""


class Replayed:
    """Answers one worker's proxies of earlier lessons' functions from the recorded answers,
    for the function graded now (the same interface as the instructor's ``Answers``)."""

    def __init__(self) -> None:
        self.manifest = load_manifest()
        self.allowed: frozenset[str] = frozenset()

    def names(self, function: str) -> list[str]:
        """The earlier lessons' functions that ``module.function`` calls, itself or through
        its own lesson's functions: the release runs its own lesson's with the submission's
        code (graders/report.py, ``uses``)."""
        return list(self.manifest.earlier_dependencies(function))

    def allow(self, function: str | None) -> None:
        self.allowed = frozenset(self.names(function)) if function else frozenset()

    def answer(self, name: Any, question: Any, deadline: float | None = None) -> Any:
        from . import answers

        if not isinstance(name, str) or name not in self.allowed:
            raise Refused(f"{name!r} is not a dependency of the function being graded")
        entry = answers.recorded_dependency(name, question, matches)
        if entry is None:
            raise Unrecorded(f"this release recorded no answer for {name} on these inputs")
        if "raised" in entry:
            kind, message = entry["raised"]
            raise Raised(str(kind), str(message))
        return entry["value"]


def matches(recorded: Any, asked: Any) -> bool:
    """Whether ``asked`` is the question ``recorded`` (see the module's docstring)."""
    import torch

    from . import answers

    if isinstance(recorded, dict) and answers.DIGESTED in recorded:
        return isinstance(asked, torch.Tensor) and answers.digested(asked) == recorded
    if isinstance(recorded, torch.Tensor):
        if not isinstance(asked, torch.Tensor) or asked.dtype != recorded.dtype:
            return False
        if asked.shape != recorded.shape:
            return False
        if not recorded.is_floating_point():
            return bool(torch.equal(asked, recorded))
        return bool(torch.allclose(asked, recorded, rtol=RTOL, atol=ATOL, equal_nan=True))
    if isinstance(recorded, list | tuple):
        return (
            isinstance(asked, list | tuple)
            and len(asked) == len(recorded)
            and all(matches(r, a) for r, a in zip(recorded, asked, strict=True))
        )
    if isinstance(recorded, dict):
        return (
            isinstance(asked, dict)
            and set(asked) == set(recorded)
            and all(matches(recorded[key], asked[key]) for key in recorded)
        )
    if isinstance(recorded, float) and isinstance(asked, float):
        return abs(asked - recorded) <= ATOL + RTOL * abs(recorded)
    return type(asked) is type(recorded) and asked == recorded
