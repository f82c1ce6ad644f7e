"""The student's process is isolated: the worker's own limits everywhere, and bubblewrap's
sandbox (graders/sandbox.py, what autograde runs) on Linux: no capabilities, a private root
with nothing of the repository, no network, a process cap, and the by-hand watch still on."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from support.by_hand_bindings import BINDINGS, objective_with
from support.system_packages import require
from variants import Variant, build_target

from graders.client import WorkerClient

ROOT = Path(__file__).resolve().parents[2]
LESSON = "embeddings"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
needs_bwrap = pytest.mark.usefixtures("bubblewrap")


def test_worker_limits_and_isolation():
    client = WorkerClient(ROOT / "solutions")
    try:
        limits = client.limits()
    finally:
        client.close()
    assert limits["RLIMIT_AS"] == [4 << 30, 4 << 30]
    assert limits["RLIMIT_CORE"] == [0, 0]
    assert limits["RLIMIT_FSIZE"][1] == 64 << 20
    assert limits["RLIMIT_CPU"][1] <= 3600
    assert str(ROOT) not in limits["sys_path"] and "" not in limits["sys_path"]
    assert not limits["cwd"].startswith(str(ROOT))
    if os.geteuid() == 0 and "CapEff" in limits:
        assert limits["CapEff"] == 0 and limits["CapBnd"] == 0  # root without capabilities
        assert limits["NoNewPrivs"] == 1


def _leaving(tag: str) -> Variant:
    """perplexity that leaves a file behind, and answers which code ran where, beside what."""
    code = f"""
        def perplexity(loss):
            import os
            open("{tag}-left-behind", "w").close()
            listed = sorted(n for n in os.listdir(".") if not n.startswith("{tag}-"))
            return [{tag!r}, os.getppid(), listed]
    """
    return Variant("objective", "perplexity", tag, code)


def _run(target: Path, sandbox: bool = False) -> tuple[list, int]:
    client = WorkerClient(target, sandbox=sandbox)
    try:
        return client.call("objective.perplexity", [1.0], {}, timeout=60)[0], client.starts
    finally:
        client.close()


def test_a_kept_worker_serves_the_next_run_as_a_new_one_would(tmp_path):
    """Unsandboxed, a finished run's worker serves the next client (no start): the next
    target's code, in an emptied working directory; a kept worker that died is not used."""
    first, started = _run(build_target(tmp_path / "first", [_leaving("first")]))
    second, again = _run(build_target(tmp_path / "second", [_leaving("second")]))
    assert first[0] == "first" and second[0] == "second"
    assert second[1] == first[1] and again == 0, "the second run started a worker of its own"
    assert second[2] == [], "what the first run left was still there"
    os.kill(first[1], signal.SIGKILL)  # the kept worker dies while it waits
    third, starts = _run(build_target(tmp_path / "third", [_leaving("third")]))
    assert third[0] == "third" and third[1] != first[1] and starts == 1


def test_the_watch_needs_no_torch_dynamo_and_an_optimizer_finds_it_imported(tmp_path, monkeypatch):
    """torch imports torch._dynamo (a second or more) the first time an optimizer is made, and
    would at a dispatch mode's first operation, but the by-hand watch opts out of that
    (graders/worker/by_hand.py): a watched call runs without it. Before a scenario that makes an
    optimizer, the worker imports it and forks a new lesson process, so no check's clock
    pays for it."""
    import graders.client

    monkeypatch.setattr(graders.client, "_keeps_idle_workers", lambda: False)  # a new worker
    code = """
        def perplexity(loss):
            import sys, torch
            torch.ones(2) * loss  # an operation the watch sees
            return "torch._dynamo" in sys.modules
    """
    target = build_target(tmp_path, [Variant("objective", "perplexity", "dynamo", code)])
    rule = {"ops": ["aten::exp"], "allow": [], "message": "perplexity by hand"}
    client = WorkerClient(target)
    try:
        plain = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
        watched = client.call("objective.perplexity", [1.0], {}, timeout=60, rule=rule)[0]
        client._prepare(dynamo=True)  # what a scenario in OPTIMIZING_SCENARIOS asks first
        after = client.call("objective.perplexity", [1.0], {}, timeout=60)[0]
    finally:
        client.close()
    assert (plain, watched, after) == (False, False, True)


PROBE = r"""
import os, socket, time

def look(paths, port):
    found = {"root": sorted(os.listdir("/")), "uid": os.getuid(), "readable": [],
             "network": False, "children": 0}
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.read(1)
            found["readable"].append(path)
        except OSError:
            pass
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        found["network"] = True
    except OSError:
        pass
    kids = []
    try:
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            kids.append(pid)
    except OSError:
        pass
    finally:
        for pid in kids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    found["children"] = len(kids)
    return found
"""


