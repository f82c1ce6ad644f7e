"""The fork server gives a command what a fresh interpreter would, or starts it cold."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import forkserver
from support.forkserver import ROOT, cold_reason, run

PROJECT = ("core", "gpt", "graders", "instructor", "live", "tools")


def test_a_command_gets_its_own_argv_cwd_environment_and_exit_status(tmp_path):
    env = {**os.environ, "FORKED_VALUE": "mine"}
    code = (
        "import os, sys; print(sys.argv[1:], os.getcwd(), os.environ['FORKED_VALUE']); sys.exit(3)"
    )
    done = run(["-c", code, "a", "b"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, f"['a', 'b'] {tmp_path} mine\n")
    assert "FORKED_VALUE" not in os.environ


def test_input_reaches_standard_input_and_stderr_is_its_own():
    code = "import sys; data = sys.stdin.read(); print(data.upper()); print('e', file=sys.stderr)"
    done = run(["-c", code], input="abc", capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ABC\n", "e\n")


def test_an_uncaught_exception_exits_1_with_its_traceback():
    done = run(["-c", "raise ValueError('bad value')"], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback") and "ValueError: bad value" in done.stderr
    assert "forkserver" not in done.stderr  # the command's frames, not the server's


def test_a_signal_is_a_negative_status_and_a_timeout_kills_the_child():
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert run(["-c", code]).returncode == -signal.SIGTERM
    with pytest.raises(subprocess.TimeoutExpired):
        run(["-c", "import time; time.sleep(600)"], timeout=1, capture_output=True)
    assert run(["-c", "print('after')"], capture_output=True, text=True).stdout == "after\n"


def test_a_command_started_beside_the_test_is_polled_signalled_and_waited_for(tmp_path):
    """popen: the child writes to the file it was given and runs until the test signals it
    (SIGINT, as Ctrl-C, to a handler of its own as the watch's: an interpreter started in the
    background inherits SIGINT ignored); the template serves the next command after."""
    out = tmp_path / "out.txt"
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "print('started', flush=True)\n"
        "try:\n"
        "    time.sleep(600)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    with out.open("w") as output:
        process = forkserver.popen(["-c", code], stdout=output, stderr=subprocess.STDOUT)
    assert isinstance(process, forkserver.Forked)
    try:
        deadline = time.monotonic() + 60  # a hang guard
        while "started" not in out.read_text() and time.monotonic() < deadline:
            assert process.poll() is None
            time.sleep(0.01)
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.1)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0  # a hang guard
    finally:
        process.kill()
        process.wait()
    assert out.read_text() == "started\ninterrupted\n"
    assert run(["-c", "print('after')"], capture_output=True, text=True).stdout == "after\n"
    with pytest.raises(ValueError, match="PIPE"):
        forkserver.popen(["-c", "pass"], stdout=subprocess.PIPE)


def test_a_module_runs_as_python_m_runs_it(tmp_path):
    done = run(["-m", "graders", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "usage: python -m graders" in done.stdout
    assert done.stderr == ""  # no runpy warning: the module run is not also imported by name


def test_the_child_is_reset_to_a_fresh_interpreters_state():
    code = (
        "import atexit, logging, random, signal, sys, torch\n"
        "print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, logging.root.handlers,"
        " torch.get_num_threads())\n"
        "print(random.random())\n"
        "atexit.register(print, 'its own atexit runs')"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    first = run(["-c", code], env=env, capture_output=True, text=True)
    second = run(["-c", code], env=env, capture_output=True, text=True)
    lines = first.stdout.splitlines()
    assert lines[0] == "True [] 2" and lines[2] == "its own atexit runs", first.stderr
    assert lines[1] != second.stdout.splitlines()[1]  # fresh seeds, not the template's


def test_another_copy_of_the_project_starts_cold(tmp_path):
    (tmp_path / "gpt").mkdir()
    (tmp_path / "gpt" / "__init__.py").write_text("WHERE = 'the copy'\n")
    assert "another copy" in cold_reason(["-m", "gpt"], str(tmp_path), dict(os.environ))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    assert "another copy" in cold_reason(["-m", "gpt"], str(ROOT), env)
    code = "import gpt; print(gpt.WHERE)"
    done = run(["-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "the copy\n", done.stderr
    assert cold_reason(["-m", "graders"], str(ROOT), dict(os.environ)) is None


def test_interpreter_options_and_import_time_variables_start_cold():
    env = dict(os.environ)
    assert "option" in cold_reason(["-I", "-c", "pass"], str(ROOT), env)
    assert "MPLBACKEND" in cold_reason(["-c", "pass"], str(ROOT), {**env, "MPLBACKEND": "pdf"})
    assert "PYTHONHASHSEED" in cold_reason(
        ["-c", "pass"], str(ROOT), {**env, "PYTHONHASHSEED": "7"}
    )


def _module_level_environment_reads() -> set[str]:
    """Every os.environ / os.getenv read outside a function in the project's packages."""
    found = set()
    for package in PROJECT:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for expression in _outside_functions(tree):
                for node in ast.walk(expression):
                    if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
                        found.add(f"{path.relative_to(ROOT)}: {ast.unparse(expression)[:80]}")
    return found


def _outside_functions(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(child, ast.expr):
            yield child
        else:
            yield from _outside_functions(child)


def test_no_project_module_reads_the_environment_when_imported():
    """A read at import time would see the template's value: it belongs in READ_AT_IMPORT (and
    its commands start cold when it differs) or inside a function."""
    reads = _module_level_environment_reads()
    unlisted = {r for r in reads if not any(name in r for name in forkserver.READ_AT_IMPORT)}
    assert not unlisted


def test_the_template_imports_no_student_package():
    code = "import sys; print(sorted({m.partition('.')[0] for m in sys.modules}))"
    done = run(["-c", code], capture_output=True, text=True)
    assert "torch" in done.stdout  # warm
    assert "exercises" not in done.stdout and "solutions" not in done.stdout
    assert (
        "graders.client"
        not in run(
            ["-c", "import sys; print(list(sys.modules))"], capture_output=True, text=True
        ).stdout
    )


def test_it_is_the_interpreter_of_this_environment():
    done = run(["-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    assert done.stdout.strip() == sys.executable
    assert Path(done.args[0]) == Path(sys.executable)


@pytest.mark.parametrize("command", sorted(forkserver.COLD_STARTS))
def test_each_command_keeps_a_named_cold_start(command):
    """The test named for a command exists and starts it cold (subprocess, or cold=True)."""
    test, reason = forkserver.COLD_STARTS[command]
    path, name = test.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found and reason, test
    body = ast.get_source_segment(source, found[0]) or ""
    assert "cold=True" in body or "sys.executable" in body, test
