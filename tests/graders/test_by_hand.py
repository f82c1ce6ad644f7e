"""By-hand rules hold against every route to the forbidden computation.

Two layers, each tested on its own: the whole grading (the checker reads every file of the
package for review, the worker traces the call, the checker judges and runs its graph), and
the graph alone (a traced call judged by graders/graph.py, no reading), for the routes that
get past a reading: names built at run time. Every route loses every point of the by-hand
function it takes (cross_entropy, layer_norm, gelu); a correct by-hand version keeps them,
however it makes its constants and indices.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from variants import build_target, replace_definition

from core.manifest import Rule, load_manifest
from graders import graph
from graders.checking import CheckFailed
from graders.client import StudentError, WorkerClient

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest()


@dataclass(frozen=True)
class ByHand:
    """A by-hand function: its lesson module, its parameters, its arguments as a call passes
    them, and the library call that computes it (which its rule forbids)."""

    module: str
    signature: str
    arguments: str
    library: str

    def rule(self, name: str) -> Rule:
        return MANIFEST.lesson(self.module).rule(name)


FUNCTIONS = {
    "cross_entropy": ByHand(
        "objective",
        "logits, targets, ignore_index=-100",
        "logits, targets, ignore_index",
        "torch.nn.functional.cross_entropy(logits, targets, ignore_index=ignore_index)",
    ),
    "layer_norm": ByHand(
        "block",
        "x, weight, bias, eps=1e-5",
        "x, weight, bias, eps",
        "torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)",
    ),
    "gelu": ByHand("block", "x", "x", "torch.nn.GELU(approximate='tanh')(x)"),
}


def _inputs(name: str) -> list:
    generator = torch.Generator().manual_seed(0)
    if name == "cross_entropy":
        return [torch.randn(5, 7, generator=generator), torch.tensor([1, 0, 6, 2, 3])]
    x = torch.randn(3, 8, generator=generator)
    if name == "layer_norm":
        return [x, torch.randn(8, generator=generator), torch.randn(8, generator=generator)]
    return [x]


def _expected(name: str, inputs: list) -> torch.Tensor:
    import torch.nn.functional as F

    if name == "cross_entropy":
        return F.cross_entropy(*inputs)
    if name == "layer_norm":
        x, weight, bias = inputs
        return F.layer_norm(x, x.shape[-1:], weight, bias)
    return F.gelu(inputs[0], approximate="tanh")


# Routes the operator graph refuses (and the reading flags where it can): each one a
# module-level setup and function ({name}, {signature}, {arguments}, {library} filled in per
# function), and other files of the package.
ROUTES = {
    "another-thread": (
        """
        import threading
        import torch
        def {name}({signature}):
            box = []
            thread = threading.Thread(target=lambda: box.append({library}))
            thread.start()
            thread.join()
            return box[0]
        """,
        {},
    ),
    "another-process": (
        """
        import os, pickle
        import torch
        def {name}({signature}):
            read, write = os.pipe()
            if os.fork() == 0:
                os.write(write, pickle.dumps({library}.tolist()))
                os._exit(0)
            return torch.tensor(pickle.loads(os.read(read, 1 << 20)))
        """,
        {},
    ),
    "dispatch-switched-off": (
        """
        import torch
        def {name}({signature}):
            with torch._C._DisableTorchDispatch():
                out = {library}
            return out + 0
        """,
        {},
    ),
    "another-module": (
        """
        from .helpers_{name} import compute_{name}
        def {name}({signature}):
            return compute_{name}({arguments})
        """,
        {
            "helpers_{name}.py": """
            import torch
            def compute_{name}({signature}):
                return {library}
            """
        },
    ),
    # Attacks on the graders' own names: a watch switched off through sys.modules, the library
    # reached through a class attribute; the answer computed by the library while it is pickled.
    "watch-replaced-through-sys-modules": (
        """
        import contextlib, sys
        import torch
        for _module in list(sys.modules.values()):
            try:
                if getattr(_module, "watched", None) is not None:
                    _module.watched = lambda *a, **k: contextlib.nullcontext()
            except Exception:
                pass
        class _Library:
            compute = staticmethod(lambda {signature}: {library})
        def {name}({signature}):
            return _Library.compute({arguments})
        """,
        {},
    ),
    "library-run-while-pickled": (
        """
        import torch
        def _library({signature}):
            return {library}
        class _Answer(torch.Tensor):
            inputs = ()
            def __reduce_ex__(self, protocol):
                return (torch.tensor, (_library(*_Answer.inputs).tolist(),))
        def {name}({signature}):
            _Answer.inputs = ({arguments},)
            return torch.zeros(()).as_subclass(_Answer)
        """,
        {},
    ),
}
# An op the rule's forbidden list does not name that computes the same thing: the rule's list
# of allowed ops refuses it (neither name is one the reading looks for).
UNLISTED = {
    "cross_entropy": """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            rows = logits[keep]
            norm = rows.logcumsumexp(dim=-1)[:, -1]
            picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (norm - picked).mean()
        """,
    "layer_norm": """
        import torch
        def layer_norm(x, weight, bias, eps=1e-5):
            rows = x.reshape(-1, 1, x.shape[-1]).transpose(0, 1)  # batch norm of one batch
            out = torch._native_batch_norm_legit(rows, None, None, True, 0.0, eps)[0]
            out = out.transpose(0, 1).reshape(x.shape) * weight
            return out if bias is None else out + bias
        """,
    "gelu": """
        import torch
        def gelu(x):
            return torch.ops.aten.gelu_(x.clone(), approximate="tanh")
        """,
}


def _fill(text: str, name: str) -> str:
    spec = FUNCTIONS[name]
    return textwrap.dedent(text).format(
        name=name, signature=spec.signature, arguments=spec.arguments, library=spec.library
    )


def _with(module: str, codes: dict[str, str]) -> str:
    """solutions/``module``.py with each function of ``codes`` replaced by its code."""
    source = (ROOT / "solutions" / f"{module}.py").read_text()
    for name in codes:
        source = replace_definition(source, name, f"def {name}(*a, **k): pass")
    return source + "".join("\n" + textwrap.dedent(code) for code in codes.values())


def _grade(directory: Path, module: str, codes: dict[str, str], files: dict[str, str]) -> dict:
    """The hidden and public checks of ``codes``'s functions, graded from a copy of
    solutions/ with those functions replaced (and ``files`` added)."""
    import graders

    target = build_target(directory)
    (target / f"{module}.py").write_text(_with(module, codes))
    for file, text in files.items():
        (target / file).write_text(textwrap.dedent(text))
    report = graders.grade(
        target,
        lessons=[module],
        hidden=True,
        functions=sorted(codes),
        json_path=directory / "r.json",
    )
    return report["lessons"][0]


def _route(route: str, names: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    if route == "unlisted-op":
        return {name: UNLISTED[name] for name in names}, {}
    code, files = ROUTES[route]
    return (
        {name: _fill(code, name) for name in names},
        {_fill(f, name): _fill(t, name) for name in names for f, t in files.items()},
    )


# Routes that never hand the checker a graph to refuse: the worker cannot start a thread or a
# process, a library result made while the answer is packed is not what the graph computes,
# and a watch replaced through sys.modules changes nothing the graph shows. They lose every
# point as wrong or failed calls, with the check's own hint, not an accusation.
STOPPED_BEFORE_A_GRAPH = {
    "another-thread",
    "another-process",
    "library-run-while-pickled",
    "watch-replaced-through-sys-modules",
}

# One grading per route and lesson: layer_norm and gelu take the route side by side.
GROUPS = {"objective": ["cross_entropy"], "block": ["layer_norm", "gelu"]}


@pytest.mark.parametrize("module", sorted(GROUPS))
@pytest.mark.parametrize("route", sorted([*ROUTES, "unlisted-op"]))
def test_every_route_loses_every_point(tmp_path, route, module):
    names = GROUPS[module]
    lesson = _grade(tmp_path, module, *_route(route, names))
    checks = [c for c in lesson["checks"] if c["function"] in names]
    assert {c["function"] for c in checks} == set(names), [c["id"] for c in lesson["checks"]]
    assert not any(c["passed"] for c in checks), [c["id"] for c in checks if c["passed"]]
    if route not in STOPPED_BEFORE_A_GRAPH:
        assert all("by hand" in (c["hint"] or "") for c in checks), [c["hint"] for c in checks]
    # For review: the routes whose source names the library (an op under another name, as a
    # tensor method, only the operator graph shows).
    named = [name for name in names if route != "unlisted-op" or name != "cross_entropy"]
    flagged = {entry["function"]: entry for entry in lesson["flagged"]}
    assert set(named) <= set(flagged), lesson["flagged"]
    assert all(flagged[name]["line"] > 0 for name in named), lesson["flagged"]


# Correct by-hand versions that make tensors of Python data (constants, indices from ranges
# and lists, filled tensors): the tracer records them made, and they keep every point.
CORRECT = {
    "objective": [
        {
            "cross_entropy": """
            def cross_entropy(logits, targets, ignore_index=-100):
                keep = targets != ignore_index
                rows, kept = logits[keep], targets[keep]
                peak = rows.max(dim=-1, keepdim=True).values
                log_probs = rows - peak - (rows - peak).exp().sum(dim=-1, keepdim=True).log()
                return -log_probs[range(len(kept)), kept].mean()
            """
        },
        {
            "cross_entropy": """
            def cross_entropy(logits, targets, ignore_index=-100):
                keep = targets != ignore_index
                rows, kept = logits[keep], targets[keep]
                peak = rows.max(dim=-1, keepdim=True).values
                log_probs = rows - peak - (rows - peak).exp().sum(dim=-1, keepdim=True).log()
                n = int(keep.sum())
                rows_at = [i for i in range(n)]
                total = torch.zeros_like(log_probs[:, 0]).sum() + torch.tensor(0.0)
                total = total - log_probs[torch.arange(n), kept].sum()
                return total / torch.full((), n, dtype=logits.dtype) + 0 * log_probs[
                    rows_at, kept
                ].sum()
            """
        },
    ],
    "block": [
        {
            "gelu": """
            def gelu(x):
                inner = torch.sqrt(torch.tensor(2.0 / torch.pi)) * (
                    x + torch.tensor(0.044715) * torch.pow(x, 3)
                )
                return 0.5 * x * (1 + inner.tanh())
            """,
            "layer_norm": """
            def layer_norm(x, weight, bias, eps=1e-5):
                mean = x.mean(dim=-1, keepdim=True)
                var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
                shift = torch.zeros_like(weight) if bias is None else bias
                out = (x - mean) / torch.sqrt(var + torch.full((), eps, dtype=x.dtype))
                return out * weight[list(range(x.shape[-1]))] + shift
            """,
        },
        {
            "gelu": """
            def gelu(x):
                c = x.new_tensor(2 / math.pi).sqrt()
                return torch.full_like(x, 0.5) * x * (1 + torch.tanh(c * (x + 0.044715 * x**3)))
            """,
            "layer_norm": """
            def layer_norm(x, weight, bias, eps=1e-5):
                var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
                out = (x - mean) * torch.rsqrt(var + eps) * weight
                return out if bias is None else out + bias
            """,
        },
    ],
}


@pytest.mark.parametrize(
    ("module", "index"),
    [(m, i) for m, versions in sorted(CORRECT.items()) for i in range(len(versions))],
)
def test_a_correct_version_making_tensors_of_python_data_keeps_every_point(tmp_path, module, index):
    codes = CORRECT[module][index]
    lesson = _grade(tmp_path, module, codes, {})
    checks = [c for c in lesson["checks"] if c["function"] in codes]
    assert {c["function"] for c in checks} == set(codes)
    assert all(c["passed"] for c in checks), [(c["id"], c["hint"]) for c in checks]


# The graph alone: names built at run time, which no reading of the code can follow. Each
# route for each function ({library} is the library call the rule forbids).
C = 'getattr(torch, "_" + "C")'
RUN_TIME_ROUTES = {
    "thread-started-in-the-call": """
        import threading
        def {name}({signature}):
            box = []
            thread = threading.Thread(target=lambda: box.append({library}))
            thread.start()
            thread.join()
            return box[0]
        """,
    "thread-started-at-import": """
        import queue, threading
        _jobs, _done = queue.Queue(), queue.Queue()
        def _serve():
            while True:
                _done.put(_jobs.get()())
        threading.Thread(target=_serve, daemon=True).start()
        def {name}({signature}):
            _jobs.put(lambda: {library})
            return _done.get()
        """,
    "dispatch-off-returned-as-is": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch():
                return {{library}}
        """,
    "dispatch-off-then-an-allowed-op": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch():
                out = {{library}}
            return out * 1.0
        """,
    "modes-popped-for-a-while": """
        def {name}({signature}):
            modes = getattr(torch.utils, "_python_" + "dispatch")
            with getattr(modes, "_disable_current_" + "modes")():
                out = {library}
            return out
        """,
    "dispatch-key-excluded": f"""
        def {{name}}({{signature}}):
            keys = {C}.DispatchKeySet({C}.DispatchKey.Python)
            with {C}._ExcludeDispatchKeyGuard(keys):
                out = {{library}}
            return out * 1.0
        """,
    # Python data is no way round: a tensor made of numbers the tracer did not see computed is
    # a constant of the graph, which the checker refuses.
    "dispatch-off-into-python-data": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch():
                values = {{library}}.tolist()
            return torch.tensor(values)
        """,
    "unseen-tensor-into-python-data": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch():
                out = {{library}}
            return torch.tensor(out.tolist())
        """,
    "everything-off-in-one-line": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch(), {C}.DisableTorchFunction(): v = {{library}}.tolist()
            return torch.tensor(v)
        """,
    "unseen-tensor-lifted-by-hand": f"""
        def {{name}}({{signature}}):
            with {C}._DisableTorchDispatch():
                out = {{library}}
            return getattr(torch, "ops").aten.lift_fresh.default(out)
        """,
    "profile-hook-removed": f"""
        import sys
        def {{name}}({{signature}}):
            hook = sys.getprofile()
            sys.setprofile(None)
            with {C}._DisableTorchDispatch(), {C}.DisableTorchFunction():
                values = {{library}}.tolist()
            sys.setprofile(hook)
            return torch.tensor(values)
        """,
    "a-subclass-computes-inside-the-trace": f"""
        class _Inside(torch.Tensor):
            @classmethod
            def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
                with {C}._DisableTorchDispatch():
                    return _Inside._answer()
        def {{name}}({{signature}}):
            _Inside._answer = staticmethod(lambda: {{library}})
            return torch.Tensor._make_subclass(_Inside, {{first}}) + 0
        """,
}
FIRST = {"cross_entropy": "logits", "layer_norm": "x", "gelu": "x"}
DISPATCH_OFF_INTO_A_BUFFER = f"""
    def cross_entropy(logits, targets, ignore_index=-100):
        keep = targets != ignore_index
        rows = logits[keep]
        norm = torch.zeros(rows.shape[0])
        with {C}._DisableTorchDispatch():
            torch.logsumexp(rows, dim=-1, out=norm)
        picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
        return (norm - picked).mean()
    """