@linux_only
@needs_bwrap
def test_sandbox_isolates_the_worker(tmp_path, listener):
    target = tmp_path / "pkg"
    target.mkdir()
    (target / "probe.py").write_text(PROBE)
    (target / "link.py").symlink_to(ROOT / "solutions" / "embeddings.py")
    secrets = [
        str(ROOT / "solutions" / "embeddings.py"),
        str(ROOT / "graders" / "hidden" / f"test_{LESSON}.py"),
        str(ROOT / "course" / "lessons.toml"),
        "/etc/passwd",
        str(Path.home()),
    ]
    client = WorkerClient(target, sandbox=True)
    try:
        limits = client.limits()
        found, _ = client.call("probe.look", [secrets, listener], {}, 60)
    finally:
        client.close()
    assert limits["CapEff"] == 0 and limits["CapBnd"] == 0 and limits["NoNewPrivs"] == 1
    assert limits["RLIMIT_NPROC"][1] <= 64 and limits["RLIMIT_AS"][1] <= 4 << 30
    assert limits["cwd"] == "/tmp"
    # The only part of the repository on the worker's path may be the virtualenv (nox keeps
    # it in .nox/ inside the checkout); the checkout itself, with solutions/, must not be.
    venv = str(Path(sys.prefix).resolve())
    assert not any(
        p.startswith(str(ROOT)) and not p.startswith(venv) for p in limits["sys_path"]
    ), limits["sys_path"]
    assert found["uid"] != 0
    assert found["readable"] == []
    assert not found["network"]
    assert found["children"] < 64
    assert set(found["root"]) <= {
        "usr",
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "etc",
        "proc",
        "dev",
        "tmp",
        "home",
        "opt",  # /opt/course/gpt: the provided package, read-only (graders/sandbox.py)
        *_python_tops(),
    }


def _python_tops() -> set[str]:
    return {Path(p).resolve().parts[1] for p in (sys.prefix, sys.base_prefix, sys.executable)}


@linux_only
@needs_bwrap
def test_a_kept_sandboxed_worker_grades_the_targets_files_as_they_are_now(tmp_path):
    """--watch --sandbox: the next run of the same target takes the kept sandboxed worker (no
    start), whose sandbox binds a copy made again from the files as they are now; a run of
    another target starts its own, and only one sandboxed worker is kept in all."""
    target = build_target(tmp_path / "watched", [_leaving("first")])
    first, started = _run(target, sandbox=True)
    path = target / "objective.py"
    path.write_text(path.read_text().replace("first", "second"))
    (target / "new_module.py").write_text("")
    second, again = _run(target, sandbox=True)
    assert (first[0], second[0]) == ("first", "second"), "the kept worker graded an old copy"
    assert started == 1 and again == 0, "the second run started a sandboxed worker of its own"
    # what a sandbox's /tmp holds from the start (mount points) stays; the first run's file goes
    assert second[2] == first[2], "what the first run left in the working directory was there"
    other, starts = _run(build_target(tmp_path / "other", [_leaving("other")]), sandbox=True)
    assert other[0] == "other" and starts == 1
    import graders.client

    kept = [
        key for key in graders.client._IDLE if key[0] == "sandbox" and graders.client._IDLE[key]
    ]
    assert len(kept) == 1 and kept[0][1] == str((tmp_path / "other" / "submission").resolve())


@pytest.mark.slow
@pytest.mark.parametrize("binding", ["default-argument", "name-built-at-run-time"])
def test_by_hand_rule_holds_in_the_sandbox(tmp_path, binding):
    """What autograde runs: the code is read in the checker, the watch runs in the sandbox."""
    import graders

    require("bubblewrap")
    target = build_target(tmp_path)
    (target / "objective.py").write_text(objective_with(BINDINGS[binding]))
    report = graders.grade(
        target,
        lessons=["objective"],
        hidden=True,
        sandbox=True,
        functions=["cross_entropy"],
        json_path=tmp_path / "r.json",
    )
    checks = report["lessons"][0]["checks"]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    assert all("by hand" in (c["hint"] or "") for c in checks), [c["hint"] for c in checks]


def test_the_private_copy_lies_in_a_folder_only_its_owner_enters(tmp_path):
    """The copy the sandbox binds is readable by the sandbox's own user, inside a folder no
    other user of the machine may enter (a killed checker leaves it; it holds student code),
    named with the checker's process id for the next autograde to remove."""
    import shutil
    import stat

    from graders import sandbox

    target = tmp_path / "exercises"
    target.mkdir()
    (target / "embeddings.py").write_text("# mine\n")
    copy = sandbox._private_copy(target, sandbox.LIMITS)
    holder = os.path.dirname(copy)
    try:
        assert stat.S_IMODE(os.stat(holder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(copy).st_mode) == 0o755
        assert (Path(copy) / "embeddings.py").read_text() == "# mine\n"
        assert os.path.basename(holder).startswith(f"grading-sandbox-{os.getpid()}-")
        sandbox.refresh_copy(copy, target)  # the copy a kept worker renews, in place
    finally:
        sandbox._copies.remove(copy)
        shutil.rmtree(holder)
