"""Wrong implementations lose points with the hint that names their mistake, from the public
checks; correct ones written differently keep every point; every mistake the manifest diagnoses
is made by a variant. Variants: tests/graders/variants/."""

from __future__ import annotations

from pathlib import Path

import pytest
from variants import (
    RIGHT,
    WRONG,
    Variant,
    assert_hints_name_the_mistake,
    build_target,
    mistake_hint,
    rounds,
)

import graders
from core.manifest import load_manifest

pytestmark = pytest.mark.slow
MANIFEST = load_manifest()
LESSON_OF_MODULE = {lesson.module: lesson.slug for lesson in MANIFEST.lessons}


class Rounds:
    """Grades each round of variants once, on first use: wrong ones with the public checks
    only (the student must be able to find every mistake before the hidden checks), right ones
    with both."""

    def __init__(self, variants: list[Variant], directory: Path, hidden: bool) -> None:
        self.groups = rounds(variants)
        self.hidden = hidden
        self.directory = directory
        self.reports: dict[int, dict] = {}

    def report_for(self, variant: Variant) -> dict:
        index = next(i for i, group in enumerate(self.groups) if variant in group)
        if index not in self.reports:
            group = self.groups[index]
            where = self.directory / f"round-{index}"
            where.mkdir()
            target = build_target(where, group)
            self.reports[index] = graders.grade(
                target,
                lessons=sorted({LESSON_OF_MODULE[v.module] for v in group}),
                hidden=self.hidden,
                json_path=where / "report.json",
                functions=sorted({v.function for v in group}),
                reveal_hidden=True,
            )
        return self.reports[index]


def checks_of(report: dict, variant: Variant) -> list[dict]:
    slug = LESSON_OF_MODULE[variant.module]
    lesson = next(entry for entry in report["lessons"] if entry["slug"] == slug)
    return [check for check in lesson["checks"] if check["function"] == variant.function]


def selected(request: pytest.FixtureRequest, variants: list[Variant]) -> list[Variant]:
    """The variants this run's selected tests ask about (all, or those that ``-k`` kept): a
    round holds several lessons, and grading one lesson's variants grades no other."""
    chosen = {
        id(item.callspec.params["variant"])
        for item in request.session.items
        if hasattr(item, "callspec") and "variant" in item.callspec.params
    }
    return [v for v in variants if id(v) in chosen]


@pytest.fixture(scope="module")
def wrong_rounds(request, tmp_path_factory) -> Rounds:
    return Rounds(selected(request, WRONG), tmp_path_factory.mktemp("wrong"), hidden=False)


@pytest.fixture(scope="module")
def right_rounds(request, tmp_path_factory) -> Rounds:
    return Rounds(selected(request, RIGHT), tmp_path_factory.mktemp("right"), hidden=True)


@pytest.mark.parametrize("variant", WRONG, ids=[v.id for v in WRONG])
def test_wrong_implementation_is_rejected_with_its_hint(wrong_rounds, variant):
    checks = checks_of(wrong_rounds.report_for(variant), variant)
    failed = [c for c in checks if not c["passed"]]
    assert failed, f"{variant.id} passed every check of {variant.function}"
    assert_hints_name_the_mistake(variant, failed, MANIFEST)


@pytest.mark.parametrize("variant", RIGHT, ids=[v.id for v in RIGHT])
def test_correct_implementation_written_differently_keeps_every_point(right_rounds, variant):
    checks = checks_of(right_rounds.report_for(variant), variant)
    failed = [f"{c['id']}: {c['hint']} [{c['detail']}]" for c in checks if not c["passed"]]
    assert checks and not failed, f"{variant.id} lost points: " + "; ".join(failed)


def test_every_exercise_function_has_two_wrong_variants():
    functions = {(lesson.module, f) for lesson in MANIFEST.lessons for f in lesson.functions}
    counts = {key: 0 for key in functions}
    for variant in WRONG:
        counts[(variant.module, variant.function)] += 1
    thin = sorted(f"{m}.{f}" for (m, f), n in counts.items() if n < 2)
    assert not thin, f"fewer than two wrong implementations for {thin}"
    assert len(functions) >= 20


def test_every_wrong_variant_declares_a_mistake_of_its_function():
    for variant in WRONG:
        mistake_hint(variant, MANIFEST)  # fails naming the variant and the unknown key


def test_every_diagnosed_mistake_is_made_by_a_variant():
    """A diagnosis that no variant makes is never tested to fire (the rejection test above
    checks that each variant's own diagnosis does)."""
    made = {(v.module, v.function, v.mistake) for v in WRONG}
    never = [
        f"{lesson.module}.{check.function}: {key}"
        for lesson in MANIFEST.lessons
        for check in lesson.checks
        for key in check.mistakes
        if (lesson.module, check.function, key) not in made
    ]
    assert not never, "diagnoses no wrong variant makes: " + ", ".join(sorted(set(never)))