def _route_module(route: str, name: str) -> str:
    spec = FUNCTIONS[name]
    text = textwrap.dedent(RUN_TIME_ROUTES[route]).format(
        name=name,
        signature=spec.signature,
        library=spec.library,
        first=FIRST[name],
    )
    return "import torch\n" + text


@pytest.fixture(scope="module")
def traced_client(tmp_path_factory):
    directory = tmp_path_factory.mktemp("traced")
    target = build_target(directory)
    for route in RUN_TIME_ROUTES:
        for name in FUNCTIONS:
            module = f"{route}_{name}".replace("-", "_")
            (target / f"{module}.py").write_text(_route_module(route, name))
    (target / "dispatch_off_into_a_buffer.py").write_text(
        "import torch\n" + textwrap.dedent(DISPATCH_OFF_INTO_A_BUFFER)
    )
    for module, versions in CORRECT.items():
        for number, codes in enumerate(versions):
            (target / f"correct_{module}_{number}.py").write_text(
                "import math\nimport torch\n"
                + "".join(textwrap.dedent(code) for code in codes.values())
            )
    client = WorkerClient(target)
    yield client
    client.close()


def _graded(client: WorkerClient, function: str, name: str) -> torch.Tensor:
    """``function`` called as the plugin calls a by-hand one: traced in the lesson process,
    its graph judged and run by the checker (graders/graph.py), with the second draw."""
    client.fresh()
    inputs = _inputs(name)
    traced, _ = client.call(function, inputs, {}, 10, trace=True)
    rule = FUNCTIONS[name].rule(name)
    return graph.graded_value(traced, rule, inputs, {}, graph.Budget.of(60), _expected_of(name))


