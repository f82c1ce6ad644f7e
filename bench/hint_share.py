"""Hint share: for each lesson, the share of planted wrong implementations whose first failed
public check names their mistake, and the share whose every failed check is listed under it.

    python bench/hint_share.py                     # every wrong variant of tests/graders/variants
    python bench/hint_share.py --lessons block objective
    python bench/hint_share.py --variants my_mutants.py   # a file of your own WRONG variants

Each variant is graded with the public checks only, in the rounds the variant tests use
(tests/graders/variants/base.py: ``rounds``). A variant "names its mistake" when its first
failed public check shows the hint of the mistake it declares; it is "one message" when every
other failed check of its function is listed under that one (the report's ``explained_by``)
or shows the same hint. Prints one line per lesson and, with ``--verbose``, every variant
that misses. A file given with ``--variants`` defines ``WRONG``, a list of
``tests.graders.variants.Variant``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.manifest import Manifest, load_manifest  # noqa: E402
from tests.graders.variants import WRONG, Variant, build_target, mistake_hint, rounds  # noqa: E402


def load_variants(path: Path) -> list[Variant]:
    spec = importlib.util.spec_from_file_location("planted_variants", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.WRONG)


def verdict(variant: Variant, report: dict, manifest: Manifest) -> tuple[bool, bool, str]:
    """(names its mistake, one message, what was shown) for one graded variant."""
    slug = manifest.lesson(variant.module).slug
    lesson = next(entry for entry in report["lessons"] if entry["slug"] == slug)
    failed = [c for c in lesson["checks"] if c["function"] == variant.function and not c["passed"]]
    shown = "; ".join(f"{c['id']}: {c['hint']}" for c in failed) or "passed every check"
    if not failed:
        return False, False, shown
    expected = mistake_hint(variant, manifest)
    first = failed[0]
    named = first["hint"] == expected
    one = named and all(
        c["hint"] == expected or c["explained_by"] == first["id"] for c in failed[1:]
    )
    return named, one, shown


def measure(variants: Sequence[Variant], manifest: Manifest, verbose: bool) -> dict[str, list]:
    """Lesson slug -> [(variant, named, one, shown)], grading the variants round by round."""
    results: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as directory:
        for index, group in enumerate(rounds(list(variants))):
            where = Path(directory) / f"round-{index}"
            where.mkdir()
            from graders import grade

            report = grade(
                build_target(where, group),
                lessons=sorted({manifest.lesson(v.module).slug for v in group}),
                json_path=where / "report.json",
                functions=sorted({v.function for v in group}),
            )
            for variant in group:
                named, one, shown = verdict(variant, report, manifest)
                slug = manifest.lesson(variant.module).slug
                results.setdefault(slug, []).append((variant, named, one, shown))
                if verbose and not one:
                    print(f"  {variant.id} [{variant.mistake}]: {shown}", flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", nargs="*", help="lesson slugs (default: all)")
    parser.add_argument("--variants", type=Path, help="a file defining WRONG (default: ours)")
    parser.add_argument("--verbose", action="store_true", help="print every variant that misses")
    args = parser.parse_args(argv)
    manifest = load_manifest()
    variants = load_variants(args.variants) if args.variants else WRONG
    if args.lessons:
        modules = {manifest.lesson(name).module for name in args.lessons}
        variants = [v for v in variants if v.module in modules]
    results = measure(variants, manifest, args.verbose)
    print(f"{'lesson':<12} {'variants':>8} {'first hint names it':>20} {'one message':>12}")
    for lesson in manifest.lessons:
        rows = results.get(lesson.slug)
        if not rows:
            continue
        named = sum(r[1] for r in rows)
        one = sum(r[2] for r in rows)
        print(
            f"{lesson.slug:<12} {len(rows):>8} {named / len(rows):>19.0%} {one / len(rows):>11.0%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
