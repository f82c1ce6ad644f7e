"""The graph a by-hand function is graded on (graders/graph.py, graders/worker/tracing.py).

The student's function is traced in this process, its graph sent through the protocol's plain
data, and judged and run by the checker's code: each hostile submission of
tests/support/graph_submissions.py is refused with the rule's hint naming the cause, each
honest one gives the oracle's answer. Graphs forged by hand (what a lesson process that lies
could send) are refused or bounded. The whole grading of the same submissions, through the
worker, is at the end (slow).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from core.manifest import ROOT, load_manifest
from graders import graph
from graders.checking import CheckFailed, close
from graders.secret import oracles
from graders.worker import protocol, tracing
from graders.worker.limits import GRAPH_NODES
from tests.support.graph_submissions import HONEST, HOSTILE, PRELUDE

MANIFEST = load_manifest()


def _inputs(function: str) -> tuple[list, dict]:
    g = torch.Generator().manual_seed(3)
    if function == "layer_norm":
        return [torch.randn(2, 5, 16, generator=g), torch.randn(16, generator=g) * 0.2 + 1,
                torch.randn(16, generator=g)], {}  # fmt: skip
    if function == "gelu":
        return [torch.randn(2, 3, 7, generator=g) * 3], {}
    if function == "cross_entropy":
        return [torch.randn(6, 10, generator=g), torch.tensor([1, 2, -100, 3, 9, 0])], {}
    if function == "attention":
        q, k, v = (torch.randn(2, 5, 8, generator=g) for _ in range(3))
        return [q, k, v, torch.ones(5, 5, dtype=torch.bool).tril()], {}
    params = [torch.randn(3, generator=g), torch.randn(2, 4, generator=g)]
    grads = [torch.randn(3, generator=g), torch.randn(2, 4, generator=g)]
    return [params, grads, {}], {"lr": 0.1, "weight_decay": 0.1}


def _expected(function: str, args: list, kwargs: dict) -> Any:
    if function != "adamw_step":
        return oracles.named(function)(*args, **kwargs)
    leaves = [p.clone().requires_grad_(True) for p in args[0]]
    optimizer = torch.optim.AdamW(leaves, betas=(0.9, 0.95), **kwargs)
    for leaf, grad in zip(leaves, args[1], strict=True):
        leaf.grad = grad.clone()
    optimizer.step()
    return [leaf.detach() for leaf in leaves]


def _traced(module: str, function: str, source: str, args: list, kwargs: dict) -> tuple:
    """The student's function traced here, its graph and skeleton as the checker receives them."""
    namespace: dict[str, Any] = {}
    exec(compile(PRELUDE + source, f"<{function}>", "exec"), namespace)  # noqa: S102
    traced = tracing.trace(namespace[function], tuple(args), dict(kwargs))
    sent = protocol.decode(protocol.encode([traced["value"], traced["graph"]]))
    return sent[0], sent[1]


def _grade(name: str, table: dict) -> tuple[Any, Any, str]:
    module, function, source = table[name]
    args, kwargs = _inputs(function)
    rule = MANIFEST.lesson(module).rule(function)
    oracle = None if function == "adamw_step" else oracles.named(function)
    traced = _traced(module, function, source, args, kwargs)
    value = graph.graded_value(traced, rule, args, kwargs, graph.Budget.of(60), oracle)
    return value, _expected(function, args, kwargs), function


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_graph_gives_the_oracles_answer(name):
    value, expected, function = _grade(name, HONEST)
    if function == "adamw_step":
        value = value[0]
        assert all(close(a, e, rtol=1e-5, atol=1e-6) for a, e in zip(value, expected, strict=True))
    else:
        assert close(value, expected, rtol=1e-5, atol=1e-5), (value, expected)


