"""By-hand rules hold against every route to the forbidden computation (issue 18).

Two layers, each tested on its own: the whole grading (the checker reads every file of the
package, then the worker watches the call), and the worker's watch alone (the rule sent with
the call, no reading), for the routes that get past a reading: names built at run time.
Every route loses every point of cross_entropy; a correct by-hand version keeps them (see
test_graders_hostile.py's control).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from variants import build_target, replace_definition

from core.manifest import load_manifest
from graders.client import StudentError, WorkerClient

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RULE = load_manifest().lesson("objective").rule("cross_entropy")

# Routes the reading of the code catches (or, where it does not, the watch): each one a
# module-level setup and function, and other files of the package.
ROUTES = {
    "another-thread": (
        """
        import threading
        import torch.nn.functional as F
        def cross_entropy(logits, targets, ignore_index=-100):
            box = []
            work = lambda: box.append(F.cross_entropy(logits, targets, ignore_index=ignore_index))
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
            return box[0]
        """,
        {},
    ),
    "another-process": (
        """
        import os, pickle
        import torch.nn.functional as F
        def cross_entropy(logits, targets, ignore_index=-100):
            read, write = os.pipe()
            if os.fork() == 0:
                os.write(write, pickle.dumps(F.cross_entropy(logits, targets).item()))
                os._exit(0)
            return torch.tensor(pickle.loads(os.read(read, 1000)))
        """,
        {},
    ),
    "dispatch-switched-off": (
        """
        import torch
        def cross_entropy(logits, targets, ignore_index=-100):
            with torch._C._DisableTorchDispatch():
                loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=ignore_index)
            return loss + 0
        """,
        {},
    ),
    "unlisted-op": (
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            rows = logits[keep]
            norm = rows.logcumsumexp(dim=-1)[:, -1]
            picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (norm - picked).mean()
        """,
        {},
    ),
    "another-module": (
        """
        from .lossy import loss_of
        def cross_entropy(logits, targets, ignore_index=-100):
            return loss_of(logits, targets, ignore_index)
        """,
        {
            "lossy.py": """
            import torch.nn.functional as F
            def loss_of(logits, targets, ignore_index):
                return F.cross_entropy(logits, targets, ignore_index=ignore_index)
            """
        },
    ),
}


def _objective_with(code: str) -> str:
    source = (ROOT / "solutions" / "objective.py").read_text()
    stub = replace_definition(source, "cross_entropy", "def cross_entropy(*a, **k): pass")
    return stub + "\n" + textwrap.dedent(code)


def _target(directory: Path, code: str, files: dict[str, str] | None = None) -> Path:
    target = build_target(directory)
    (target / "objective.py").write_text(_objective_with(code))
    for name, text in (files or {}).items():
        (target / name).write_text(textwrap.dedent(text))
    return target


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_loses_every_point(tmp_path, route):
    import graders

    code, files = ROUTES[route]
    report = graders.grade(
        _target(tmp_path, code, files),
        lessons=["objective"],
        hidden=True,
        functions=["cross_entropy"],
        json_path=tmp_path / "r.json",
    )
    checks = report["lessons"][0]["checks"]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    assert all("by hand" in (c["hint"] or "") for c in checks), [c["hint"] for c in checks]


# The watch alone: names built at run time, which no reading of the code can follow.
BUILT = 'getattr(torch, "_" + "C")'
WATCHED = {
    "thread-started-in-the-call": """
        import threading
        def cross_entropy(logits, targets, ignore_index=-100):
            box = []
            work = lambda: box.append(torch.nn.functional.cross_entropy(logits, targets))
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
            return box[0]
        """,
    "thread-started-at-import": """
        import queue, threading
        _jobs, _done = queue.Queue(), queue.Queue()
        def _serve():
            while True:
                logits, targets = _jobs.get()
                _done.put(torch.nn.functional.cross_entropy(logits, targets))
        threading.Thread(target=_serve, daemon=True).start()
        def cross_entropy(logits, targets, ignore_index=-100):
            _jobs.put((logits, targets))
            return _done.get()
        """,
    "dispatch-off-returned-as-is": f"""
        def cross_entropy(logits, targets, ignore_index=-100):
            with {BUILT}._DisableTorchDispatch():
                return torch.nn.functional.cross_entropy(logits, targets)
        """,
    "dispatch-off-then-an-allowed-op": f"""
        def cross_entropy(logits, targets, ignore_index=-100):
            with {BUILT}._DisableTorchDispatch():
                loss = torch.nn.functional.cross_entropy(logits, targets)
            return loss * 1.0
        """,
    "dispatch-off-into-a-watched-buffer": f"""
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            rows = logits[keep]
            norm = torch.zeros(rows.shape[0])
            with {BUILT}._DisableTorchDispatch():
                torch.logsumexp(rows, dim=-1, out=norm)
            picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (norm - picked).mean()
        """,
}


@pytest.fixture(scope="module")
def watched_client(tmp_path_factory):
    directory = tmp_path_factory.mktemp("watched")
    target = build_target(directory)
    for label, code in WATCHED.items():
        module = label.replace("-", "_")
        (target / f"{module}.py").write_text("import torch\n" + textwrap.dedent(code))
    client = WorkerClient(target)
    yield client
    client.close()


def test_the_lesson_process_has_its_seccomp_filter(watched_client):
    if not sys.platform.startswith("linux"):
        pytest.skip("seccomp is Linux's")
    assert watched_client.limits()["seccomp"] is True


@pytest.mark.parametrize("route", sorted(WATCHED))
def test_the_watch_alone_refuses_the_route(watched_client, route):
    watched_client.fresh()
    logits, targets = torch.randn(5, 7), torch.tensor([1, 0, 6, 2, 3])
    with pytest.raises(StudentError):  # the import fails, or the call is refused
        watched_client.call(
            f"{route.replace('-', '_')}.cross_entropy",
            [logits, targets],
            {},
            10,
            rule=RULE.as_request(),
        )


def test_the_watch_keeps_a_correct_by_hand_version(watched_client):
    watched_client.fresh()
    logits, targets = torch.randn(5, 7), torch.tensor([1, 0, 6, 2, 3])
    value, _ = watched_client.call(
        "objective.cross_entropy", [logits, targets], {}, 10, rule=RULE.as_request()
    )
    assert torch.allclose(value, torch.nn.functional.cross_entropy(logits, targets))
