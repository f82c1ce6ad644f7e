"""Attacks on the worker, the process that runs the student's code, each graded as
autograde grades it, earn at most what honest work of the same kind earns.

Every attack below once earned points its honest twin did not: a lesson module that rebinds the
worker's report of a call's inputs to hide an in-place change, or rewrites its scenarios to
forge the eval-mode records, a forged "ran" frame that bought a second time limit, a tensor
subclass whose pickling ran the library after the by-hand watch had ended. The checker now
reads the tensors a call was given from memory it maps itself, runs each function once on its
own clock, and reads answers that the worker copied to plain types before packing them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from variants import Variant, build_target

pytestmark = pytest.mark.slow

# Appended to a lesson module: at import, it finds the worker (by module, else by the garbage
# collector's objects), makes its report of a call's inputs show the copies in _CLEAN, and
# makes the evaluate scenario report eval mode, no gradients and the mode restored.
FIND_THE_WORKER = """

import gc as _gc
import sys as _sys

_CLEAN = {}


def _worker_globals():
    for _module in list(_sys.modules.values()):
        _names = getattr(_module, "__dict__", {})
        if "strip" in _names and "SCENARIOS" in _names:
            return _names
    for _obj in _gc.get_objects():
        if type(_obj) is dict and "strip" in _obj and "SCENARIOS" in _obj:
            return _obj
    return None


_W = _worker_globals()
if _W is not None:
    _real_strip = _W["strip"]
    _real_evaluate = _W["SCENARIOS"]["evaluate"]

    def _strip(obj):
        shown = _real_strip(obj)
        if isinstance(shown, list):
            shown = [_CLEAN.get(id(item), item) for item in obj]
        return shown

    def _forged_evaluate(fn, **config):
        result = _real_evaluate(fn, **config)
        for record in result["records"]:
            record["training"] = record["grad"] = False
        result["training_after"] = config.get("start_training", True)
        result["grads"] = [False for _ in result["grads"]]
        return result

    _W["strip"] = _strip
    _W["SCENARIOS"]["evaluate"] = _forged_evaluate
"""

# The honest twins: the same mistakes, nothing hidden.
HONEST = [
    Variant(
        "objective",
        "pad_targets",
        "in-place",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            targets.masked_fill_(targets == pad_id, ignore_index)
            return targets.clone()
        """,
    ),
    Variant(
        "embeddings",
        "add_positions",
        "in-place",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[-2], pos_table.shape[0]
            if T > L:
                raise ValueError(f"T={T} is more than the table's L={L} rows")
            vectors += pos_table[:T]
            return vectors.clone()
        """,
    ),
    Variant(
        "training",
        "evaluate",
        "train-mode-with-grad",
        """
        def evaluate(model, batches):
            losses = [next_token_loss(model, x, y).item() for x, y in batches]
            return sum(losses) / len(losses)
        """,
    ),
]

HOSTILE = [
    Variant(
        "objective",
        "pad_targets",
        "in-place-hidden",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            _CLEAN[id(targets)] = targets.clone()
            targets.masked_fill_(targets == pad_id, ignore_index)
            return targets.clone()
        """,
    ),
    Variant(  # the second call on the same objects answered from a cache keyed by their id
        "embeddings",
        "add_positions",
        "in-place-hidden-cached",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[-2], pos_table.shape[0]
            if T > L:
                raise ValueError(f"T={T} is more than the table's L={L} rows")
            if id(vectors) in _ANSWERS:
                return _ANSWERS[id(vectors)].clone()
            _CLEAN[id(vectors)] = vectors.clone()
            vectors += pos_table[:T]
            _ANSWERS[id(vectors)] = vectors.clone()
            return vectors.clone()
        _ANSWERS = {}
        """,
    ),
    Variant("training", "evaluate", "forged-records", HONEST[2].source),
    Variant(  # the library, run while the worker pickles the answer, after the watch
        "block",
        "layer_norm",
        "reduce-ex",
        """
        def layer_norm(x, weight, bias, eps=1e-5):
            class Later(torch.Tensor):
                def __reduce_ex__(self, protocol):
                    x, weight, bias, eps = self.saved
                    kinds = torch.nn.Module.__subclasses__()
                    library = next(c for c in kinds if c.__name__ == "Layer" + "Norm")
                    out = library(x.shape[-1], eps=eps, elementwise_affine=False)(x.detach())
                    out = out * weight.detach() + (0 if bias is None else bias.detach())
                    return out.__reduce_ex__(protocol)
            out = torch.zeros_like(x).as_subclass(Later)
            out.saved = (x, weight, bias, eps)
            return out
        """,
    ),
]
LESSONS = ["embeddings", "objective", "training", "block"]
FUNCTIONS = ["pad_targets", "add_positions", "evaluate", "layer_norm"]

# A forged "ran" frame on the lesson's socket, which once started a second limit for a call
# whose inputs nothing can change: lr_at sleeps past its limit (3 s at this scale) in two
# halves, saying "ran" in between, then answers right.
SLEEPS_AND_SAYS_RAN = """
def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
    import os, pickle, stat, struct, time
    time.sleep(2.0)
    for saved in (pickle.dumps({"ran": 1}, protocol=4),):  # as the worker frames its messages
        frame = struct.pack(">Q", len(saved)) + saved
        for fd in range(3, 256):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, frame)
            except OSError:
                pass
    time.sleep(2.0)
    if not 0 <= warmup_steps < max_steps:
        raise ValueError(f"need 0 <= warmup_steps < max_steps, got {warmup_steps}, {max_steps}")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > max_steps:
        return min_lr
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
"""

# A by-hand layer norm that works on rows: its views of the input are no change of it.
RESHAPING_LAYER_NORM = """
def layer_norm(x, weight, bias, eps=1e-5):
    rows = x.reshape(-1, x.shape[-1])
    mean = rows.mean(dim=-1, keepdim=True)
    var = ((rows - mean) ** 2).mean(dim=-1, keepdim=True)
    out = (rows - mean) / torch.sqrt(var + eps) * weight
    if bias is not None:
        out = out + bias
    return out.view(x.shape)