# Answers frozen into the graph fail on the second draw, without a hint of their own: an honest
# mistake can look the same on a check's degenerate inputs (constant rows).
FROZEN = {"answer-baked-through-item", "answer-baked-elementwise"}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_graph_is_refused_with_the_rules_hint(name):
    module, function, _ = HOSTILE[name]
    rule = MANIFEST.lesson(module).rule(function)
    with pytest.raises(CheckFailed) as refused:
        _grade(name, HOSTILE)
    if name in FROZEN:
        assert refused.value.hint is None and "on other inputs" in refused.value.detail
    else:
        assert refused.value.hint is not None and refused.value.hint.startswith(rule.message)
        assert "refused" in refused.value.detail


CAUSES = {
    "library-layer-norm": "aten::native_layer_norm",
    "library-cross-entropy": "aten::_log_softmax",
    "sdpa": "aten::_safe_softmax",
    "library-gelu": "aten::gelu",
    "element-by-element-gelu": "did not compute from its inputs",
    "numpy-log-sum-exp": "did not compute from its inputs",
    "dispatch-switched-off": "did not compute from its inputs",
    "answer-baked-through-item": "a wrong one on other inputs",
    "answer-baked-elementwise": "a wrong one on other inputs",
    "unlisted-log-sum-exp": "aten::logcumsumexp",
    "optim-adamw": "profiler::_record_function_enter_new",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_refusal_names_its_cause(name):
    with pytest.raises(CheckFailed) as refused:
        _grade(name, HOSTILE)
    said = refused.value.hint or refused.value.detail
    assert CAUSES[name] in said, said


def test_every_hostile_submission_has_its_cause():
    assert set(CAUSES) == set(HOSTILE)


def test_the_gradient_is_the_checkers_own_autograd_through_the_graph():
    module, function, source = HONEST["layer-norm-var-mean"]
    args, _ = _inputs(function)
    rule = MANIFEST.lesson(module).rule(function)
    weights = torch.randn(2, 5, 16)
    got = graph.graded_gradients(
        _traced(module, function, source, args, {}), rule, args, [0], weights, graph.Budget.of(60)
    )
    x = args[0].clone().requires_grad_(True)
    F.layer_norm(x, (16,), args[1], args[2]).backward(weights)
    assert close(got["grads"][0], x.grad, rtol=1e-4, atol=1e-5)


def test_a_detached_statistic_shows_in_the_gradient():
    source = """
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True).detach()
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
"""
    args, _ = _inputs("layer_norm")
    rule = MANIFEST.lesson("block").rule("layer_norm")
    traced = _traced("block", "layer_norm", source, args, {})
    ones = torch.ones(2, 5, 16)
    got = graph.graded_gradients(traced, rule, args, [0], ones, graph.Budget.of(60))
    x = args[0].clone().requires_grad_(True)
    F.layer_norm(x, (16,), args[1], args[2]).backward(ones)
    assert not close(got["grads"][0], x.grad, rtol=1e-4, atol=1e-5)


BRANCHED = """
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    rows, kept = logits[keep], targets[keep]
    peak = rows.amax(dim=-1, keepdim=True)
    norm = peak.squeeze(-1) + (rows - peak).exp().sum(dim=-1).log()
    losses = norm - rows.gather(-1, kept.unsqueeze(-1)).squeeze(-1)
    {tail}
"""


def _branched(tail: str) -> Any:
    logits = -torch.rand(6, 10) - 0.1
    logits[0, 0] = 2.0  # the only positive number: the branch the trace takes
    targets = torch.tensor([1, 2, -100, 3, 9, 0])
    rule = MANIFEST.lesson("objective").rule("cross_entropy")
    traced = _traced(
        "objective", "cross_entropy", BRANCHED.format(tail=tail), [logits, targets], {}
    )
    oracle = oracles.named("cross_entropy")
    value = graph.graded_value(traced, rule, [logits, targets], {}, graph.Budget.of(60), oracle)
    return value, oracle(logits, targets)


def test_an_honest_branch_on_a_value_keeps_its_points():
    # Either branch gives the mean: the one the trace froze is right on any input.
    value, expected = _branched(
        "return losses.mean() if logits[0, 0] > 0 else losses.sum() / len(losses)"
    )
    assert close(value, expected, rtol=1e-5, atol=1e-6)


def test_a_branch_frozen_into_the_graph_is_refused_saying_why():
    with pytest.raises(CheckFailed, match=r"reads numbers out of tensors \(\.item\(\), a Python"):
        # A number read on the check's inputs that cancels only there.
        _branched("return losses.mean() * logits[0, 0].item() / logits[0, 0]")


def _forged(nodes: list, outputs: list, size: int | None = None) -> dict:
    return {"nodes": nodes, "outputs": outputs, "size": len(nodes) if size is None else size}


GELU_RULE = MANIFEST.lesson("block").rule("gelu")
X = {"op": "input", "index": 0}


def _run_forged(data: dict, inputs: list | None = None) -> list:
    inputs = [torch.ones(3)] if inputs is None else inputs
    return graph.Graph.read(data, GELU_RULE, len(inputs)).run(inputs, graph.Budget.of(60))


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (_forged([X], [{"ref": 0}], size=GRAPH_NODES + 1), "bound"),
        (_forged([{"op": "input", "index": 1}], [{"ref": 0}]), "input the call was not given"),
        (
            _forged(
                [
                    X,
                    {"op": "aten::gelu", "overload": "default", "args": [{"ref": 0}], "kwargs": {}},
                ],
                [{"ref": 1}],
            ),
            "aten::gelu",
        ),  # fmt: skip
        (
            _forged(
                [
                    X,
                    {
                        "op": "aten::mul",
                        "overload": "Tensor",
                        "args": [{"ref": 2}, 2.0],
                        "kwargs": {},
                    },
                ],
                [{"ref": 1}],
            ),
            "has not computed",
        ),  # fmt: skip
        (_forged([X, {"op": "python:eval"}], [{"ref": 1}]), "python:eval"),
        (
            _forged(
                [{"op": "constant", "shape": [3], "dtype": "float32", "value": None}], [{"ref": 0}]
            ),
            "did not compute",
        ),  # fmt: skip
        (
            _forged(
                [
                    X,
                    {
                        "op": "aten::mul",
                        "overload": "Tensor",
                        "args": [{"ref": 0}, {"pickle": 1}],
                        "kwargs": {},
                    },
                ],
                [{"ref": 1}],
            ),
            "cannot rebuild",
        ),  # fmt: skip
        (
            _forged(
                [
                    X,
                    {
                        "op": "aten::full",
                        "overload": "default",
                        "args": [[1 << 20, 1 << 20], 1.0],
                        "kwargs": {},
                    },
                ],
                [{"ref": 1}],
            ),
            "bound",
        ),  # fmt: skip
        (
            _forged(
                [
                    X,
                    {
                        "op": "aten::mul",
                        "overload": "nonesuch",
                        "args": [{"ref": 0}, 2.0],
                        "kwargs": {},
                    },
                ],
                [{"ref": 1}],
            ),
            "does not have",
        ),  # fmt: skip
    ],
)
def test_a_forged_graph_is_refused(data, cause):
    with pytest.raises(graph.Refused, match=cause):
        _run_forged(data)


