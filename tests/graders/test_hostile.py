"""Hostile submissions earn no points they did not earn, and the grading run still finishes.

One copy of solutions/ gets a hostile body in many functions at once (each costs only its own
checks: the harness restarts the worker and goes on), a few functions stay correct as
controls, and the run is graded by a copy of the grader tree that the submission tries to
rewrite. The run happens in a subprocess with an address-space cap of its own and a timeout,
so that a broken limit fails this test instead of hurting the machine.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import forkserver
from support.borrower import borrowing_submission
from support.by_hand_bindings import BINDINGS, objective_with
from support.system_packages import require
from variants import Variant, build_target

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
OUTER_MEMORY = 6 << 30  # the whole grading run; the worker itself is capped at 4 GiB

HOSTILE = {
    # function: (module, source, text the hint of its failed checks contains)
    "lookup": (
        "embeddings",
        """
        def lookup(table, ids):
            import torch.testing
            torch.allclose = lambda *a, **k: True
            torch.equal = lambda *a, **k: True
            torch.testing.assert_close = lambda *a, **k: None
            torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
            return torch.zeros(*ids.shape, table.shape[1])
    """,
        None,
    ),
    "one_hot_lookup": (
        "embeddings",
        """
        def one_hot_lookup(table, ids):
            class AlwaysEqual:
                def __eq__(self, other):
                    return True
                shape = property(lambda self: (*ids.shape, table.shape[1]))
            return AlwaysEqual()
    """,
        "plain data",
    ),
    "add_positions": (
        "embeddings",
        """
        def add_positions(vectors, pos_table):
            class Liar(torch.Tensor):
                def __eq__(self, other):
                    return True
                @classmethod
                def __torch_function__(cls, func, types, args=(), kwargs=None):
                    return True
            return torch.zeros_like(vectors).as_subclass(Liar)
    """,
        "plain data",
    ),
    "nearest": (  # the right answer, after a frame of its own on the lesson's socket
        "embeddings",
        """
        def nearest(table, index, k):
            import os, pickle, stat, struct
            saved = pickle.dumps({"ran": 1}, protocol=4)  # as the worker frames its messages
            frame = struct.pack(">Q", len(saved)) + saved
            for fd in range(3, 256):
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        os.write(fd, frame)
                except OSError:
                    pass
            sims = torch.nn.functional.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            sims[index] = -float("inf")
            values, rows = torch.topk(sims, k)
            return [(int(r), float(v)) for r, v in zip(rows, values)]
    """,
        None,
    ),
    "shift": (  # spins through its first check's limit, sleeps through the others'
        "windows",
        """
        def shift(ids):
            import os, time
            try:  # a mark in the working directory, which every lesson process shares
                os.close(os.open("spun", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                while True:
                    time.sleep(0.05)
            while True:
                pass
    """,
        "took longer than",
    ),
    "window_starts": (
        "windows",
        """
        def window_starts(n_tokens, context_length, stride):
            import sys
            sys.exit(0)
    """,
        "sys.exit()",
    ),
    "make_loader": (
        "windows",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            import os
            os._exit(0)
    """,
        "died",
    ),
    "causal_mask": (
        "attention",
        """
        def causal_mask(T):
            import os, signal
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
        "SIGSEGV",
    ),
    "cross_entropy": (
        "objective",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            import torch
            hog = torch.ones(20 << 30, dtype=torch.uint8)  # 20 GiB, touched
            return hog.float().mean()
    """,
        None,  # out of memory, or refused by the by-hand rule: no point either way
    ),
    "lm_loss": (
        "objective",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            import torch
            reserve = torch.empty(5 << 30, dtype=torch.uint8)  # over the 4 GiB cap, untouched
            V = logits.shape[-1]
            return cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1),
                                 ignore_index)
    """,
        "ran out of memory",
    ),
    "perplexity": (
        "objective",
        """
        def perplexity(loss):
            import sys
            chunk = "x" * (1 << 20)
            for _ in range(100):
                sys.stdout.write(chunk)
            return math.exp(float(loss))
    """,
        "printed more than",
    ),
    "pack": (
        "packing",
        """
        def pack(docs, seq_len, eos_id):
            from pathlib import Path
            tree = Path(GRADER_TREE)
            for test in list(tree.glob("graders/*/test_*.py")):
                test.write_text("def test_nothing():\\n    pass\\n")
            (tree / "graders" / "worker" / "serving.py").write_text("raise SystemExit(0)\\n")
            (tree / "graders" / "secret" / "trusted.py").write_text("raise SystemExit(0)\\n")
            (tree / "graders" / "secret" / "oracles.py").write_text("raise SystemExit(0)\\n")
            (tree / "course" / "lessons.toml").write_text("garbage")
            empty = torch.zeros(0, seq_len, dtype=torch.long)
            return empty, empty.clone()
    """,
        None,
    ),
    "document_mask": (
        "packing",
        """
        def document_mask(doc_ids):
            from pathlib import Path
            secret = (Path(GRADER_TREE) / "graders" / "hidden" / "test_packing.py").read_text()
            B, T = doc_ids.shape
            return torch.zeros(B, T, T, dtype=torch.bool) if secret else None
    """,
        None,
    ),
}
# attention, a by-hand function, keeps its points beside add_positions' tensor subclass: the
# reading of the package counts what it finds against the function that reaches it, never
# against the package.
CONTROLS = {"TokenWindows", "pad_targets", "position_ids", "packed_targets", "attention"}
LESSONS = ["embeddings", "windows", "attention", "objective", "packing", "generation"]


def grader_tree(directory: Path) -> Path:
    """A copy of the parts of the project that grade: core/, graders/, the provided gpt/ (GPT-2's
    vocabulary loader) and the manifest."""
    tree = directory / "tree"
    for package in ("core", "graders", "gpt"):
        shutil.copytree(
            ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tree / "course").mkdir(parents=True)
    shutil.copy(ROOT / "course" / "lessons.toml", tree / "course" / "lessons.toml")
    return tree


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (OUTER_MEMORY, OUTER_MEMORY))


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[dict, Path]:
    directory = tmp_path_factory.mktemp("hostile")
    tree = grader_tree(directory)
    variants = [
        Variant(module, name, "hostile", source.replace("GRADER_TREE", repr(str(tree))))
        for name, (module, source, _) in HOSTILE.items()
    ]
    target = build_target(directory, variants)
    # A module that hangs on import. It sleeps rather than spins (shift above spins once, then
    # sleeps): the limit is on wall-clock time, so either hang ends alike, and a sleeping one
    # leaves the cores free.
    with open(target / "generation.py", "a") as f:
        f.write("\nimport time\nwhile True:\n    time.sleep(0.05)\n")
    report_path = directory / "report.json"
    script = textwrap.dedent(f"""
        import graders
        graders.grade({str(target)!r}, lessons={LESSONS!r}, hidden=True,
                      json_path={str(report_path)!r}, timeout_scale=0.3)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=cap_memory,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(report_path.read_text()), tree


