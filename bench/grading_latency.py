"""Grading latency: wall time of `python -m graders --target solutions` (the full public suite).

    python bench/grading_latency.py               # 3 runs, public checks
    python bench/grading_latency.py --runs 5 --hidden
    python bench/grading_latency.py --target exercises   # the stubs: every check fails
    python bench/grading_latency.py --lesson windows     # one lesson, and the watch's re-grading
    python bench/grading_latency.py --lesson windows --sandbox   # the same, sandboxed
    python bench/grading_latency.py --lesson training --tree RELEASE  # a student release's graders

Each run is a fresh process, exactly what a student's `nox -s grade` starts once its
virtualenv exists (the interpreter here is the reused virtualenv). Prints every run's wall
seconds, the best and the median, the machine's load, and whether each run scored full marks.

With ``--lesson``: the seconds from starting `python -m graders LESSON` to its first check's
verdict (in the report, which is rewritten after every check; a terminal shows it on the
grading's line) and to its result (the lesson's entry finished), beside `python -c "import
torch"`'s, and their ratios;
then `--watch LESSON` on a copy of the target: after its first grading, the module file is
rewritten ``--edits`` times, each time timing save-to-result (until the report holds the
lesson graded with the new file's fingerprint), and the median is printed. ``--sandbox``
grades in the sandbox (bubblewrap) throughout. Numbers only: a busy machine makes them
larger, and nothing here asserts any.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.fingerprint import fingerprint  # noqa: E402  (the project's, from the checkout)
from graders.report import NOT_GRADED  # noqa: E402


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


def checked(report: Path, slug: str) -> bool:
    """Whether the report holds a verdict on one of ``slug``'s checks (the report is rewritten
    after every check: the progress page and the terminal's line show it then)."""
    try:
        data = json.loads(report.read_text())
        entry = next(e for e in data["lessons"] if e["slug"] == slug)
        return any(check["detail"] != NOT_GRADED for check in entry["checks"])
    except (OSError, ValueError, KeyError, StopIteration):
        return False


def finished(report: Path, slug: str, print_: str | None = None) -> bool:
    """Whether the report holds ``slug`` graded to the end (with that fingerprint, if given)."""
    try:
        data = json.loads(report.read_text())
        entry = next(e for e in data["lessons"] if e["slug"] == slug)
    except (OSError, ValueError, KeyError, StopIteration):
        return False
    return bool(entry["graded"]) and print_ in (None, entry["fingerprint"])


def wait_for(report: Path, slug: str, process: subprocess.Popen, print_: str | None = None) -> None:
    while not finished(report, slug, print_):
        if process.poll() is not None:
            raise SystemExit(f"the grading ended ({process.returncode}) before {slug}'s result")
        time.sleep(0.005)


def seconds_of(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    return time.perf_counter() - start


def one_lesson(
    lesson: str, target: str, runs: int, tmp: Path, sandbox: list[str], tree: Path = ROOT
) -> None:
    """The first result of a one-lesson grading against `python -c "import torch"`."""
    torch_times, check_times, first_times = [], [], []
    for i in range(runs):
        torch_times.append(seconds_of([sys.executable, "-c", "import torch"]))
        report = tmp / f"one-{i}.json"
        command = [
            sys.executable,
            "-m",
            "graders",
            lesson,
            "--target",
            target,
            "--json",
            str(report),
            *sandbox,
        ]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=tree, stdout=subprocess.DEVNULL)
        while not checked(report, lesson) and process.poll() is None:
            time.sleep(0.005)
        check_times.append(time.perf_counter() - start)
        wait_for(report, lesson, process)
        first = time.perf_counter() - start
        process.wait()
        first_times.append(first)
        print(
            f"  run {i + 1}: import torch {torch_times[-1]:5.2f} s, first check's verdict "
            f"{check_times[-1]:5.2f} s, {lesson}'s result {first:5.2f} s (the process "
            f"{time.perf_counter() - start:5.2f} s)"
        )
    torch_s = statistics.median(torch_times)
    check_s, first_s = statistics.median(check_times), statistics.median(first_times)
    print(
        f"median: import torch {torch_s:.2f} s, first check's verdict {check_s:.2f} s "
        f"(ratio {check_s / torch_s:.2f}), the lesson's result {first_s:.2f} s "
        f"(ratio {first_s / torch_s:.2f})"
    )


def watched(lesson: str, target: str, edits: int, tmp: Path, sandbox: list[str]) -> None:
    """Save-to-result of `--watch LESSON` for one-lesson edits after its first grading."""
    copy = tmp / "package"
    shutil.copytree(ROOT / target, copy, ignore=shutil.ignore_patterns("__pycache__"))
    report = tmp / "watch.json"
    command = [sys.executable, "-m", "graders", "--watch", lesson]
    command += ["--target", str(copy), "--json", str(report), *sandbox]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        start = time.perf_counter()
        wait_for(report, lesson, process)
        print(f"  --watch {lesson}: first grading {time.perf_counter() - start:.2f} s")
        from core.manifest import load_manifest

        module = load_manifest().lesson(lesson).module
        path = copy / f"{module}.py"
        original = path.read_text()
        times = []
        for i in range(edits):
            time.sleep(0.5)
            path.write_text(f"{original}\n# edit {i}\n")
            saved = time.perf_counter()
            wait_for(report, lesson, process, fingerprint(copy, module))
            times.append(time.perf_counter() - saved)
            print(f"  edit {i + 1}: {times[-1]:5.2f} s from save to result")
        print(
            f"save-to-result over {edits} edits: median {statistics.median(times):.2f} s, "
            f"best {min(times):.2f} s (load now {os.getloadavg()[0]:.1f})"
        )
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hidden", action="store_true", help="the hidden checks too")
    parser.add_argument("--target", default="solutions", help="the package graded")
    parser.add_argument("--lesson", help="one lesson: its first result, and --watch's re-grading")
    parser.add_argument("--edits", type=int, default=7, help="edits timed with --lesson")
    parser.add_argument("--sandbox", action="store_true", help="grade in the sandbox (--lesson)")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="with --lesson: the folder whose graders grade (a lesson's release/LESSON/ of "
        "`instructor release`, which replays recorded answers); --target stays this checkout's",
    )
    args = parser.parse_args(argv)
    if args.lesson:
        sandbox = ["--sandbox"] if args.sandbox else []
        print(
            f"python -m graders {args.lesson} --target {args.target} {' '.join(sandbox)}"
            f"{'' if args.tree == ROOT else f' (graders of {args.tree})'}, {args.runs} runs, "
            f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        )
        with tempfile.TemporaryDirectory() as tmp:
            target = str((ROOT / args.target).resolve())
            one_lesson(args.lesson, target, args.runs, Path(tmp), sandbox, args.tree.resolve())
            watched(args.lesson, args.target, args.edits, Path(tmp), sandbox)
        return 0
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
