"""What the checker and the worker share: plain data and the markers.

Both directions are frames (framing.py) of a pickle that names no class or function (see
``plain`` and ``encode``). The worker copies every value to exactly the plain types before
it packs it, so no code of the student's runs while an answer is packed, and nothing a frame
holds can run code in the reader. The checker imports this module, ``framing`` and
``scenarios``; the worker's other modules run only in the worker, which graders/launch.py
starts from the bundle of this package's sources.
"""

from __future__ import annotations

import gc
import io
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

GENERATOR = "__torch_generator__"  # {GENERATOR: seed} in a request becomes a seeded Generator
SHARED = "__shared_tensor__"  # {SHARED: slot} in a call's arguments: a tensor the checker shares
# A proxy's question: what is not plain data crosses as one of these (see proxies.py).
MODULE = "__module__"
GENERATOR_STATE = "__generator_state__"
OPTIMIZER = "__optimizer__"
TABLE = "__table__"
GRAPH_OUTPUT = "__graph_output__"  # {GRAPH_OUTPUT: j} in a traced call's value: its j-th tensor
TABLE_SIZE = 1024
MESSAGE_LIMIT = 2000


class NotPlain(TypeError):
    """A value that is not plain data (see ``plain``)."""


# What crosses between the checker and the worker, in both directions: exactly these types
# (not a subclass of any), tensors of these dtypes on the CPU, nested lists, tuples and dicts.
# Frames are pickles that name no class or function at all (a tensor is a persistent id of
# its dtype, shape and bytes), so reading one runs nothing of the writer's, and the worker
# builds the copy it writes before the pickler sees it, so no code of the student's runs while
# an answer is packed (no __reduce_ex__, no __getstate__, no tensor subclass, no attribute a
# tensor carries). torch.Size crosses as a tuple.
ATOMS = (str, bytes, int, float, bool, complex, type(None))
DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
        torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
        torch.bool,
    )
}  # fmt: skip
DEEPEST = 200  # nesting, checked while a value is copied (a list that holds itself is refused)
# C functions and descriptors, taken before any student code runs: a C type's attributes cannot
# be replaced (torch.Tensor's can: it is a Python class over torch._C.TensorBase).
_TB = torch._C.TensorBase
_qualname = type.__dict__["__qualname__"].__get__
_layout, _device, _dtype = (_TB.__dict__[n].__get__ for n in ("layout", "device", "dtype"))
_shape, _grad = _TB.__dict__["shape"].__get__, _TB.__dict__["requires_grad"].__get__
_detach, _contiguous, _clone, _numel = _TB.detach, _TB.contiguous, _TB.clone, _TB.numel
_resolve_conj, _resolve_neg, _requires_grad_ = _TB.resolve_conj, _TB.resolve_neg, _TB.requires_grad_
_reshape, _view, _numpy = _TB.reshape, _TB.view, _TB.numpy
_dict_items, _tuple_iter = dict.items, tuple.__iter__
_Pickler, _Unpickler = pickle.Pickler, pickle.Unpickler
ATOM_IDS = frozenset(id(kind) for kind in ATOMS)
_setprofile, _settrace = sys.setprofile, sys.settrace
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable
_function_modes = torch._C._len_torch_function_stack
_dispatch_modes = torch._C._len_torch_dispatch_stack


def type_name(value: Any) -> str:
    """The name of ``value``'s class, read without asking the class (or its metaclass)."""
    return str(_qualname(type(value)))


def plain(value: Any, depth: int = 0, memo: dict | None = None) -> Any:
    """A copy of ``value`` made of exactly the types that cross (shared parts stay shared), or
    NotPlain naming what is not. Tensors become detached copies of their data. Nothing of the
    value's own runs: its types are compared by identity, its parts read by C functions."""
    memo = {} if memo is None else memo
    kind = type(value)
    if id(kind) in ATOM_IDS:
        return value
    key = id(value)
    if key in memo:
        return memo[key]
    if depth > DEEPEST:
        raise NotPlain(f"nested more than {DEEPEST} deep")
    if kind is Tensor:
        memo[key] = tensor = _tensor_copy(value)
        return tensor
    if kind is list:
        items: list = []
        memo[key] = items
        items.extend(plain(item, depth + 1, memo) for item in list.__iter__(value))
        return items
    if kind is dict:
        table: dict = {}
        memo[key] = table
        for k, item in _dict_items(value):
            if type(k) is Tensor:
                raise NotPlain("a dict with tensors for keys is not plain data")
            table[plain(k, depth + 1, memo)] = plain(item, depth + 1, memo)
        return table
    if kind is tuple or kind is torch.Size:
        memo[key] = parts = tuple(plain(item, depth + 1, memo) for item in _tuple_iter(value))
        return parts
    raise NotPlain(f"a {type_name(value)} is not plain data")


def _tensor_copy(tensor: Tensor) -> Tensor:
    layout, device, dtype = _layout(tensor), _device(tensor), _dtype(tensor)
    if layout != torch.strided or device.type != "cpu":
        raise NotPlain(f"a {layout} tensor on {device} is not plain data")
    if str(dtype).removeprefix("torch.") not in DTYPES:
        raise NotPlain(f"a tensor of {dtype} is not plain data")
    copy = _clone(_contiguous(_resolve_neg(_resolve_conj(_detach(tensor)))))
    return _requires_grad_(copy, True) if _grad(tensor) else copy


