"""The checker's run of a by-hand function's operator graph: what such a function is graded on.

The lesson process traces the student's function on the check's inputs
(graders/worker/tracing.py) and sends the graph as plain data. Here the checker refuses a graph
that holds an operator outside the rule's allowlist (the rule's ``allow`` in
course/lessons.toml, less its ``ops``), a tensor the trace did not compute from the inputs
(``torch.tensor`` of numbers read out of a tensor, a numpy round trip, a computation with
torch's dispatch switched off: each is a constant of the graph), or more nodes than
GRAPH_NODES; then it runs the graph itself, on its own copies of the inputs (with its own
autograd for a gradient check), within the check's time (the checker's processor time, see
Budget: a loaded machine refuses no honest graph) and a bound on every tensor's size, which each
operation is held to before it runs. Those values are the function's answer. A number read out
of a tensor during the trace (``.item()``, ``if tensor:``) is frozen into the graph: the checker
runs the graph again on a second draw of the inputs (same shapes, the numbers shuffled and
rescaled) and compares it with the oracle there, so an answer baked into the graph as Python
numbers fails, and a graph that branched on a value is refused with that reason named.
"""

from __future__ import annotations

import math
import operator
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from core.manifest import Rule

from .checking import CheckFailed, close, generator, same
from .worker.limits import GRAPH_NODES
from .worker.protocol import DTYPES, GRAPH_OUTPUT, tensor_leaves

MAX_ELEMENTS = 1 << 26  # elements of any one tensor the checker's run of a graph makes
# The wall-clock guard of a graph's run, as a multiple of its processor-time budget: a run
# only computes, so on a loaded machine its wall time grows while its processor time does not.
WALL_GUARD = 20
# Where a value is read out of a tensor into Python during the trace.
READS = frozenset({"aten::_local_scalar_dense", "aten::item"})
LIFTS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})  # torch.tensor(number)
_OP = re.compile(r"aten::[a-z0-9_]+")
_OVERLOAD = re.compile(r"[A-Za-z0-9_]+")
_KINDS: dict[str, dict[str, Any]] = {
    "dtype": DTYPES,
    "layout": {"strided": torch.strided},
    "memory_format": {
        "contiguous_format": torch.contiguous_format,
        "preserve_format": torch.preserve_format,
    },
}
# The second draw's tolerance: a frozen answer is off by far more than rounding.
DRAW_RTOL, DRAW_ATOL = 1e-3, 1e-4
DRAW_SEED = 7417  # the second draw's numbers, mixed with the grading run's seed


class Refused(Exception):
    """A graph the checker will not grade; the message names the operator or the cause."""