def _expected_of(name: str):
    return lambda *inputs: _expected(name, list(inputs))


def test_the_lesson_process_has_its_seccomp_filter(traced_client):
    if not sys.platform.startswith("linux"):
        pytest.skip("seccomp is Linux's")
    assert traced_client.limits()["seccomp"] is True


def _loses(client: WorkerClient, function: str, name: str) -> str:
    """How a route loses its points on the graph: refused, caught by the second draw (a
    number computed out of the tracer's sight is frozen in the graph), or a value that is not
    the library's answer (what ran out of sight never happened in the checker's run)."""
    try:
        value = _graded(client, function, name)
    except (CheckFailed, StudentError) as failed:
        return str(failed)
    assert not torch.allclose(value, _expected(name, _inputs(name)), atol=1e-4), function
    return "wrong value"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("route", sorted(RUN_TIME_ROUTES))
def test_the_graph_alone_refuses_the_route(traced_client, route, name):
    module = f"{route}_{name}".replace("-", "_")
    why = _loses(traced_client, f"{module}.{name}", name)
    if route.startswith("thread-"):  # a thread cannot even start (seccomp) where it runs
        return
    # The library's answer, one number for cross_entropy, is a constant of the graph: refused
    # where it is a tensor of many, and frozen (wrong on the second draw) where it is one.
    assert "traced computation was refused" in why or "wrong one on other inputs" in why, why


