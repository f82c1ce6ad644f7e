"""The graders: full marks on solutions/, zero on the untouched exercises/, the report, the CLI,
and partial results that survive a kill (the worker's limits: test_sandbox.py)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import forkserver
from test_replay import SECRET  # the secret seed the replaying submission meets

import graders
from core.manifest import load_manifest
from graders.client import WorkerClient
from graders.hints import NOT_IMPLEMENTED
from graders.runner import GradingError

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
LESSON_KEYS = {"slug", "title", "points", "max_points", "import_error", "flagged", "checks"}
CHECK_KEYS = {
    "id",
    "function",
    "points",
    "max_points",
    "passed",
    "hint",
    "link",
    "url",
    "detail",
    "hidden",
    "explained_by",
}


def run_cli(*args: str, timeout: float = 600, cold: bool = False) -> subprocess.CompletedProcess:
    """``python -m graders ARGS``, forked from the warm template (tests/support/forkserver.py),
    or in a fresh interpreter where ``cold``: what start-up does is what the test checks."""
    if cold:
        return subprocess.run(
            [PYTHON, "-m", "graders", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return forkserver.run(
        ["-m", "graders", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def solutions_report(tmp_path_factory) -> tuple[dict, Path]:
    """solutions/ graded live, public and hidden checks, on inputs drawn from a secret seed:
    drawn inputs still judge. On the public seed's inputs the release records every public
    check's answer only after the reference passed it (instructor/release.py), and
    test_released_graders grades solutions/ on them again."""
    path = tmp_path_factory.mktemp("solutions") / "report.json"
    report = graders.grade(ROOT / "solutions", hidden=True, json_path=path, input_seed=SECRET)
    return report, path


@pytest.mark.slow
def test_solutions_score_full_marks_public_and_hidden(solutions_report):
    report, _ = solutions_report
    failed = [
        f"{c['id']}: {c['hint']} [{c['detail']}]"
        for lesson in report["lessons"]
        for c in lesson["checks"]
        if not c["passed"]
    ]
    assert not failed
    assert report["points"] == report["max_points"] > 0
    assert report["complete"] is True
    assert {c["function"] for lesson in report["lessons"] for c in lesson["checks"]} >= {
        "lookup",
        "shift",
        "cross_entropy",
        "document_mask",
        "fit",
        "TokenWindows",
    }


@pytest.mark.slow
def test_report_schema_and_file(solutions_report):
    report, path = solutions_report
    assert json.loads(path.read_text()) == report
    assert set(report) == {"target", "hidden", "complete", "points", "max_points", "lessons"}
    manifest = load_manifest()
    assert [lesson["slug"] for lesson in report["lessons"]] == manifest.slugs
    for lesson in report["lessons"]:
        assert set(lesson) == {
            "slug",
            "title",
            "points",
            "max_points",
            "import_error",
            "graded",
            "fingerprint",
            "flagged",
            "checks",
        }
        assert lesson["import_error"] is None
        assert lesson["points"] == sum(c["points"] for c in lesson["checks"])
        for check in lesson["checks"]:
            assert set(check) == CHECK_KEYS
            assert check["link"] == manifest.check(check["id"]).link
            assert check["hint"] is None and check["detail"] is None  # all passed
    assert report["max_points"] == sum(c.points for c in manifest.checks)


@pytest.mark.slow
def test_untouched_exercises_score_zero(tmp_path):
    report = graders.grade(ROOT / "exercises", hidden=True, json_path=tmp_path / "r.json")
    assert report["points"] == 0 and report["complete"]
    for lesson in report["lessons"]:
        for check in lesson["checks"]:
            assert not check["passed"] and check["hint"] == NOT_IMPLEMENTED, check
            if check["hidden"]:
                assert check["detail"] is None  # hidden checks never tell their inputs
            else:
                assert "NotImplementedError" in check["detail"]


def test_public_only_by_default_and_lesson_selection(tmp_path):
    report = graders.grade(ROOT / "solutions", lessons=["attention"], json_path=tmp_path / "r.json")
    assert [lesson["slug"] for lesson in report["lessons"]] == ["attention"]
    checks = report["lessons"][0]["checks"]
    assert checks and not any(c["hidden"] for c in checks)
    assert report["points"] == report["max_points"]
    again = graders.grade(ROOT / "solutions", lessons=["4"], json_path=tmp_path / "r2.json")
    assert again["points"] == report["points"]  # a second run in the same process


def test_cli_grades_one_lesson_and_writes_the_report(tmp_path):
    path = tmp_path / "report.json"
    result = run_cli("embeddings", "--target", "solutions", "--json", str(path))
    assert result.returncode == 0, result.stderr
    report = json.loads(path.read_text())
    assert report["points"] == report["max_points"] > 0
    assert f"{report['points']}/{report['max_points']}" in result.stdout
    assert "lookup-matches-indexing" in result.stdout


@pytest.mark.parametrize("kind", ["reference", "honest"])
def test_the_block_lesson_is_graded_on_its_own_code_with_earlier_lessons_as_stubs(tmp_path, kind):
    """solutions/block.py (or an honest block.py that names lessons 2 and 4 otherwise) beside
    the other lessons' stubs, graded as autograde grades (hidden checks, a secret seed): every
    point, where self_attention and gpt_logits once failed on the stubs they call. Graded in
    this process, by the worker the earlier gradings left idle (test_replay.py runs the
    command with the seed in its environment)."""
    from support import block_alone

    target = block_alone.package(tmp_path / "exercises", getattr(block_alone, kind)())
    path = tmp_path / "report.json"
    graded = graders.grade(target, ["block"], hidden=True, json_path=path, input_seed=SECRET)
    report = json.loads(path.read_text())
    assert report == graded
    failed = [
        (row["id"], row["detail"]) for row in report["lessons"][0]["checks"] if not row["passed"]
    ]
    assert not failed and report["points"] == report["max_points"] > 40, failed


def test_cli_exit_status_is_zero_whatever_the_score(tmp_path):
    result = run_cli("attention", "--json", str(tmp_path / "r.json"))  # exercises/: 0 points
    assert result.returncode == 0, result.stderr
    assert "not implemented yet" in result.stdout
    assert "course/chapters/04-attention.md:" in result.stdout  # the section's line, clickable


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuchlesson"], "unknown lesson 'nosuchlesson'; valid lessons: tokens, embeddings"),
        (["--target", "tests"], "does not hold the exercise modules: missing tokens.py"),
        (["--target", "no/such/dir"], "is not a directory"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_cli_bad_usage_is_one_line_and_nonzero(args, message):
    result = run_cli(*args, cold=True)  # usage errors come before torch loads: a cold start
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_cli_bad_usage_is_reported_before_torch_loads():
    """A mistyped lesson or folder costs a third of a second, not torch's start-up."""
    code = (
        "import sys\n"
        "from graders.__main__ import main\n"
        "codes = [main(['nosuchlesson']), main(['--target', 'no/such/dir'])]\n"
        "print(codes, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.stdout.strip() == "[2, 2] False", done.stdout + done.stderr


def test_a_check_without_a_test_is_a_grading_error(tmp_path):
    manifest = (ROOT / "course" / "lessons.toml").read_text()
    extra = """
[[lesson.check]]
id = "no-such-test"
function = "lookup"
points = 1
hidden = false
hint = "x"
"""
    marker = "\n[[lesson]]\nnumber = 3"
    (tmp_path / "lessons.toml").write_text(manifest.replace(marker, extra + marker, 1))
    with pytest.raises(GradingError, match="check 'no-such-test' .* has no grader test"):
        graders.grade(
            ROOT / "solutions",
            ["embeddings"],
            json_path=tmp_path / "r.json",
            manifest_path=tmp_path / "lessons.toml",
        )


def _workers_for(target: Path) -> list[int]:
    """Pids of grading workers of ``target`` (their argv ends with --target TARGET)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--target" in argv and str(target).encode() in argv:
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_results_survive_a_kill_and_the_worker_dies_with_the_checker(tmp_path):
    path = tmp_path / "report.json"
    target = tmp_path / "pkg"  # a path of its own: only this run's workers have it in argv
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    proc = forkserver.popen(
        ["-m", "graders", "--target", str(target), "--json", str(path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    report = None
    try:
        while time.monotonic() < deadline:
            if path.exists():
                report = json.loads(path.read_text())  # never a torn file: atomic replace
                if report["points"] >= 5:
                    break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert report is not None and report["points"] >= 5, "no partial results were written"
    final = json.loads(path.read_text())
    assert final["complete"] is False and final["points"] >= report["points"]
    graded = [c for lesson in final["lessons"] for c in lesson["checks"] if c["passed"]]
    assert graded and all(c["points"] == c["max_points"] for c in graded)
    deadline = time.monotonic() + 20
    while _workers_for(target) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _workers_for(target), "the worker outlived its checker"


def test_a_check_can_set_its_own_timeout(tmp_path):
    """The manifest's per-check ``timeout`` (seconds per call) replaces the 10 s default."""
    from variants import Variant, build_target

    slow = Variant(
        "objective",
        "perplexity",
        "slow",
        """
        def perplexity(loss):
            import time
            time.sleep(1.5)
            return math.exp(float(loss))
    """,
    )
    target = build_target(tmp_path, [slow])
    manifest = (ROOT / "course" / "lessons.toml").read_text()
    marker = 'id = "perplexity-tensor-input"\n'
    assert marker in manifest
    (tmp_path / "lessons.toml").write_text(manifest.replace(marker, marker + "timeout = 0.5\n"))
    report = graders.grade(
        target,
        ["objective"],
        json_path=tmp_path / "r.json",
        functions=["perplexity"],
        manifest_path=tmp_path / "lessons.toml",
    )
    checks = {c["id"]: c for c in report["lessons"][0]["checks"]}
    assert checks["perplexity-exp"]["passed"]  # 1.5 s a call is within the default 10 s
    timed_out = checks["perplexity-tensor-input"]
    assert not timed_out["passed"] and "took longer than 0.5 s" in timed_out["hint"]


def test_trusted_dependencies_are_plugged_in_only_where_installed(tmp_path, monkeypatch):
    """The instructor's graders run lm_loss with a trusted cross_entropy; a released copy of the
    graders (no graders/secret/trusted.py) runs it with the submission's own."""
    import torch
    from variants import Variant, build_target

    from graders import client as client_module
    from graders.client import StudentError

    stub = Variant(
        "objective",
        "cross_entropy",
        "stub",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            raise NotImplementedError("cross_entropy")
    """,
    )
    target = build_target(tmp_path, [stub])
    logits, ids = torch.randn(2, 4, 5), torch.tensor([[1, 2, 3, 4], [0, 1, 2, 3]])
    full = WorkerClient(target)
    try:
        loss, _ = full.call("objective.lm_loss", [logits, ids], {}, timeout=600)
    finally:
        full.close()
    expected = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, 5), ids[:, 1:].reshape(-1)
    )
    assert torch.allclose(loss, expected)
    monkeypatch.setattr(client_module, "_dependency_answers", lambda: None)
    released = WorkerClient(target)
    try:
        with pytest.raises(StudentError, match="cross_entropy") as raised:
            released.call("objective.lm_loss", [logits, ids], {}, timeout=600)
    finally:
        released.close()
    assert raised.value.is_a("NotImplementedError")


def test_terminal_report_header_on_its_own_line_and_hints_wrap_with_hanging_indent():
    import io

    from rich.console import Console

    from graders.terminal import render_lesson

    out = io.StringIO()
    check = {
        "id": "ce-matches-torch",
        "function": "cross_entropy",
        "points": 0,
        "max_points": 3,
        "passed": False,
        "hidden": False,
        "hint": "for each row, loss = logsumexp(logits) - logits[target]; return the mean " * 2,
        "detail": "cross_entropy(logits [6, 10]) returned tensor(2.0), expected tensor(2.5) " * 2,
        "link": "chapters/06-objective.md#x",
    }
    lesson = {"title": "The training objective", "slug": "objective", "points": 0}
    render_lesson(Console(file=out, width=70), lesson | {"max_points": 3, "checks": [check]})
    lines = out.getvalue().splitlines()
    assert lines[0].strip() == "Lesson: The training objective (objective) 0/3 points"
    note = lines[lines.index(next(x for x in lines if "✗ ce-matches-torch:" in x)) :]
    assert len(note) > 3 and all(x.startswith("    ") for x in note[1:] if x.strip())


def test_each_windows_check_is_charged_only_for_its_own_mistake(tmp_path):
    """Wrong items with the right length keep `token-windows-len`; a global seed fails
    `make-loader-seeded` with a detail that shows the first batch that differs."""
    from variants import V, build_target

    wrong_items = V(
        "windows",
        "TokenWindows.__getitem__",
        "unshifted",
        None,
        """
        def __getitem__(self, i):
            start = self.starts[i]
            window = self.ids[start : start + self.context_length]
            return window, window
        """,
    )
    global_seed = V(
        "windows",
        "make_loader",
        "global-seed",
        None,
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            if seed is not None:
                torch.manual_seed(seed)
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=drop_last)
        """,
    )
    target = build_target(tmp_path, [wrong_items, global_seed])
    report = graders.grade(target, lessons=["windows"])
    checks = {c["id"]: c for c in report["lessons"][0]["checks"]}
    assert checks["token-windows-len"]["passed"]
    assert not checks["token-windows-items"]["passed"]
    seeded = checks["make-loader-seeded"]
    assert not seeded["passed"]
    assert "first differs" in seeded["detail"]


def _failed_row(check_id: str, function: str, hint: str, detail: str = "got 1, expected 2") -> dict:
    return {
        "id": check_id,
        "function": function,
        "points": 0,
        "max_points": 1,
        "passed": False,
        "hidden": False,
        "hint": hint,
        "detail": detail,
        "link": "chapters/03-windows.md#shifted-targets",
        "url": "chapters/03-windows/#shifted-targets",
        "explained_by": None,
    }


def test_links_are_the_site_or_a_path_a_terminal_opens(tmp_path, monkeypatch):
    from graders.report import href

    link = "chapters/02-embeddings.md#embedding-lookup"
    monkeypatch.setenv("COURSE_SITE_URL", "https://course.example.org/gpt/")
    assert href(link) == "https://course.example.org/gpt/chapters/02-embeddings/#embedding-lookup"
    monkeypatch.delenv("COURSE_SITE_URL")
    # A student release records the site it links to.
    (tmp_path / "release.json").write_text('{"site_url": "https://s.example.org/"}')
    assert href(link, tmp_path) == "https://s.example.org/chapters/02-embeddings/#embedding-lookup"
    (tmp_path / "release.json").unlink()
    # The chapter's source at the heading's line: terminals and editors open path:line.
    chapter = tmp_path / "course" / "chapters" / "02-embeddings.md"
    chapter.parent.mkdir(parents=True)
    chapter.write_text(
        "# Tokens become vectors\n\ntext\n\n## Embedding lookup {#embedding-lookup}\n"
    )
    assert href(link, tmp_path) == f"{chapter}:5"
    # A built site wins over the source: its page, at the section.
    page = tmp_path / "build" / "site" / "chapters" / "02-embeddings" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    assert href(link, tmp_path) == page.as_uri() + "#embedding-lookup"
    assert href(link) == f"{ROOT / 'course' / 'chapters' / '02-embeddings.md'}:" + str(
        next(
            i
            for i, line in enumerate((ROOT / "course/chapters/02-embeddings.md").open(), 1)
            if "{#embedding-lookup}" in line
        )
    )


def test_a_long_link_is_never_wrapped(monkeypatch):
    import io

    from rich.console import Console

    from graders.terminal import render_lesson

    monkeypatch.setenv("COURSE_SITE_URL", "https://a-rather-long-host-name.example.org/courses/gpt")
    out = io.StringIO()
    lesson = {"title": "Training pairs", "slug": "windows", "points": 0, "max_points": 1}
    row = _failed_row("shift-pairs", "shift", "targets are not shifted " * 4)
    render_lesson(Console(file=out, width=40), lesson | {"checks": [row]})
    url = "https://a-rather-long-host-name.example.org/courses/gpt/chapters/03-windows/#shifted-targets"
    assert any(line.strip() == f"see {url}" for line in out.getvalue().splitlines()), out.getvalue()


def test_one_mistake_is_told_once_with_the_checks_it_costs(tmp_path, monkeypatch):
    """The same diagnosed mistake in two checks of a function, and a check of a function that
    runs the student's own version of it (as in the student release, whose checker answers no
    dependency): one note, naming every check it explains."""
    import io
    import sys

    from rich.console import Console

    from core.manifest import load_manifest
    from graders.report import Report, uses
    from graders.terminal import render_lesson

    # The instructor's checker answers TokenWindows' shift itself: no mistake of shift reaches it.
    assert uses("windows", "TokenWindows") == ()
    monkeypatch.setitem(sys.modules, "graders.secret.dependencies", None)  # the student release
    assert uses("windows", "TokenWindows") == ("shift", "window_starts")

    manifest = load_manifest()
    lesson = manifest.lesson("windows")
    checks = lesson.selected_checks(hidden=False)
    report = Report(tmp_path, False, [(lesson, checks)], None)
    mistake = manifest.check("shift-pairs").mistakes["not-shifted"]
    by_id = {c.id: c for c in checks}
    report.record(by_id["shift-pairs"], False, mistake, "shift gave inputs [1, 2]")
    report.record(by_id["shift-any-shape"], False, mistake, "shift gave inputs [3, 4]")
    items = by_id["token-windows-items"]
    report.record(items, False, items.hint, "TokenWindows[0] is (x=[5], y=[5])")
    report.record(
        by_id["window-starts-examples"], False, "some other hint", "got [0], expected [0, 4]"
    )
    rows = {row["id"]: row for row in report.lesson("windows")["checks"]}
    assert rows["shift-pairs"]["explained_by"] is None
    assert rows["shift-any-shape"]["explained_by"] == "shift-pairs"
    assert rows["token-windows-items"]["explained_by"] == "shift-pairs"  # TokenWindows uses shift
    assert rows["window-starts-examples"]["explained_by"] is None  # a mistake of its own
    out = io.StringIO()
    render_lesson(Console(file=out, width=200), report.lesson("windows"))
    text = out.getvalue()
    assert text.count(mistake) == 1
    assert "shift-pairs: " + mistake in text
    assert "one mistake: shift-any-shape fails from the same mistake too" in text
    assert "one mistake: TokenWindows uses shift, so token-windows-items fails too" in text
    assert "TokenWindows[0] is (x=[5], y=[5])" in text  # its detail still shows


def test_a_recognised_mistake_lists_the_checks_of_its_function_that_recognise_none(tmp_path):
    """Unbiased variance fails layer-norm-no-bias too, which has no hint of that mistake: the
    failure is listed under the mistake, not told with the check's own hint about the bias; a
    mistake whose rule another section teaches links there."""
    import io

    from rich.console import Console

    from core.manifest import load_manifest
    from graders.report import Report
    from graders.terminal import render_lesson

    manifest = load_manifest()
    lesson = manifest.lesson("block")
    checks = {c.id: c for c in lesson.selected_checks(hidden=False)}
    report = Report(tmp_path, False, [(lesson, list(checks.values()))], None)
    mistake = checks["layer-norm-matches-torch"].mistakes["unbiased-variance"]
    report.record(checks["layer-norm-matches-torch"], False, mistake, "layer_norm is wrong")
    no_bias = checks["layer-norm-no-bias"]
    report.record(no_bias, False, no_bias.hint, "layer_norm(x, w, None) is wrong")
    rows = {row["id"]: row for row in report.lesson("block")["checks"]}
    assert rows["layer-norm-no-bias"]["explained_by"] == "layer-norm-matches-torch"
    out = io.StringIO()
    render_lesson(Console(file=out, width=300), report.lesson("block"))
    text = out.getvalue()
    assert no_bias.hint not in text
    assert "layer-norm-no-bias fails too: fix this mistake first" in text

    objective = manifest.lesson("objective")
    ce = objective.selected_checks(hidden=False)[0]
    assert ce.id == "ce-matches-torch"
    report = Report(tmp_path, False, [(objective, [ce])], None)
    report.record(ce, False, ce.mistakes["no-max-back"], "wrong", "overflow")
    row = report.lesson("objective")["checks"][0]
    assert row["link"] == "chapters/06-objective.md#overflow"
    assert row["url"] == "chapters/06-objective/#overflow"
