"""The student's function as an operator graph, sent to the checker as plain data.

For a function under a by-hand rule the lesson process does not send the function's value:
it traces the call with ``make_fx`` (aten operators as the student's code calls them, before
autograd's dispatch, with the places where it turned gradients off) and sends what ran, node
by node. The checker
(graders/graph.py) refuses an operator outside the rule's allowlist or a tensor the trace did
not compute, then runs the graph itself; nothing the student's process reports is graded.

A graph is ``{"nodes": [...], "outputs": [refs], "size": n}``. Node ``i`` is one of
    {"op": "input", "index": k}                      the k-th tensor of the call's inputs
    {"op": "constant", "shape": [...], "dtype": d, "value": number or None}
    {"op": "getitem", "args": [ref, k]}              one result of an op with several
    {"op": "grad_enabled", "value": bool}            torch.no_grad() entered or left
    {"op": "aten::mul", "overload": "Tensor", "args": [...], "kwargs": {...}}
and an argument is plain data, ``{"ref": i}`` for node i's value, or ``{"dtype": name}``,
``{"device": name}``, ``{"layout": name}``, ``{"memory_format": name}``; anything else is
``{"unknown": type name}``, which the checker refuses. The call's value is sent as a skeleton:
its lists, tuples, dicts and plain values, with ``{GRAPH_OUTPUT: j}`` for its j-th tensor.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from .limits import GRAPH_NODES
from .protocol import GRAPH_OUTPUT, tensor_leaves


def trace(fn: Callable, args: tuple, kwargs: dict) -> dict:
    """``fn(*args, **kwargs)`` traced: ``{"graph": ..., "value": skeleton}``. What the student's
    code raises propagates (a by-hand function that validates its input raises as it would)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs = tensor_leaves((args, kwargs))
    made: list[Any] = []

    def flat(*tensors: Tensor) -> list[Tensor]:
        given, named = _replace((args, kwargs), tensors, [0])
        value = fn(*given, **named)
        made.append(value)
        return tensor_leaves(value)

    # Before autograd's dispatch (pre_dispatch): the graph keeps where the code turned
    # gradients off (torch.no_grad), which the checker's own autograd then honours.
    with _data_as_detach():
        module = make_fx(flat, pre_dispatch=True, _error_on_data_dependent_ops=False)(*inputs)
    graph = encode_graph(module)
    return {"graph": graph, "value": _skeleton(made[0], [0])}


@contextmanager
def _data_as_detach() -> Iterator[None]:
    """``tensor.data`` read as ``tensor.detach()`` while tracing: the same storage without
    autograd's history, which the tracer follows (the attribute itself makes a tensor it cannot
    see, which the checker would refuse as computed out of sight)."""
    base: Any = torch._C.TensorBase.data
    tensor: Any = torch.Tensor  # typed loosely: the stubs declare data a plain attribute
    tensor.data = property(lambda self: self.detach(), base.__set__)
    try:
        yield
    finally:
        del tensor.data  # TensorBase's own again


def _replace(obj: Any, tensors: tuple, at: list[int]) -> Any:
    """``obj`` with its tensors, in ``tensor_leaves`` order, replaced by ``tensors``."""
    if isinstance(obj, Tensor):
        at[0] += 1
        return tensors[at[0] - 1]
    if isinstance(obj, dict):
        return {k: _replace(v, tensors, at) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace(v, tensors, at) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_replace(v, tensors, at) for v in obj)
    return obj


def _skeleton(value: Any, at: list[int]) -> Any:
    """The value with its tensors (``tensor_leaves`` order) replaced by output markers."""
    if isinstance(value, Tensor):
        at[0] += 1
        return {GRAPH_OUTPUT: at[0] - 1}
    if isinstance(value, dict):
        return {k: _skeleton(v, at) for k, v in value.items()}
    if isinstance(value, list):
        return [_skeleton(v, at) for v in value]
    if isinstance(value, tuple):  # a named tuple too (torch.return_types): its fields
        return tuple(_skeleton(v, at) for v in value)
    return value