LAYER_NORM_RULE = MANIFEST.lesson("block").rule("layer_norm")
BIG = 1 << 20  # elements on a side: their product, 4 TB of floats, could not even be allocated


def _op(name: str, overload: str, *refs: int) -> dict:
    return {"op": name, "overload": overload, "args": [{"ref": r} for r in refs], "kwargs": {}}


@pytest.mark.parametrize(
    ("node", "inputs"),
    [
        (_op("aten::mul", "Tensor", 0, 1), [torch.ones(BIG, 1), torch.ones(1, BIG)]),
        (_op("aten::bmm", "default", 0, 1), [torch.ones(1, BIG, 1), torch.ones(1, 1, BIG)]),
    ],
)
def test_an_op_past_the_bound_is_refused_before_it_runs(node, inputs):
    # An allocation this size fails in torch with a message of its own ("does not run"): the
    # bound's refusal shows the size was told from the shapes, before anything ran.
    data = _forged([X, {"op": "input", "index": 1}, node], [{"ref": 2}])
    graph_ = graph.Graph.read(data, LAYER_NORM_RULE, 2)
    with pytest.raises(graph.Refused, match="more than the grader's bound"):
        graph_.run(inputs, graph.Budget.of(60))


def test_the_checkers_run_of_honest_graphs_imports_neither_sympy_nor_torch_dynamo():
    # Bounding each op by meta tensors would import both (torch's meta kernels are Python):
    # a second and a half before the first verdict of every lesson that traces.
    script = (
        "import sys, time, torch\n"
        "from graders import graph\n"
        "from tests.graders.test_graph import MANIFEST, _inputs, _traced\n"
        "from tests.support.graph_submissions import HONEST\n"
        "from graders.secret import oracles\n"
        "for name, (module, function, source) in sorted(HONEST.items()):\n"
        "    args, kwargs = _inputs(function)\n"
        "    rule = MANIFEST.lesson(module).rule(function)\n"
        "    oracle = None if function == 'adamw_step' else oracles.named(function)\n"
        "    traced = _traced(module, function, source, args, kwargs)\n"
        "    graph.graded_value(traced, rule, args, kwargs, graph.Budget.of(60), oracle)\n"
        "print(len(HONEST), 'sympy' in sys.modules, 'torch._dynamo' in sys.modules)\n"
    )
    done = _fresh_interpreter(script)
    assert done.stdout.split()[1:] == ["False", "False"], done.stdout + done.stderr
    assert int(done.stdout.split()[0]) >= 5