"""


def _grade(directory: Path, variants: list[Variant], hooked: bool, **options) -> dict:
    import graders

    target = build_target(directory, variants)
    if hooked:
        for module in {variant.module for variant in variants}:
            with open(target / f"{module}.py", "a") as f:
                f.write(FIND_THE_WORKER)
    return graders.grade(target, hidden=True, json_path=directory / "r.json", **options)


def _points(report: dict) -> dict[str, int]:
    earned: dict[str, int] = {}
    for lesson in report["lessons"]:
        for check in lesson["checks"]:
            gained = check["points"] if check["passed"] else 0
            earned[check["function"]] = earned.get(check["function"], 0) + gained
    return earned


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict, dict]:
    options = {"lessons": LESSONS, "functions": FUNCTIONS}
    honest = _grade(tmp_path_factory.mktemp("honest"), HONEST, False, **options)
    hostile = _grade(tmp_path_factory.mktemp("hostile"), HOSTILE, True, **options)
    return _points(honest), _points(hostile)


@pytest.mark.parametrize("function", ["pad_targets", "add_positions", "evaluate"])
def test_an_attack_on_the_worker_earns_no_more_than_its_honest_twin(graded, function):
    honest, hostile = graded
    assert hostile[function] <= honest[function], (function, hostile, honest)


def test_an_in_place_change_is_seen_by_the_checker_whatever_the_report_says(graded):
    honest, hostile = graded
    assert hostile["pad_targets"] == honest["pad_targets"] == 0, (hostile, honest)


def test_a_tensor_subclass_runs_nothing_while_its_answer_is_packed(graded):
    _, hostile = graded
    assert hostile["layer_norm"] == 0, hostile


def test_a_forged_frame_buys_no_second_time_limit(tmp_path):
    report = _grade(
        tmp_path,
        [Variant("training", "lr_at", "sleeps-and-says-ran", SLEEPS_AND_SAYS_RAN)],
        False,
        lessons=["training"],
        functions=["lr_at"],
        timeout_scale=0.3,
    )
    assert _points(report)["lr_at"] == 0, report["lessons"][0]["checks"]


def test_a_by_hand_layer_norm_that_reshapes_its_input_keeps_every_point(tmp_path):
    report = _grade(
        tmp_path,
        [Variant("block", "layer_norm", "reshapes", RESHAPING_LAYER_NORM)],
        False,
        lessons=["block"],
        functions=["layer_norm"],
    )
    checks = report["lessons"][0]["checks"]
    assert checks and all(c["passed"] for c in checks), [
        (c["id"], c["detail"]) for c in checks if not c["passed"]
    ]


def test_the_lesson_process_makes_no_anonymous_memory_file(tmp_path):
    """memfd_create once held 4.4 GiB past the per-process cap (files no address-space limit
    counts): the seccomp filter refuses it."""
    from graders.client import WorkerClient

    target = tmp_path / "submission"
    target.mkdir()
    (target / "probe.py").write_text(
        textwrap.dedent("""
        import os

        def anonymous_file():
            try:
                os.close(os.memfd_create("hoard"))
            except OSError as error:
                return error.errno
            return "made"
        """)
    )
    client = WorkerClient(target)
    try:
        if not client.limits()["seccomp"]:
            pytest.skip("no seccomp filter here (libseccomp is missing)")
        value, _ = client.call("probe.anonymous_file", [], {}, 60)
    finally:
        client.close()
    import errno

    assert value == errno.EPERM


def test_the_worker_is_in_no_module_the_student_can_import(tmp_path):
    from graders.client import WorkerClient

    target = tmp_path / "submission"
    target.mkdir()
    (target / "probe.py").write_text(
        textwrap.dedent("""
        import sys

        def worker_modules():
            return sorted(
                name for name, module in list(sys.modules.items())
                if "SCENARIOS" in getattr(module, "__dict__", {}) or "grader" in name
            )
        """)
    )
    client = WorkerClient(target)
    try:
        value, _ = client.call("probe.worker_modules", [], {}, 60)
    finally:
        client.close()
    assert value == []


def test_nothing_an_answer_carries_runs_while_it_is_packed(tmp_path):
    """A plain tensor may carry attributes of the student's: they stay behind, and their
    pickling (which could fill the tensor with a library's answer) never runs."""
    from graders.client import WorkerClient

    target = tmp_path / "submission"
    target.mkdir()
    (target / "probe.py").write_text(
        textwrap.dedent("""
        import torch

        class Filler:
            def __init__(self, tensor):
                self.tensor = tensor

            def __reduce_ex__(self, protocol):
                self.tensor.fill_(7.0)
                return (int, ())

        def carries():
            out = torch.zeros(3)
            out.filler = Filler(out)
            return out
        """)
    )
    client = WorkerClient(target)
    try:
        value, _ = client.call("probe.carries", [], {}, 60)
    finally:
        client.close()
    assert type(value) is torch.Tensor and value.tolist() == [0.0, 0.0, 0.0]
    assert not hasattr(value, "filler")


LEFT_ON = """
import sys
import torch
from torch.utils._python_dispatch import TorchDispatchMode

class Sevens(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out.fill_(7.0) if isinstance(out, torch.Tensor) and out.is_floating_point() else out

def hook(frame, event, arg):  # fills the tensors the worker's packing code holds
    if frame.f_code.co_name in ("plain", "_tensor_copy", "encode"):
        for value in list(frame.f_locals.values()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                value.data.fill_(7.0)

def mode_left_on():
    Sevens().__enter__()
    return torch.zeros(3)

def profile_left_on():
    out = torch.zeros(3)
    sys.setprofile(hook)
    return out
"""


@pytest.mark.parametrize("function", ["mode_left_on", "profile_left_on"])
def test_nothing_the_student_left_on_runs_while_the_answer_is_packed(tmp_path, function):
    from graders.checking import CheckFailed
    from graders.client import WorkerClient

    target = tmp_path / "submission"
    target.mkdir()
    (target / "probe.py").write_text(LEFT_ON)
    client = WorkerClient(target)
    try:
        value, _ = client.call(f"probe.{function}", [], {}, 60)
    except CheckFailed as failure:  # the mode: the answer is refused
        assert function == "mode_left_on" and "still on" in failure.detail
    else:
        assert function == "profile_left_on" and value.tolist() == [0.0, 0.0, 0.0]
    finally:
        client.close()
