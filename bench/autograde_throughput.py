"""Autograde throughput: submissions per minute with 1 and with 2 parallel workers.

    python bench/autograde_throughput.py                        # embeddings, 6 submissions
    python bench/autograde_throughput.py --lesson tokens --submissions 8 --workers 1 2 4
    python bench/autograde_throughput.py --no-sandbox           # the sandbox's cost

Releases the lesson into a temporary nbgrader course, submits N copies of the reference
solution (N students), and times ``autograde`` on a fresh copy of that course for each worker
count: grading every submission with the harness (public and hidden checks, sandboxed) and
recording it with nbgrader's autograde into the gradebook; feedback and export are not timed.
Prints a table and writes build/bench/autograde_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="embeddings")
    parser.add_argument("--submissions", type=int, default=6)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    from graders.instructor.autograde import autograde
    from graders.instructor.course import Course
    from graders.instructor.release import release

    rows = []
    with tempfile.TemporaryDirectory(prefix="autograde-bench-") as tmp:
        base = Course.at(Path(tmp) / "base")
        started = time.perf_counter()
        release(base, [args.lesson])
        release_seconds = time.perf_counter() - started
        lesson_folder = base.release / args.lesson
        module = next(
            p for p in (lesson_folder / "exercises").glob("*.py") if p.stem == _module(args.lesson)
        )
        for i in range(args.submissions):
            dest = base.submitted / f"student{i:02d}" / args.lesson
            shutil.copytree(lesson_folder, dest)
            shutil.copyfile(ROOT / "solutions" / module.name, dest / "exercises" / module.name)
        for workers in args.workers:
            course = Course.at(Path(tmp) / f"run-{workers}")
            shutil.copytree(base.root, course.root)
            (course.root / "nbgrader_config.py").unlink()  # points at base; not needed here
            started = time.perf_counter()
            outcomes = autograde(
                course, [args.lesson], workers=workers, sandbox=args.sandbox, progress=False
            )
            seconds = time.perf_counter() - started
            recorded = [o for o in outcomes if o.recorded and o.graded]
            full = sum(o.points == o.max_points for o in recorded)
            grading = sum(o.seconds for o in outcomes)
            rows.append(
                {
                    "workers": workers,
                    "submissions": len(outcomes),
                    "recorded": len(recorded),
                    "full_marks": full,
                    "wall_seconds": round(seconds, 1),
                    "submissions_per_minute": round(60 * len(recorded) / seconds, 2),
                    "mean_grading_seconds": round(grading / max(1, len(outcomes)), 1),
                }
            )
            print(
                f"{workers} worker(s): {len(recorded)} submissions in {seconds:.1f} s = "
                f"{rows[-1]['submissions_per_minute']:.2f} per minute "
                f"(grading {rows[-1]['mean_grading_seconds']:.1f} s each; "
                f"{full} at full marks)",
                flush=True,
            )
    result = {
        "lesson": args.lesson,
        "sandbox": args.sandbox,
        "release_seconds": round(release_seconds, 1),
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "autograde_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'workers':>7}  {'subs/min':>8}  {'wall s':>6}  {'grading s/sub':>13}")
    for row in rows:
        print(
            f"{row['workers']:>7}  {row['submissions_per_minute']:>8.2f}  "
            f"{row['wall_seconds']:>6.1f}  {row['mean_grading_seconds']:>13.1f}"
        )
    return 0 if all(r["recorded"] == r["submissions"] for r in rows) else 1


def _module(lesson: str) -> str:
    from graders.manifest import load_manifest

    return load_manifest().lesson(lesson).module


if __name__ == "__main__":
    sys.exit(main())