def test_a_forged_graph_that_computes_by_hand_is_a_by_hand_computation():
    # Whatever the lesson process sends, what runs here is what is graded.
    data = _forged(
        [X, {"op": "aten::tanh", "overload": "default", "args": [{"ref": 0}], "kwargs": {}}],
        [{"ref": 1}],
    )
    (out,) = _run_forged(data, [torch.tensor([0.0, 1.0])])
    assert torch.equal(out, torch.tanh(torch.tensor([0.0, 1.0])))


def test_a_graph_past_the_checks_time_is_refused():
    data = _forged([X], [{"ref": 0}])
    spent = graph.Budget(time.process_time() - 1, time.monotonic() + 60)
    with pytest.raises(graph.Refused, match="longer than"):
        graph.Graph.read(data, GELU_RULE, 1).run([torch.ones(2)], spent)


def test_the_graphs_time_is_processor_time_so_a_loaded_machine_refuses_nothing():
    # Waiting (another process holding the cores) spends wall time and no processor time.
    budget = graph.Budget.of(0.2)
    time.sleep(0.5)
    assert not budget.spent()
    (out,) = graph.Graph.read(_forged([X], [{"ref": 0}]), GELU_RULE, 1).run([torch.ones(2)], budget)
    assert torch.equal(out, torch.ones(2))


def test_the_allowlist_is_the_manifests_one_table():
    # Every traced rule lists its graph's ops in `allow`, and no op is both allowed and refused.
    for lesson in MANIFEST.lessons:
        for rule in lesson.rules:
            if rule.allow:
                assert not set(rule.ops) & set(rule.allow), rule.function
    traced = {r.function for lesson in MANIFEST.lessons for r in lesson.rules if r.allow}
    assert {"layer_norm", "gelu", "cross_entropy", "attention", "adamw_step"} <= traced


def _fresh_interpreter(script: str) -> subprocess.CompletedProcess:
    """``script`` run by a new interpreter in the repository: what it imports is its own."""
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )


def test_tracing_does_not_import_torch_dynamo():
    # torch._dynamo takes seconds to import: a tracer that needed it (make_fx does) would put
    # them between a student's save and the first verdict of every lesson that traces.
    script = (
        "import sys, torch\n"
        "from graders.worker.tracing import trace\n"
        "trace(lambda x: (x - x.mean(-1, keepdim=True)).sum(), (torch.ones(2, 3),), {})\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = _fresh_interpreter(script)
    assert done.stdout.strip() == "False", done.stderr