def encode_graph(module: Any) -> dict:
    """A traced GraphModule's nodes as plain data, at most GRAPH_NODES + 1 of them (``size``
    counts them all, so the checker refuses a longer graph without reading it)."""
    index: dict[Any, int] = {}
    nodes: list[dict] = []
    outputs: list[Any] = []
    inputs = 0
    size = 0
    for node in module.graph.nodes:
        if node.op == "output":
            outputs = [_argument(a, index) for a in node.args[0]]
            continue
        size += 1
        if len(nodes) > GRAPH_NODES:
            continue
        index[node] = len(nodes)
        if node.op == "placeholder":
            nodes.append({"op": "input", "index": inputs})
            inputs += 1
        elif node.op == "get_attr":
            nodes.append(_constant(getattr(module, node.target)))
        elif node.target is torch._C._set_grad_enabled:
            nodes.append({"op": "grad_enabled", "value": bool(node.args[0])})
        elif node.target is operator.getitem:
            nodes.append({"op": "getitem", "args": [_argument(a, index) for a in node.args]})
        elif isinstance(node.target, torch._ops.OpOverload):
            nodes.append(
                {
                    "op": node.target._schema.name,
                    "overload": node.target._overloadname,
                    "args": [_argument(a, index) for a in node.args],
                    "kwargs": {k: _argument(v, index) for k, v in node.kwargs.items()},
                }
            )
        else:
            nodes.append({"op": f"python:{getattr(node.target, '__name__', '?')}"})
    return {"nodes": nodes, "outputs": outputs, "size": size}


def _constant(value: Any) -> dict:
    """A tensor the trace did not compute: its shape, and its value when it is one number (a
    ``torch.tensor(0.5)`` in the student's code) or integers (indices made of a range or a
    list), which the checker may accept; floats of more numbers cross without their values."""
    if not isinstance(value, Tensor):
        return {"op": "constant", "shape": None, "dtype": None, "value": None}
    number: Any = None
    if value.dim() == 0:
        number = value.item()
    elif not value.dtype.is_floating_point and not value.dtype.is_complex:
        number = value.detach().clone()
    return {
        "op": "constant",
        "shape": list(value.shape),
        "dtype": str(value.dtype).removeprefix("torch."),
        "value": number,
    }


def _argument(arg: Any, index: dict) -> Any:
    if isinstance(arg, torch.fx.Node):
        return {"ref": index[arg]} if arg in index else {"unknown": "a node past the bound"}
    if arg is None or isinstance(arg, bool | int | float | str):
        return arg
    if isinstance(arg, list | tuple):
        return [_argument(a, index) for a in arg]
    if isinstance(arg, torch.dtype):
        return {"dtype": str(arg).removeprefix("torch.")}
    if isinstance(arg, torch.device):
        return {"device": str(arg)}
    if isinstance(arg, torch.layout):
        return {"layout": str(arg).removeprefix("torch.")}
    if isinstance(arg, torch.memory_format):
        return {"memory_format": str(arg).removeprefix("torch.")}
    return {"unknown": type(arg).__name__}


_warmed: list[bool] = []  # whether this process traced once already


def ready_tracer() -> None:
    """Import torch._dynamo and trace once, in the worker before it forks: the tracer's first
    use imports torch._inductor's configuration and with it torch._dynamo (a second or more),
    which no check's clock should pay. Done once: at the worker's start for a grading that
    traces (graders/launch.py), else before the fork of the first lesson that does
    (graders/client.py); torch imports torch._dynamo for an optimizer too."""
    if _warmed:
        return
    importlib.import_module("torch._dynamo")
    trace(lambda x, y: (x.max(-1).values + y).sum(), (torch.ones(2, 2), torch.ones(2)), {})
    _warmed.append(True)
