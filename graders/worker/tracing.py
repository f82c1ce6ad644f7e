"""The student's function as an operator graph, sent to the checker as plain data.

For a function under a by-hand rule the lesson process does not send the function's value:
it records the call's aten operators with a dispatch mode (below autograd, with the places
where the code turned gradients off) and sends what ran, node by node. The checker
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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from .limits import GRAPH_NODES
from .protocol import GRAPH_OUTPUT, tensor_leaves


def trace(fn: Callable, args: tuple, kwargs: dict) -> dict:
    """``fn(*args, **kwargs)`` traced: ``{"graph": ..., "value": skeleton}``. What the student's
    code raises propagates (a by-hand function that validates its input raises as it would)."""
    recorder = _Recorder(tensor_leaves((args, kwargs)))
    with _data_as_detach(), recorder:
        value = fn(*args, **kwargs)
    return {"graph": recorder.graph(tensor_leaves(value)), "value": _skeleton(value, [0])}


class _Recorder(TorchDispatchMode):
    """Every aten operator the call runs, below autograd (its own backward formulas are not
    the student's code), with the places where the code turned gradients off. A plain dispatch
    mode rather than make_fx: make_fx imports torch._dynamo (seconds), which would sit between
    a student's save and the first verdict."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # no torch._dynamo wrapper around __torch_dispatch__ (it imports it)

    def __init__(self, inputs: list[Tensor]) -> None:
        super().__init__()
        self.nodes: list[dict] = []
        self.size = 0  # every node, the ones past the bound included
        self.refs: dict[int, int] = {}  # id of a tensor the call saw -> its node
        self.kept: list[Tensor] = []  # those tensors, alive, so that no id is reused
        self.grad = torch.is_grad_enabled()
        for at, tensor in enumerate(inputs):
            self._node({"op": "input", "index": at}, tensor)

    def _node(self, node: dict, tensor: Tensor | None = None) -> int:
        self.size += 1
        if len(self.nodes) <= GRAPH_NODES:
            self.nodes.append(node)
        if tensor is not None:
            self.refs[id(tensor)] = len(self.nodes) - 1
            self.kept.append(tensor)
        return len(self.nodes) - 1

    def _ref(self, tensor: Tensor) -> dict:
        """A tensor as an argument: its node, or a constant node for one the call did not make
        (``torch.tensor(0.5)``, a numpy round trip, a computation with dispatch switched off)."""
        if id(tensor) not in self.refs:
            self._node(_constant(tensor), tensor)
        at = self.refs[id(tensor)]
        return {"ref": at} if at < len(self.nodes) else {"unknown": "a node past the bound"}

    def _argument(self, arg: Any) -> Any:
        if isinstance(arg, Tensor):
            return self._ref(arg)
        if isinstance(arg, list | tuple):
            return [self._argument(a) for a in arg]
        return _plain(arg)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if torch.is_grad_enabled() != self.grad:  # torch.no_grad() entered or left
            self.grad = torch.is_grad_enabled()
            self._node({"op": "grad_enabled", "value": self.grad})
        node = {
            "op": func._schema.name,
            "overload": func._overloadname,
            "args": [self._argument(a) for a in args],
            "kwargs": {k: self._argument(v) for k, v in kwargs.items()},
        }
        result = func(*args, **kwargs)
        if isinstance(result, Tensor):
            self._node(node, result)
        else:
            at = self._node(node)
            if isinstance(result, list | tuple):  # one getitem node for each tensor in it
                for k, part in enumerate(result):
                    if isinstance(part, Tensor):
                        self._node({"op": "getitem", "args": [{"ref": at}, k]}, part)
        return result

    def graph(self, outputs: list[Tensor]) -> dict:
        refs = [self._ref(tensor) for tensor in outputs]
        return {"nodes": self.nodes, "outputs": refs, "size": self.size}


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


def _plain(arg: Any) -> Any:
    """An operator's argument other than a tensor, as plain data."""
    if arg is None or isinstance(arg, bool | int | float | str):
        return arg
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
    """Trace once, in the worker before it forks, for a grading that traces (graders/launch.py):
    the first use of a dispatch mode imports a few modules, on no check's clock."""
    if _warmed:
        return
    trace(lambda x, y: (x.max(-1).values + y).sum(), (torch.ones(2, 2), torch.ones(2)), {})
    _warmed.append(True)