class _Writer(_Pickler):  # type: ignore[misc, valid-type]
    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is not Tensor:
            return None
        flat = _detach(_reshape(obj, (-1,)))
        data = _numpy(_view(flat, torch.uint8)).tobytes() if _numel(flat) else b""
        dtype = str(_dtype(obj)).removeprefix("torch.")
        return ("tensor", dtype, tuple(_shape(obj)), data, bool(_grad(obj)))


class _Reader(_Unpickler):  # type: ignore[misc, valid-type]
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

    def persistent_load(self, pid: Any) -> Tensor:
        return _tensor_of(pid)


def _tensor_of(pid: Any) -> Tensor:
    """A tensor from its persistent id, checked: dtype, shape and the length of its bytes."""
    if type(pid) is not tuple or len(pid) != 5 or pid[0] != "tensor":
        raise pickle.UnpicklingError("an unknown persistent id")
    _, name, shape, data, grad = pid
    dtype = DTYPES.get(name) if type(name) is str else None
    if dtype is None or type(shape) is not tuple or len(shape) > 64 or type(data) is not bytes:
        raise pickle.UnpicklingError("a malformed tensor")
    if not all(type(n) is int and n >= 0 for n in shape) or type(grad) is not bool:
        raise pickle.UnpicklingError("a malformed tensor")
    size = dtype.itemsize
    for n in shape:
        size *= n
    if size != len(data):
        raise pickle.UnpicklingError("a tensor whose bytes do not fit its shape")
    tensor = torch.empty(shape, dtype=dtype)
    if data:
        _view(_reshape(tensor, (-1,)), torch.uint8).copy_(
            torch.frombuffer(bytearray(data), dtype=torch.uint8)
        )
    return tensor.requires_grad_(True) if grad else tensor


def encode(obj: Any) -> bytes:
    """``obj`` (plain data: see ``plain``) as the bytes of one frame."""
    buffer = io.BytesIO()
    _Writer(buffer, protocol=4).dump(plain(obj))
    return buffer.getvalue()


def decode(payload: bytes) -> Any:
    """Plain data only: tensors, numbers, strings, bytes, lists, tuples, dicts, None."""
    return _Reader(io.BytesIO(payload)).load()


# Pickle operations in one frame, value or table that the checker reads (a string or a tensor's
# data is one): this bounds the time the checker spends reading one.
MAX_OPERATIONS = 1 << 20


def too_many_operations(payload: bytes) -> bool:
    """Whether ``payload`` (a pickle) has more than MAX_OPERATIONS operations, counted without
    building anything; False when it is no pickle (decoding it then fails on its own). The
    checker's test before it decodes anything."""
    import pickletools

    if len(payload) <= MAX_OPERATIONS:  # every operation takes a byte at least
        return False
    try:
        for count, _ in enumerate(pickletools.genops(payload)):
            if count >= MAX_OPERATIONS:
                return True
    except Exception:  # noqa: BLE001 - a malformed pickle: decode refuses it
        return False
    return False


def tensor_leaves(obj: Any) -> list[Tensor]:
    """The tensors of a call's inputs or value, in the one order both sides use: depth first,
    through lists, tuples and dict values (in their order)."""
    found: list[Tensor] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


def pack(value: Any) -> dict:
    """A value as a separately decodable payload, or why it could not be sent. Nothing of the
    student's runs meanwhile: no profile or trace hook (they stay off), no finalizer of the
    garbage collector's, no torch mode left on (the value is then refused)."""
    kind = type_name(value)
    _setprofile(None)
    _settrace(None)
    collecting = _gc_isenabled()
    _gc_disable()
    try:
        if _function_modes() or _dispatch_modes():
            raise NotPlain("a torch mode that the student's code pushed is still on")
        return {"type": kind, "payload": encode(value), "error": None}
    except (NotPlain, RecursionError, MemoryError, ValueError, pickle.PicklingError) as error:
        return {"type": kind, "payload": None, "error": _safe_str(error)}
    finally:
        if collecting:
            _gc_enable()


class TooLarge(ValueError):
    """A value with more parts, or deeper nesting, than its reader allows."""


def parts_of(obj: Any, most: int, deepest: int) -> Iterator[Any]:
    """Every part of ``obj`` (itself, the items of its lists and tuples, the keys and values of
    its dicts) each time it is reached: a part shared a million times is a million parts, so
    the walk costs what the value would cost written out. TooLarge past ``most`` parts or
    ``deepest`` levels, before the walk holds more than ``most`` parts."""
    count = 0
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            raise TooLarge(f"nested more than {deepest} deep")
        yield item
        if isinstance(item, list | tuple | dict):
            count += len(item) * (2 if isinstance(item, dict) else 1)
            if count > most:
                raise TooLarge(f"more than {most} parts")
            if isinstance(item, dict):
                stack.extend((part, depth + 1) for pair in item.items() for part in pair)
            else:
                stack.extend((part, depth + 1) for part in item)


def _safe_str(obj: object) -> str:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001
        text = "<unprintable>"
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."