@dataclass(frozen=True)
class Graph:
    """A checked graph: its nodes, the refs of its outputs and the nodes that read a value."""

    nodes: tuple[dict, ...]
    outputs: tuple[int, ...]
    reads: tuple[int, ...]

    @classmethod
    def read(cls, data: Any, rule: Rule, inputs: int) -> Graph:
        """The graph the lesson process sent, checked against ``rule``; Refused otherwise."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise Refused("the lesson process sent no operator graph")
        size = data.get("size")
        if not isinstance(size, int) or size > GRAPH_NODES or len(data["nodes"]) > GRAPH_NODES:
            raise Refused(
                f"it traced to {size} operations, more than the grader's bound of {GRAPH_NODES}"
            )
        nodes: list[dict] = []
        users: dict[int, list[str]] = {}
        reads = []
        library: list[str] = []  # the rule's own forbidden ops, then the others not allowed
        unlisted: list[str] = []
        for at, node in enumerate(data["nodes"]):
            op = node.get("op") if isinstance(node, dict) else None
            if op == "input":
                if not isinstance(node.get("index"), int) or not 0 <= node["index"] < inputs:
                    raise Refused("the graph reads an input the call was not given")
            elif op == "constant":
                pass  # judged below, once its users are known
            elif op == "grad_enabled":
                if not isinstance(node.get("value"), bool):
                    raise Refused("the graph turns gradients on or off in a way the grader cannot")
            elif op == "getitem":
                args = node.get("args")
                if not isinstance(args, list) or len(args) != 2 or not isinstance(args[1], int):
                    raise Refused("the graph takes a part of a value in a way the grader cannot")
                _arguments(args[0], at, users, "getitem")
            elif isinstance(op, str) and _OP.fullmatch(op):
                if op in rule.ops:
                    library.append(op)
                elif not allowed(op, rule):
                    unlisted.append(op)
                if not isinstance(node.get("overload"), str) or not _OVERLOAD.fullmatch(
                    node["overload"]
                ):
                    raise Refused(f"the graph names no overload of {op}")
                _arguments(node.get("args"), at, users, op)
                kwargs = node.get("kwargs")
                if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                    raise Refused(f"its graph passes {op} arguments the grader cannot rebuild")
                for value in kwargs.values():
                    _arguments(value, at, users, op)
                if op in READS:
                    reads.append(at)
            else:
                unlisted.append(str(op)[:80])
            nodes.append(node)
        # The most telling cause first: the library op itself, then what was computed out of
        # the tracer's sight, then an op outside the allowlist.
        if library:
            raise Refused(f"it calls {library[0]}, the library's own computation")
        for at, node in enumerate(nodes):
            if node["op"] == "constant" and not _scalar(node, users.get(at, [])):
                raise Refused(
                    f"it holds a tensor of shape {node.get('shape')} that it did not compute from "
                    "its inputs (numbers read out of a tensor and made a tensor again, a numpy "
                    "round trip, or a computation with torch's dispatch switched off)"
                )
        if unlisted:
            raise Refused(f"it calls {unlisted[0]}, which is not among the operations it may use")
        outputs = data.get("outputs")
        if not isinstance(outputs, list):
            raise Refused("the graph has no outputs")
        refs = tuple(_ref(ref, len(nodes)) for ref in outputs)
        return cls(tuple(nodes), refs, tuple(reads))

    def run(self, inputs: list[Tensor], budget: Budget, reads: list | None = None) -> list[Tensor]:
        """The graph's outputs on ``inputs`` (the checker's own tensors), every operation's
        size bounded before it runs (``_bound``); ``reads`` gets the numbers the graph reads
        out of tensors."""
        with torch.set_grad_enabled(torch.is_grad_enabled()):  # as it was, afterwards
            return self._steps(inputs, budget, reads)

    def _steps(self, inputs: list[Tensor], budget: Budget, reads: list | None) -> list[Tensor]:
        values: list[Any] = []
        for node in self.nodes:
            if budget.spent():
                raise Refused("the grader's run of its graph took longer than the check's limit")
            op = node["op"]
            if op == "input":
                value: Any = inputs[node["index"]]
            elif op == "grad_enabled":  # the student's torch.no_grad(), entered or left
                torch.set_grad_enabled(node["value"])
                value = None
            elif op == "constant":
                number, dtype = node["value"], DTYPES[node["dtype"]]
                value = (
                    number.clone()
                    if isinstance(number, Tensor)
                    else torch.tensor(number, dtype=dtype)
                )
            elif op == "getitem":
                whole, part = node["args"]
                value = _call(operator.getitem, _decode(whole, values), part)
            else:
                function = _resolve(op, node["overload"])
                args = _decode(node["args"], values)
                kwargs = {k: _decode(v, values) for k, v in node["kwargs"].items()}
                _bound(op, function, args, kwargs)
                value = _call(function, *args, **kwargs)
                if op in READS and reads is not None:
                    reads.append(value)
            for tensor in tensor_leaves(value if isinstance(value, list | tuple) else [value]):
                _within(tensor.numel(), op)
            values.append(value)
        found = [values[ref] for ref in self.outputs]
        if not all(isinstance(t, Tensor) for t in found):
            raise Refused("an output of its graph is not a tensor")
        return found


@dataclass(frozen=True)
class Budget:
    """How long the checker's run of a graph may take: ``seconds`` of this process's processor
    time (what the graph's work costs, whatever else the machine runs; a by-hand function's
    graph is small, so only a graph built to stall the grader reaches it), with a wall-clock
    guard WALL_GUARD times longer."""

    cpu_until: float
    wall_until: float

    @classmethod
    def of(cls, seconds: float) -> Budget:
        return cls(time.process_time() + seconds, time.monotonic() + WALL_GUARD * seconds)

    def spent(self) -> bool:
        return time.process_time() > self.cpu_until or time.monotonic() > self.wall_until


def _within(elements: int, op: str) -> None:
    if elements > MAX_ELEMENTS:
        raise Refused(
            f"its graph makes a tensor of {elements} elements at {op}, more than the grader's "
            f"bound of {MAX_ELEMENTS}"
        )


def _bound(op: str, function: Any, args: list, kwargs: dict) -> None:
    """Refused before ``function`` runs when it would make a tensor past MAX_ELEMENTS: bounded
    from the shapes and numbers of its arguments (``_most``), and where that bound is over,
    exactly, by running it on meta tensors (shapes without data) first. Meta tensors only
    then: torch's meta kernels are Python whose first call imports sympy and torch._dynamo
    (a second and a half, before the first verdict of every lesson that traces)."""
    if _most(op, function, args, kwargs) <= MAX_ELEMENTS:
        return
    leaves = tensor_leaves([args, kwargs])
    metas = {id(t): t.detach().to("meta") for t in leaves}
    on_meta = _swap(args, metas), _swap(kwargs, metas)
    if any(a.name == "device" for a in function._schema.arguments):
        on_meta[1]["device"] = torch.device("meta")  # a new tensor: its shape only
    try:
        with torch.set_grad_enabled(False):  # shapes only: no graph to record
            shaped = function(*on_meta[0], **on_meta[1])
    except Exception:  # noqa: BLE001 - a shape that follows from values (a boolean mask): at
        return  # most its input's, checked as it runs
    for tensor in tensor_leaves(shaped if isinstance(shaped, list | tuple) else [shaped]):
        _within(tensor.numel(), op)


# The ops whose output is a product of two matrices (batched or not) of their last two tensors.
PRODUCTS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::mv"})


def _most(op: str, function: Any, args: list, kwargs: dict) -> int:
    """At most the elements of the new tensors ``function`` makes from these arguments. A view
    makes no memory, a reduction no more than its input (both checked as they run); a
    pointwise op makes the broadcast of its tensors, a matrix product rows times columns,
    arange its count; any other op (a copy, a gather or index, a concatenation, a tensor of a
    given size) no more than the product of its tensors' sizes (each at least 2) and of the
    integers among its arguments, times their dimensions (nonzero's rows are as long)."""
    if function.is_view or torch.Tag.reduction in function.tags:
        return 0
    leaves = tensor_leaves([args, kwargs])
    if torch.Tag.pointwise in function.tags:
        return _broadcast([t.shape for t in leaves])
    given = [a for a in args if isinstance(a, Tensor)]
    if op in PRODUCTS and len(given) >= 2 and given[-2].dim() >= 1:
        rows, columns = given[-2], given[-1]
        return (
            rows.numel() // max(rows.shape[-1], 1) * (columns.shape[-1] if columns.dim() > 1 else 1)
        )
    if op == "aten::arange":
        numbers = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
        start, end, step = ([0, *numbers, 1] if len(numbers) == 1 else [*numbers, 1])[:3]
        return math.ceil(abs((end - start) / step)) if step and math.isfinite(end - start) else 0
    most = max((t.dim() for t in leaves), default=1) or 1
    for tensor in leaves:
        most *= max(2, tensor.numel())
    for number in _integers([args, kwargs]):
        most *= max(1, abs(number))
    return most


def _integers(obj: Any) -> list[int]:
    """The integers among an op's arguments (sizes, strides, counts), not in tensors."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return [obj]
    if isinstance(obj, list | tuple):
        return [n for item in obj for n in _integers(item)]
    if isinstance(obj, dict):
        return [n for item in obj.values() for n in _integers(item)]
    return []


def _broadcast(shapes: list[torch.Size]) -> int:
    """The elements of the shapes broadcast together, or more where they do not broadcast
    (torch.broadcast_shapes imports sympy, half a second)."""
    elements = 1
    for at in range(1, max((len(s) for s in shapes), default=0) + 1):
        elements *= max((s[-at] for s in shapes if len(s) >= at), default=1)
    return elements


def _swap(obj: Any, metas: dict[int, Tensor]) -> Any:
    """``obj`` with its tensors replaced by their meta twins."""
    if isinstance(obj, Tensor):
        return metas[id(obj)]
    if isinstance(obj, list | tuple):
        return [_swap(item, metas) for item in obj]
    if isinstance(obj, dict):
        return {k: _swap(v, metas) for k, v in obj.items()}
    return obj


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except Refused:
        raise
    except Exception as error:  # noqa: BLE001 - a graph that does not run is refused
        raise Refused(
            f"its graph does not run ({type(error).__name__}: {str(error)[:200]})"
        ) from None


def allowed(op: str, rule: Rule) -> bool:
    """Whether ``rule``'s allowlist has ``op`` (an in-place form computes what its op does)."""
    return op in rule.allow or op.removesuffix("_") in rule.allow


def _scalar(node: dict, users: list[str]) -> bool:
    """A constant the student's code made of Python data, used only to make that tensor: one
    number (``torch.tensor(0.5)``), or integers or booleans (``x[range(n), targets]``'s
    indices). Floats of more than one number are what an answer computed out of the tracer's
    sight would be; any answer frozen into the graph otherwise fails the second draw."""
    dtype = node.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPES or not all(u in LIFTS for u in users):
        return False
    value, kind = node.get("value"), DTYPES[dtype]
    if node.get("shape") == []:
        return isinstance(value, bool | int | float)
    return (
        isinstance(value, Tensor)
        and value.dtype == kind
        and list(value.shape) == node.get("shape")
        and not kind.is_floating_point
        and not kind.is_complex
        and value.numel() <= MAX_ELEMENTS
    )


def _ref(ref: Any, before: int) -> int:
    if isinstance(ref, dict) and set(ref) == {"ref"} and isinstance(ref["ref"], int):
        if 0 <= ref["ref"] < before:
            return ref["ref"]
    raise Refused("the graph refers to a value it has not computed")


def _arguments(obj: Any, at: int, users: dict[int, list[str]], op: str) -> None:
    """Check an argument tree: plain values, earlier nodes, known dtypes and a CPU device."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return
    if isinstance(obj, list):
        for item in obj:
            _arguments(item, at, users, op)
        return
    if isinstance(obj, dict) and len(obj) == 1:
        ((key, value),) = obj.items()
        if key == "ref":
            users.setdefault(_ref(obj, at), []).append(op)
            return
        if key in _KINDS and isinstance(value, str) and value in _KINDS[key]:
            return
        if key == "device" and value in ("cpu", "meta"):
            return
    raise Refused(f"its graph passes {op} an argument the grader cannot rebuild")


def _decode(obj: Any, values: list) -> Any:
    if isinstance(obj, list):
        return [_decode(item, values) for item in obj]
    if isinstance(obj, dict):  # one tag, checked by ``_arguments``
        ((key, value),) = obj.items()
        if key == "ref":
            return values[value]
        if key == "device":
            return torch.device(value)
        return _KINDS[key][value]
    return obj


def _resolve(op: str, overload: str) -> Any:
    packet = getattr(torch.ops.aten, op.removeprefix("aten::"), None)
    function = getattr(packet, overload, None) if packet is not None else None
    if not isinstance(function, torch._ops.OpOverload):
        raise Refused(f"its graph names {op}.{overload}, which torch does not have")
    return function


def fill(skeleton: Any, outputs: list[Tensor]) -> Any:
    """The call's value: its skeleton with the graph's outputs where its tensors were."""
    if isinstance(skeleton, dict):
        if set(skeleton) == {GRAPH_OUTPUT}:
            index = skeleton[GRAPH_OUTPUT]
            if not isinstance(index, int) or not 0 <= index < len(outputs):
                raise Refused("its value names an output its graph does not have")
            return outputs[index]
        return {k: fill(v, outputs) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [fill(v, outputs) for v in skeleton]
    if isinstance(skeleton, tuple):
        return tuple(fill(v, outputs) for v in skeleton)
    return skeleton


def redrawn(obj: Any, seed: int = DRAW_SEED) -> Any:
    """``obj`` with the numbers of each floating tensor shuffled and each scaled by a factor
    between 0.75 and 1.25 (same shapes, about the same spread, so that an answer that depends
    on every number changes); integer and boolean tensors (targets, masks) as they are."""
    at = [seed]

    def draw(item: Any) -> Any:
        if isinstance(item, Tensor):
            if not item.dtype.is_floating_point or item.numel() < 2:
                return item
            at[0] += 1
            draws = generator(at[0])
            order = torch.randperm(item.numel(), generator=draws)
            scale = torch.empty(item.numel(), dtype=torch.float64).uniform_(
                0.75, 1.25, generator=draws
            )
            shuffled = item.detach().reshape(-1)[order] * scale.to(item.dtype)
            return shuffled.reshape(item.shape).clone()
        if isinstance(item, dict):
            return {k: draw(v) for k, v in item.items()}
        if isinstance(item, list):
            return [draw(v) for v in item]
        if isinstance(item, tuple):
            return tuple(draw(v) for v in item)
        return item

    return draw(obj)


def agrees(value: Any, expected: Any) -> bool:
    """Whether a graph's value on the second draw is the oracle's, up to rounding."""
    if isinstance(expected, Tensor) and isinstance(value, Tensor):
        return close(value, expected.to(value.dtype), rtol=DRAW_RTOL, atol=DRAW_ATOL)
    return same(value, expected, rtol=DRAW_RTOL, atol=DRAW_ATOL)


def frozen_reads(first: list, second: list) -> bool:
    """Whether the numbers the graph read out of tensors differ between the two draws."""
    for a, b in zip(first, second, strict=False):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            continue
        if a != b:
            return True
    return False


def refusal(rule: Rule, function: str, why: str) -> CheckFailed:
    """The failed check of a refused graph: the rule's message and what broke it."""
    return CheckFailed(
        f"{function}'s traced computation was refused: {why}", hint=f"{rule.message}: {why}"
    )


def graded_value(
    traced: tuple[Any, Any],
    rule: Rule,
    args: list,
    kwargs: dict,
    budget: Budget,
    oracle: Callable[..., Any] | None = None,
) -> Any:
    """The value a by-hand call is graded on: the checker's run of its graph on the call's
    inputs; with ``oracle``, also run on a second draw and compared there (see the module's
    docstring). CheckFailed with the rule's hint when the graph is refused."""
    skeleton, data = traced
    leaves = tensor_leaves((args, kwargs))
    try:
        graph = Graph.read(data, rule, len(leaves))
        first: list = []
        value = fill(skeleton, _outputs(graph.run(_copies(leaves), budget, first)))
        if oracle is not None:
            _second_draw(graph, skeleton, oracle, args, kwargs, value, first, budget)
    except Refused as why:
        raise refusal(rule, rule.function, str(why)) from None
    except Unlike as why:
        # No accusation and no hint of its own: a wrong function can be right on the check's
        # inputs by chance (constant rows), and the check's own diagnosis names its mistake.
        raise CheckFailed(f"{rule.function} {why}") from None
    return value


class Unlike(Exception):
    """A graph right on the check's inputs and wrong on the second draw; the message says so."""


def _second_draw(
    graph: Graph,
    skeleton: Any,
    oracle: Callable[..., Any],
    args: list,
    kwargs: dict,
    value: Any,
    first: list,
    budget: Budget,
) -> None:
    """Unlike when the graph gives the oracle's answer on the call's inputs and not on a second
    draw of them: its answer was frozen into it (or it branched on a value), or it is wrong and
    the check's inputs hid it."""
    try:
        if not agrees(value, oracle(*args, **kwargs)):
            return  # a wrong answer: the check's own diagnosis says what is wrong
        again_args, again_kwargs = redrawn((list(args), dict(kwargs)))
        expected = oracle(*again_args, **again_kwargs)
    except Exception:  # noqa: BLE001 - no oracle answer for these inputs: nothing to compare
        return
    second: list = []
    outputs = graph.run(_copies(tensor_leaves((again_args, again_kwargs))), budget, second)
    if agrees(fill(skeleton, _outputs(outputs)), expected):
        return
    why = (
        "gives the right answer on the check's inputs but a wrong one on other inputs of the "
        "same shapes (their numbers shuffled and rescaled), computed as it was traced"
    )
    if graph.reads and frozen_reads(first, second):
        raise Unlike(
            f"{why}: it reads numbers out of tensors (.item(), a Python if on a tensor), which "
            "the traced computation keeps as they were; keep every step in tensor operations "
            "(torch.where for a choice)"
        )
    raise Unlike(f"{why}: right on these numbers only (an answer put in as Python numbers?)")


def graded_gradients(
    traced: tuple[Any, Any],
    rule: Rule,
    args: list,
    wrt: list[int],
    weights: Tensor | None,
    budget: Budget,
) -> dict:
    """A gradient check of a by-hand function by the checker's own autograd through its graph:
    what ``scenario_grad`` (graders/worker/scenarios.py) answers for other functions."""
    skeleton, data = traced
    leaves = tensor_leaves((args, {}))
    position = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    try:
        graph = Graph.read(data, rule, len(leaves))
        inputs = _copies(leaves)
        for i in wrt:
            inputs[position.index(i)].requires_grad_(True)
        with torch.enable_grad():
            out = fill(skeleton, graph.run(inputs, budget))
            if not isinstance(out, Tensor):
                raise Refused("its value is not a tensor to differentiate")
            if not out.requires_grad:
                return {"value": out.detach(), "grads": [None for _ in wrt]}
            out.backward(weights)
    except Refused as why:
        raise refusal(rule, rule.function, str(why)) from None
    except RuntimeError as error:  # a backward the graph's ops cannot take
        raise refusal(rule, rule.function, f"its graph has no gradient ({error})") from None
    grads = [inputs[position.index(i)].grad for i in wrt]
    return {"value": out.detach(), "grads": grads}


def _copies(leaves: list[Tensor]) -> list[Tensor]:
    """The checker's own copies of the inputs: a graph that writes in place writes to these."""
    return [t.detach().clone() for t in leaves]


def _outputs(outputs: list[Tensor]) -> list[Tensor]:
    return [t.detach().clone() for t in outputs]