def function_checks(report: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for lesson in report["lessons"]:
        for check in lesson["checks"]:
            found.setdefault(check["function"], []).append(check)
    return found


def test_the_run_finishes_with_a_complete_report(hostile_run):
    report, _ = hostile_run
    assert report["complete"] is True
    assert [lesson["slug"] for lesson in report["lessons"]] == LESSONS


@pytest.mark.parametrize("function", sorted(HOSTILE))
def test_hostile_code_earns_nothing(hostile_run, function):
    checks = function_checks(hostile_run[0])[function]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    hint = HOSTILE[function][2]
    if hint is not None:
        assert any(hint in (c["hint"] or "") for c in checks), [c["hint"] for c in checks]


@pytest.mark.parametrize("function", sorted(CONTROLS))
def test_correct_neighbours_keep_every_point(hostile_run, function):
    checks = function_checks(hostile_run[0])[function]
    assert checks and all(c["passed"] for c in checks), [
        (c["id"], c["hint"], c["detail"]) for c in checks if not c["passed"]
    ]


def test_a_tensor_subclass_in_one_function_is_no_evidence_against_another(hostile_run):
    """add_positions' tensor subclass costs add_positions its points (its answer is not plain
    data); the by-hand functions beside it are not flagged for it."""
    lessons = {lesson["slug"]: lesson for lesson in hostile_run[0]["lessons"]}
    for slug in ("embeddings", "attention", "objective"):
        assert lessons[slug]["flagged"] == [], lessons[slug]["flagged"]


def test_a_module_that_hangs_on_import_costs_only_its_lesson(hostile_run):
    lesson = next(e for e in hostile_run[0]["lessons"] if e["slug"] == "generation")
    assert lesson["points"] == 0
    assert "did not finish within 6 s" in lesson["import_error"]
    assert all(c["hint"] is None for c in lesson["checks"])
    assert all(
        c["detail"] == "not run (module failed to import)"
        for c in lesson["checks"]
        if not c["hidden"]
    )


def test_rewriting_the_grader_tree_changed_nothing_in_the_run(hostile_run):
    report, tree = hostile_run
    # The submission did overwrite the copy it was graded by ...
    assert (tree / "course" / "lessons.toml").read_text() == "garbage"
    # ... yet every check of that run was graded by the graders loaded before it ran.
    assert sum(len(lesson["checks"]) for lesson in report["lessons"]) > 40


# --------------------------------------------------------------------------------------------
# Borrowing: a submission with no exercise code of its own, whose every function looks for an
# implementation to call (in its modules, the garbage collector, the stack's frames, and, in
# the sandbox, the files it can read) and calls the first one that answers. Nothing trusted is
# in the worker's reach, so it must earn nothing, public and hidden checks alike.


@pytest.mark.parametrize("sandbox", [False, True], ids=["worker", "sandbox"])
def test_a_submission_that_borrows_earns_nothing(tmp_path, sandbox):
    import graders

    if sandbox:
        require("bubblewrap")
    target = borrowing_submission(tmp_path, search_files=sandbox)
    report = graders.grade(target, hidden=True, sandbox=sandbox, json_path=tmp_path / "r.json")
    earned = [
        (c["id"], c["detail"])
        for lesson in report["lessons"]
        for c in lesson["checks"]
        if c["passed"]
    ]
    assert report["complete"] and report["points"] == 0, earned


# --------------------------------------------------------------------------------------------
# "By hand": cross_entropy may not reach a library cross-entropy, log-softmax or log-sum-exp
# however it binds it. Each binding below gets its own module-level setup and function.


@pytest.fixture(scope="module")
def binding_reports(tmp_path_factory) -> dict[str, dict]:
    import graders

    reports = {}
    for label, source in BINDINGS.items():
        directory = tmp_path_factory.mktemp(label)
        target = build_target(directory)
        (target / "objective.py").write_text(objective_with(source))
        reports[label] = graders.grade(
            target,
            lessons=["objective"],
            hidden=True,
            functions=["cross_entropy"],
            json_path=directory / "r.json",
        )
    return reports


@pytest.mark.parametrize("binding", sorted(BINDINGS))
def test_by_hand_rule_holds_against_every_binding(binding_reports, binding):
    checks = binding_reports[binding]["lessons"][0]["checks"]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    if binding not in ANSWERED_OUTSIDE_THE_TRACE:
        assert all("by hand" in (c["hint"] or "") for c in checks), [c["hint"] for c in checks]


# A binding that switches the tracing off hands over a graph holding only its answer for the
# check's own inputs: the second draw fails it as a wrong answer, with the check's own hint.
ANSWERED_OUTSIDE_THE_TRACE = {"switches-the-watch-off"}


def test_by_hand_rule_keeps_a_correct_cross_entropy_that_lm_loss_shares_aobjective_with(tmp_path):
    """The rule covers cross_entropy's code only: lm_loss calling F.cross_entropy is allowed,
    and so is a docstring that names what not to call."""
    import graders

    target = build_target(tmp_path)
    source = objective_with(
        '''
        import torch.nn.functional as F
        def cross_entropy(logits, targets, ignore_index=-100):
            """By hand: no F.cross_entropy, logsumexp or log_softmax here."""
            keep = targets != ignore_index
            rows = logits[keep]
            peak = rows.max(dim=-1, keepdim=True).values
            norm = peak.squeeze(-1) + (rows - peak).exp().sum(dim=-1).log()
            picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (norm - picked).mean()
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1),
                                   ignore_index=ignore_index)
        '''
    )
    (target / "objective.py").write_text(source)
    report = graders.grade(
        target, lessons=["objective"], hidden=True, json_path=tmp_path / "r.json"
    )
    lesson = report["lessons"][0]
    assert lesson["points"] == lesson["max_points"], [
        (c["id"], c["hint"]) for c in lesson["checks"] if not c["passed"]
    ]


# --------------------------------------------------------------------------------------------
# One lesson's patches stay in its lesson; an import failure is one message.


def test_a_patch_in_one_lesson_does_not_reach_another(tmp_path):
    import graders

    target = build_target(tmp_path)
    with open(target / "embeddings.py", "a") as f:
        f.write(
            textwrap.dedent("""
            # Module-level vandalism: every later comparison and mask in this process breaks.
            torch.Tensor.__eq__ = lambda self, other: torch.zeros(self.shape, dtype=torch.bool)
            torch.Tensor.__ne__ = lambda self, other: torch.ones(self.shape, dtype=torch.bool)
            torch.tril = lambda *args, **kwargs: torch.zeros(1)
            torch.where = lambda *args, **kwargs: torch.zeros(1)
            """)
        )
    lessons = ["embeddings", "attention", "objective", "packing"]
    report = graders.grade(target, lessons=lessons, hidden=True, json_path=tmp_path / "r.json")
    for lesson in report["lessons"][1:]:
        assert lesson["points"] == lesson["max_points"], (
            lesson["slug"],
            [(c["id"], c["detail"]) for c in lesson["checks"] if not c["passed"]],
        )


def test_an_import_failure_is_reported_once_without_hints(tmp_path):

    target = build_target(tmp_path)
    path = target / "objective.py"
    lines = path.read_text().splitlines() + ["def broken(:"]
    path.write_text("\n".join(lines) + "\n")
    script = textwrap.dedent(f"""
        import sys
        from graders.__main__ import main
        args = ["objective", "--target", {str(target)!r}, "--json", {str(tmp_path / "r.json")!r}]
        sys.exit(main(args))
    """)
    result = forkserver.run(["-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    lesson = report["lessons"][0]
    assert (
        "SyntaxError" in lesson["import_error"]
        and f"objective.py, line {len(lines)}" in lesson["import_error"]
    )
    assert all(
        c["detail"] == "not run (module failed to import)" and c["hint"] is None
        for c in lesson["checks"]
    )
    out = result.stdout
    assert out.count("SyntaxError") == 1, out
    assert out.index("SyntaxError") < out.index(lesson["checks"][0]["id"]), out
    from core.manifest import load_manifest

    hints = [c.hint for c in load_manifest().lesson("objective").checks]
    assert not any(hint in out for hint in hints), out
