"""Pages you can run: `python -m live.course_server` driven by Debian's chromium.

The student site the run builds once (tests/conftest.py's ``site``, which the site's tests
read too) is served by the course server with a student package that has `shift` done and
`window_starts` still a stub. The browser runs a block, edits and reruns it, switches to
"with my code", stops a runaway block (in a second tab, while the first goes on), grades, and
watches the progress page follow. Screenshots go to build/screenshots/run-*.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import forkserver
from support.system_packages import require

ROOT = Path(__file__).resolve().parents[2]
# A browser drives a live kernel, and the chapters' code runs: slow (docs/developers.md).
pytestmark = pytest.mark.slow
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "screenshots"
CHAPTER = "chapters/03-windows/"
# Seconds a block may run. Every block the test runs takes well under a second on a quiet
# machine, but the first ones import torch in a fresh kernel, which takes many seconds on a
# loaded one: the limit stays far above that, so the verdict does not depend on the speed.
BLOCK_TIMEOUT = 30

pytest.importorskip("jupyter_server", reason="the course server needs jupyter_server")


def test_server_refuses_a_missing_site_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "live.course_server", "--site", str(tmp_path / "nothing")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "build it first (nox -s docs)" in done.stderr


def test_an_error_in_a_block_is_one_line_with_its_place(tmp_path: Path) -> None:
    """ "With my code": a stub's message, and any other error as type, message and place (the
    student's file and line, or the block's), never a traceback."""
    from live import kernel_setup as k

    package = tmp_path / "mine"
    package.mkdir()
    (package / "windows.py").write_text("def shift(ids):\n    return ids[:-1], missing\n")
    (package / "broken.py").write_text("def f(:\n    pass\n")

    def caught(source: str, filename: str, scope: dict) -> str:
        try:
            exec(compile(source, filename, "exec"), scope)
        except Exception as error:  # noqa: BLE001 - any error a block raises is the input
            return k.one_line_error(type(error), error, error.__traceback__, 100, package)
        raise AssertionError("no error")

    scope: dict = {}
    exec(compile((package / "windows.py").read_text(), str(package / "windows.py"), "exec"), scope)
    line = caught("x = 1\nshift([1, 2])\n", "<ipython-input-1-abc>", scope)
    assert line == (
        "NameError: name 'missing' is not defined (windows.py, line 2); an earlier block may "
        "have stopped before defining it"
    )
    assert caught("y = 2\nprint(z)\n", "<ipython-input-2-abc>", {}).startswith(
        "NameError: name 'z' is not defined (this block, line 2)"
    )
    broken = caught((package / "broken.py").read_text(), str(package / "broken.py"), {})
    assert broken.startswith("SyntaxError: ") and broken.endswith("(broken.py, line 1)"), broken
    stub = NotImplementedError("shift in exercises/windows.py is not implemented yet")
    assert k.one_line_error(NotImplementedError, stub, None, 100, package) == (
        "NotImplementedError: shift in exercises/windows.py is not implemented yet"
    )
    assert "\n" not in line + broken


def test_kernel_setup_aliases_lesson_modules_and_caps_output(tmp_path: Path) -> None:
    """In a plain interpreter (no IPython): the aliasing and the output cap."""
    mine = _student_package(tmp_path)
    code = (
        "import io, sys\n"
        "from live import kernel_setup as k\n"
        f"k.use_exercises(__import__('pathlib').Path({str(mine)!r}))\n"
        "from gpt.chapter.windows import shift, window_starts\n"
        "import torch\n"
        "print(shift(torch.arange(4))[1].tolist())\n"
        "try:\n"
        "    window_starts(16, 4, 4)\n"
        "except NotImplementedError as e:\n"
        "    print('stub:', e)\n"
        "budget = {'left': 10}\n"
        "s = k._CappedStream(io.StringIO(), budget)\n"
        "try:\n"
        "    s.write('x' * 25)\n"
        "except k.OutputLimitExceeded:\n"
        "    print('capped at', len(s.getvalue()))\n"
    )
    done = forkserver.run(["-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[1, 2, 3]"
    assert lines[1].startswith("stub: window_starts in exercises/windows.py is not implemented")
    assert lines[2] == "capped at 10"


def _student_package(tmp_path: Path) -> Path:
    """A copy of exercises/ named `mine`: lesson 1 done (the reference's tokens.py), and in
    lesson 3 `shift` implemented while `window_starts` and the rest are still stubs."""
    mine = tmp_path / "mine"
    if not mine.exists():
        shutil.copytree(ROOT / "exercises", mine, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "solutions" / "tokens.py", mine / "tokens.py")
        windows = mine / "windows.py"
        text, count = re.subn(
            r"raise NotImplementedError\(['\"]shift in [^\n]*",
            "return ids[..., :-1], ids[..., 1:]",
            windows.read_text(encoding="utf-8"),
        )
        assert count == 1, "exercises/windows.py: the stub of shift was not found"
        windows.write_text(text, encoding="utf-8")
    return mine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def course(site: Path, tmp_path_factory) -> Iterator[dict]:
    require("chromium")
    base = tmp_path_factory.mktemp("run-cells")
    mine = _student_package(base)
    report = base / "report.json"
    port, token = _free_port(), "test-token"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "live.course_server",
            "--site",
            str(site),
            "--port",
            str(port),
            "--token",
            token,
            "--exercises",
            str(mine),
            "--report",
            str(report),
            "--timeout",
            str(BLOCK_TIMEOUT),
            "--output-limit",
            "20000",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the server is up when its status API answers
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail("the course server exited:\n" + server.stdout.read())
                time.sleep(0.1)
        yield {"url": url, "token": token, "mine": mine, "report": report}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def page(course: dict):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(600_000)  # a hang guard: every wait is for a condition
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{course['url']}/course/{CHAPTER}?token={course['token']}")
        page.wait_for_selector(".course-cell-bar")
        yield page
        assert not errors, f"page errors: {errors}"
        browser.close()


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"run-{name}.png"))


def _kernels(page) -> list:
    return page.evaluate("() => fetch('/api/kernels').then(r => r.json())")


def _wait_for_kernels(page, count: int, message: str) -> None:
    """Wait until the server runs `count` kernels (a page's DELETE completes asynchronously)."""
    for _ in range(1200):  # 10 minutes: a hang guard, far above what a loaded machine takes
        if len(_kernels(page)) == count:
            return
        page.wait_for_timeout(500)
    assert len(_kernels(page)) == count, message


def _run(page, index: int):
    """Press Run on block `index` and wait for its status; return its output area."""
    page.locator(".course-cell-bar").nth(index).locator(".course-run").click()
    return _finished(page, index)


def _finished(page, index: int):
    """Wait until block `index` has run (its status is no longer queued or running)."""
    status = page.locator(".course-cell-bar").nth(index).locator(".course-cell-status")
    page.wait_for_function(
        "el => !['', 'queued…', 'running…'].includes(el.textContent)", arg=status.element_handle()
    )
    return page.locator(".course-live-output").nth(index)


RUNAWAY = "import time\nwhile True:\n    time.sleep(0.05)"


def _start_runaway(page, index: int):
    """A second tab of the chapter (a kernel of its own) whose block `index`, edited to run
    forever, is running when this returns. It sleeps rather than spins (the interrupt stops
    either), leaving the cores to the other tests; the first tab goes on meanwhile, so the
    test waits out the block's limit once, beside the rest of its work."""
    tab = page.context.new_page()
    tab.goto(page.url)
    bar = tab.locator(".course-cell-bar").nth(index)
    bar.locator(".course-edit").click()
    tab.locator(".course-editor").fill(RUNAWAY)
    bar.locator(".course-run").click()
    tab.wait_for_function(  # the kernel started and the blocks above ran: the runaway runs
        "el => el.textContent === 'running…'",
        arg=bar.locator(".course-cell-status").element_handle(),
    )
    return tab


def test_run_edit_mine_stop_and_progress(page, course: dict) -> None:
    cells = json.loads(page.locator("#course-cells").text_content())["cells"]
    first = next(i for i, c in enumerate(cells) if "shift(" in c["source"] and c["shown"])
    stub = next(i for i, c in enumerate(cells) if "window_starts(" in c["source"] and c["shown"])

    # Run: the live output is the build's (the page's static output) for the reference.
    out = _run(page, first)
    assert page.locator(".course-cell-status").nth(first).text_content() == "done"
    static = (
        page.locator(".course-cell")
        .nth(first)
        .evaluate(
            "m => { let n = m.nextElementSibling; const parts = [];"
            " while (n && !n.classList.contains('course-cell-end')) {"
            " if (n.matches('.highlight')) parts.push(n.textContent); n = n.nextElementSibling; }"
            " return parts[parts.length - 1]; }"
        )
    )
    live = out.locator("pre").first.text_content()
    assert live.strip() and live.strip() == static.strip()
    assert len(_kernels(page)) == 1  # one kernel for the page, started by the first Run
    _shot(page, "1-run")
    runaway = _start_runaway(page, first)

    # Edit and run again: the output follows the edit.
    bar = page.locator(".course-cell-bar").nth(first)
    bar.locator(".course-edit").click()
    editor = page.locator(".course-editor")
    # Python's lines are never soft-wrapped in the editor: a long one scrolls.
    assert editor.get_attribute("wrap") == "off"
    assert editor.evaluate("e => getComputedStyle(e).whiteSpace") == "pre"
    editor.fill(editor.input_value() + "\nprint('edited', 6 * 7)")
    out = _run(page, first)
    assert "edited 42" in out.text_content()
    _shot(page, "2-edited")

    editor.fill("print('x' * 100_000)")
    out = _run(page, first)
    assert "Output stopped" in out.text_content()
    assert len(out.text_content()) < 30_000
    editor.fill("import os\nos._exit(1)")  # the kernel process dies
    out = _run(page, first)
    assert "The kernel stopped while this block ran" in out.text_content()
    editor.fill("print('still alive')")
    out = _run(page, first)  # a new kernel: the blocks above run first, then this one
    assert "still alive" in out.text_content()
    _wait_for_kernels(
        page, 2, "the dead kernel was not deleted (left: this tab's new one and the runaway tab's)"
    )
    _shot(page, "3-stopped")
    bar.locator(".course-reset").click()  # the block's own code again

    # With my code: shift (done) matches the reference; window_starts shows the stub's line.
    page.locator(".course-mine input").check()
    page.wait_for_function(
        "i => document.querySelectorAll('.course-live-output')[i].dataset.status", arg=stub
    )
    mine = page.locator(".course-live-output").nth(first)
    assert mine.locator(".course-live-label").text_content() == "Your code"
    assert mine.locator("pre").first.text_content().strip() == static.strip()
    note = page.locator(".course-live-output").nth(stub).locator(".course-live-stub")
    message = note.text_content()
    assert "window_starts in exercises/windows.py is not implemented yet" in message
    anchor = re.search(r"03-windows\.md#([\w-]+)", message).group(1)
    assert note.locator("a").get_attribute("href").endswith(f"chapters/03-windows/#{anchor}")
    assert "Traceback" not in page.locator(".course-live-output").nth(stub).text_content()
    page.locator(".course-live-output").nth(stub).scroll_into_view_if_needed()
    _shot(page, "4-with-my-code")

    # Progress: grade while the page is open; the exercise box and the progress page follow.
    box = page.locator(".course-progress-box")
    box.wait_for()
    assert "Not graded yet" in box.text_content()
    graded = forkserver.run(
        ["-m", "graders", "windows", "--target", str(course["mine"])]
        + ["--json", str(course["report"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert graded.returncode == 0, graded.stderr
    report = json.loads(course["report"].read_text())
    points = report["lessons"][0]["points"]
    assert 0 < points < report["lessons"][0]["max_points"]
    expected = f"{points}/{report['lessons'][0]['max_points']}"
    page.wait_for_function(  # the finished run, not one of the reports written as it went
        "want => (document.querySelector('.course-progress-box__points') || {}).textContent"
        " === want && document.querySelector('.course-progress-box').dataset.complete === 'true'",
        arg=expected,
    )
    assert "not graded" not in box.text_content()
    box.scroll_into_view_if_needed()
    _shot(page, "5-box-graded")

    # The runaway block of the second tab is stopped with a message; its kernel keeps working,
    # and closing the tab shuts it down.
    out = _finished(runaway, first)
    assert f"Stopped: this block ran for more than {BLOCK_TIMEOUT}" in out.text_content()
    runaway.locator(".course-editor").fill("print('still', 'working')")
    assert "still working" in _run(runaway, first).text_content()
    _shot(runaway, "5-runaway-stopped")
    runaway.close()
    _wait_for_kernels(page, 1, "the runaway tab's kernel outlived the tab")

    # A quiz answered right on the chapter (mkdocs_quiz keeps it in the browser) shows too.
    quiz = page.locator("article .quiz:not([data-quiz-type]):has(input[data-correct])").first
    quiz.scroll_into_view_if_needed()
    quiz.locator("fieldset > div:has(input[data-correct]) label").first.click()
    quiz.locator(".quiz-feedback").wait_for(state="visible")
    page.locator("a[href$='progress/']").first.click()
    page.wait_for_selector(".course-progress__row[data-lesson='windows']")
    row = page.locator(".course-progress__row[data-lesson='windows']")
    page.wait_for_function(
        "want => document.querySelector(\"[data-lesson='windows'] .course-progress__points\")"
        ".textContent === want && document.querySelector('.course-progress').dataset.complete"
        " === 'true'",
        arg=expected,
    )
    assert "to do" in row.text_content()
    quiz_text = row.locator(".course-progress__quiz").text_content()
    assert re.fullmatch(r"1 of \d+ right the first time", quiz_text), quiz_text
    _wait_for_kernels(page, 0, "the chapter's kernel outlived the page")
    hints = page.locator(".course-check--failed .course-check__hint a")
    assert hints.count() > 0
    assert "chapters/03-windows/#" in hints.first.get_attribute("href")
    _shot(page, "6-progress")


def test_server_wants_the_token_and_listens_on_loopback(course: dict) -> None:
    import urllib.error

    for path in ("/course-api/report", "/api/kernels"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(course["url"] + path, timeout=10)
        assert refused.value.code == 403, path
    request = urllib.request.Request(course["url"] + "/course-api/report")
    request.add_header("Authorization", f"token {course['token']}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert set(json.loads(answer.read())) == {"report", "graded", "error"}
    port = int(course["url"].rsplit(":", 1)[1])
    try:  # the machine's other addresses, where its name resolves
        addresses = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        addresses = set()
    for address in addresses - {"127.0.0.1", "::1"}:  # nothing answers there
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=2).close()
