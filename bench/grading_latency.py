"""Grading latency: wall time of `python -m graders --target solutions` (the full public suite).

    python bench/grading_latency.py               # 3 runs, public checks
    python bench/grading_latency.py --runs 5 --hidden
    python bench/grading_latency.py --target exercises   # the stubs: every check fails

Each run is a fresh process, exactly what a student's `nox -s grade` starts once its
virtualenv exists (the interpreter here is the reused virtualenv). Prints every run's wall
seconds, the best and the median, the machine's load, and whether each run scored full marks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(hidden: bool, report: Path, target: str) -> tuple[float, dict]:
    command = [sys.executable, "-m", "graders", "--target", target, "--json", str(report)]
    if hidden:
        command.append("--hidden")
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"grading failed ({result.returncode}):\n{result.stderr}")
    return seconds, json.loads(report.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hidden", action="store_true", help="the hidden checks too")
    parser.add_argument("--target", default="solutions", help="the package graded")
    args = parser.parse_args(argv)
    suite = "public and hidden" if args.hidden else "public"
    print(
        f"python -m graders --target {args.target} ({suite} checks), {args.runs} runs, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            seconds, report = run_once(args.hidden, Path(tmp) / "report.json", args.target)
            times.append(seconds)
            full = report["points"] == report["max_points"]
            checks = sum(len(lesson["checks"]) for lesson in report["lessons"])
            print(
                f"  run {i + 1}: {seconds:6.2f} s  {report['points']}/{report['max_points']} "
                f"points, {checks} checks{'' if full else '  (NOT full marks)'}"
            )
    print(
        f"best {min(times):.2f} s, median {statistics.median(times):.2f} s "
        f"(load now {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
