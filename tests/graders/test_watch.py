"""`python -m graders --watch`: re-grades a lesson on every save, goes on after a module that
fails to import, and stops on Ctrl-C with one line. No verdict here depends on speed: every
wait has a generous deadline and asserts what the report says, never how soon."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support import forkserver

from core.fingerprint import fingerprint
from graders.watch import changed, snapshot, version

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 600.0  # seconds: a deadline for a busy machine, not a measure of speed


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "pkg"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _wait(
    report: Path, process: forkserver.Forked | subprocess.Popen, until: Callable[[dict], bool]
) -> dict:
    """The report's windows entry once ``until`` holds for it (the watch must still run)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the watch ended ({process.returncode})"
        try:
            entry = next(
                e for e in json.loads(report.read_text())["lessons"] if e["slug"] == "windows"
            )
        except (OSError, ValueError, StopIteration):
            entry = None
        if entry is not None and entry["graded"] and until(entry):
            return entry
        time.sleep(0.05)
    raise AssertionError(f"no such report of windows within {DEADLINE} s")


def _graded_as_now(target: Path) -> Callable[[dict], bool]:
    now = fingerprint(target, "windows")
    return lambda entry: entry["fingerprint"] == now


@pytest.mark.slow
def test_watch_regrades_on_save_goes_on_after_a_bad_import_or_a_missing_file_and_stops_on_sigint(
    tmp_path: Path,
) -> None:
    target = _copy(tmp_path)
    module = target / "windows.py"
    solution = module.read_text()
    report, out = tmp_path / "report.json", tmp_path / "out.txt"
    command = ["-m", "graders", "--watch", "windows"]
    command += ["--target", str(target), "--json", str(report)]
    with out.open("w") as output:  # forked from the warm template: a watch's start is not tested
        process = forkserver.popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        first = _wait(report, process, _graded_as_now(target))
        assert first["points"] == first["max_points"] > 0

        module.write_text((ROOT / "exercises" / "windows.py").read_text())  # the stubs
        stubs = _wait(report, process, _graded_as_now(target))
        assert stubs["points"] == 0 and stubs["import_error"] is None

        module.write_text(solution + "\nimport no_such_module_anywhere\n")
        broken = _wait(report, process, _graded_as_now(target))
        assert broken["points"] == 0
        assert "no_such_module_anywhere" in broken["import_error"]

        module.unlink()  # a grading that cannot run: one line, and the watch goes on
        deadline = time.monotonic() + DEADLINE
        while "missing windows.py" not in out.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, f"the watch ended ({process.returncode})"
            time.sleep(0.05)
        assert "error: --target" in out.read_text()

        module.write_text(solution)  # the watch went on: the fix is graded too
        fixed = _wait(report, process, _graded_as_now(target))
        assert fixed["points"] == fixed["max_points"] and fixed["import_error"] is None

        process.send_signal(signal.SIGINT)
        assert process.wait(DEADLINE) == 0
    finally:
        process.kill()
        process.wait()
    text = out.read_text()
    assert text.strip().splitlines()[-1] == "stopped watching (Ctrl-C)"
    assert "Traceback" not in text


def test_an_edit_is_due_for_the_lessons_that_import_it_and_a_touch_for_none_init_for_all(
    tmp_path: Path,
) -> None:
    from core.manifest import load_manifest

    target = _copy(tmp_path)
    lessons = [load_manifest().lesson(slug) for slug in ("attention", "block", "windows")]
    graded = {lesson.slug: version(target, lesson) for lesson in lessons}
    assert changed(target, lessons, graded) == []
    before = snapshot(target)
    attention = target / "attention.py"
    attention.touch()
    time.sleep(0.01)
    attention.write_bytes(attention.read_bytes())  # saved unchanged: nothing to grade
    assert changed(target, lessons, graded) == []
    attention.write_text(attention.read_text() + "\n# edited\n")
    assert snapshot(target) != before
    assert [lesson.slug for lesson in changed(target, lessons, graded)] == ["attention", "block"]
    init = target / "__init__.py"
    init.write_text(init.read_text() + "\n# edited\n")
    assert changed(target, lessons, graded) == lessons  # every lesson process imports it