def test_a_library_op_written_into_a_buffer_out_of_sight_never_ran_for_the_checker(
    traced_client,
):
    why = _loses(traced_client, "dispatch_off_into_a_buffer.cross_entropy", "cross_entropy")
    assert why == "wrong value" or "wrong one on other inputs" in why, why


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_graph_of_a_correct_by_hand_version_gives_its_answer(traced_client, name):
    value = _graded(traced_client, f"{FUNCTIONS[name].module}.{name}", name)
    assert torch.allclose(value, _expected(name, _inputs(name)), atol=1e-6)


@pytest.mark.parametrize(
    ("module", "number", "name"),
    [
        (module, number, name)
        for module, versions in sorted(CORRECT.items())
        for number, codes in enumerate(versions)
        for name in codes
    ],
)
def test_the_graph_keeps_tensors_made_of_python_data(traced_client, module, number, name):
    value = _graded(traced_client, f"correct_{module}_{number}.{name}", name)
    assert torch.allclose(value, _expected(name, _inputs(name)), atol=1e-6)


def test_every_rule_names_its_own_lesson():
    """The lesson number in a rule's message comes from the manifest ({lesson})."""
    rules = [(lesson, rule) for lesson in MANIFEST.lessons for rule in lesson.rules]
    assert set(FUNCTIONS) <= {rule.function for _, rule in rules}
    for lesson, rule in rules:
        assert f"by hand (lesson {lesson.number})" in rule.message, rule.message
        assert "{" not in rule.message, rule.message
