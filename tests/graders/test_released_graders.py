"""The released graders judge like the instructor's, without any solution code.

The student release leaves out graders/secret/ (the oracles, the trusted dependencies); its public
checks replay the answers recorded at release time (graders/answers.py), and its worker grades a
function with the submission's own versions of the functions it builds on. These tests grade with
the released graders themselves (every lesson's release/SLUG/graders/, merged into one tree, run in
a process of their own): full marks on solutions/, none on exercises/, every wrong variant of
tests/graders/variants/ that a public check catches rejected with the hint that names its mistake,
and every correct variant written differently given every point.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from variants import (
    RIGHT,
    WRONG,
    Variant,
    assert_hints_name_the_mistake,
    build_target,
    rounds,
)

from core.manifest import load_manifest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest()
LESSON_OF_MODULE = {lesson.module: lesson.slug for lesson in MANIFEST.lessons}
SLUGS = [lesson.slug for lesson in MANIFEST.lessons if lesson.checks]
DRIVER = """
import json, sys
import graders
from graders import answers
assert not answers.live(), "the released graders must replay, not compute, their answers"
for job in json.load(open(sys.argv[1])):
    graders.grade(job["target"], lessons=job["lessons"], functions=job["functions"],
                  json_path=job["json"], reveal_hidden=True)
"""


@pytest.fixture(scope="module")
def released_tree(released_course, tmp_path_factory) -> Path:
    """Every lesson's released graders/ in one tree (their shared files are identical)."""
    tree = tmp_path_factory.mktemp("released-graders")
    for slug in SLUGS:
        folder = released_course / "release" / slug
        for path in sorted((folder / "graders").rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            dest = tree / path.relative_to(folder)
            if dest.exists():
                assert filecmp.cmp(path, dest, shallow=False), f"{slug} ships another {dest.name}"
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    for provided in ("core", "gpt"):
        shutil.copytree(released_course / "release" / SLUGS[0] / provided, tree / provided)
    (tree / "course").mkdir()
    shutil.copyfile(
        released_course / "release" / SLUGS[0] / "course" / "lessons.toml",
        tree / "course" / "lessons.toml",
    )
    return tree


def grade_released(tree: Path, jobs: list[dict]) -> list[dict]:
    """Grade each job ({target, lessons, functions}) with the released graders in ``tree``."""
    spec = tree.parent / f"{tree.name}-jobs.json"
    for i, job in enumerate(jobs):
        job["json"] = str(tree.parent / f"{tree.name}-report-{i}.json")
    spec.write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(spec)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(Path(job["json"]).read_text()) for job in jobs]


def test_the_release_ships_recorded_answers_and_no_oracles(released_course):
    for slug in SLUGS:
        graders = released_course / "release" / slug / "graders"
        assert (graders / "public" / f"answers_{slug}.pt").is_file(), slug
        names = {p.name for p in graders.rglob("*") if p.is_file()}
        assert "trusted.py" not in names, slug
        assert not (graders / "hidden").exists() and not (graders / "secret").exists(), slug


def test_released_graders_give_full_marks_to_solutions_and_none_to_stubs(released_reports):
    solutions, stubs = released_reports["solutions"], released_reports["stubs"]
    failed = [
        f"{c['id']}: {c['hint']} [{c['detail']}]"
        for lesson in solutions["lessons"]
        for c in lesson["checks"]
        if not c["passed"]
    ]
    assert not failed
    assert solutions["points"] == solutions["max_points"] > 0
    assert [lesson["slug"] for lesson in solutions["lessons"]] == SLUGS
    assert stubs["points"] == 0 and stubs["max_points"] == solutions["max_points"]


def _builds_on(key: str) -> set[str]:
    """The module.function names ``key`` calls, directly or not (its builds_on in the manifest)."""
    found: set[str] = set()
    todo = [key]
    while todo:
        calling = todo.pop()
        module = calling.partition(".")[0]
        for name in MANIFEST.dependencies(calling):
            qualified = name if "." in name else f"{module}.{name}"  # an earlier lesson's
            if qualified not in found:
                found.add(qualified)
                todo.append(qualified)
    return found


def _separate(a: Variant, b: Variant) -> bool:
    """Without trusted dependencies, a variant of train_step changes what fit does: variants
    of a function and of what it builds on must be graded apart."""
    ka, kb = f"{a.module}.{a.function}", f"{b.module}.{b.function}"
    return ka not in _builds_on(kb) and kb not in _builds_on(ka)


@pytest.fixture(scope="module")
def released_reports(released_tree, tmp_path_factory) -> dict:
    """The released graders' reports of solutions/, of exercises/ and of every variant's
    checks, graded in one process (each process is a cold start of the checker and its
    worker: two imports of torch)."""
    jobs = [
        {"target": str(ROOT / "solutions"), "lessons": SLUGS, "functions": None},
        {"target": str(ROOT / "exercises"), "lessons": SLUGS, "functions": None},
    ]
    groups = []
    for kind, variants in (("wrong", WRONG), ("right", RIGHT)):
        for i, group in enumerate(rounds(variants, together=_separate)):
            where = tmp_path_factory.mktemp(f"{kind}-{i}")
            target = build_target(where, group)
            jobs.append(
                {
                    "target": str(target),
                    "lessons": sorted({LESSON_OF_MODULE[v.module] for v in group}),
                    "functions": sorted({v.function for v in group}),
                }
            )
            groups.append(group)
    solutions, stubs, *reports = grade_released(released_tree, jobs)
    found: dict[str, list[dict]] = {}
    for group, report in zip(groups, reports, strict=True):
        for variant in group:
            slug = LESSON_OF_MODULE[variant.module]
            lesson = next(entry for entry in report["lessons"] if entry["slug"] == slug)
            found[variant.id] = [c for c in lesson["checks"] if c["function"] == variant.function]
    return {"solutions": solutions, "stubs": stubs, "variants": found}


@pytest.fixture(scope="module")
def variant_reports(released_reports) -> dict[str, list[dict]]:
    """Each variant's checks, as the released graders judged them."""
    return released_reports["variants"]


@pytest.mark.parametrize("variant", WRONG, ids=[v.id for v in WRONG])
def test_released_graders_reject_a_wrong_implementation_with_its_hint(variant_reports, variant):
    checks = variant_reports[variant.id]
    failed = [c for c in checks if not c["passed"]]
    assert failed, f"{variant.id} passed every public check of {variant.function}"
    assert not any("AnswerMissing" in (c["detail"] or "") for c in failed), failed
    assert_hints_name_the_mistake(variant, failed, MANIFEST)


@pytest.mark.parametrize("variant", RIGHT, ids=[v.id for v in RIGHT])
def test_released_graders_keep_every_point_of_a_correct_variant(variant_reports, variant):
    checks = variant_reports[variant.id]
    failed = [f"{c['id']}: {c['hint']} [{c['detail']}]" for c in checks if not c["passed"]]
    assert checks and not failed, f"{variant.id} lost points: " + "; ".join(failed)
