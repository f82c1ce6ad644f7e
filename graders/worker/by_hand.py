"""The by-hand watch: a hint for honest slips, never what a grade rests on (graders/rules.py,
the checker's reading of the whole package, is)."""

from __future__ import annotations

import dis
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

# "By hand" rules. Some exercises are about computing a thing by hand (cross_entropy: no library
# cross-entropy, log-softmax or log-sum-exp). The rule comes from the manifest
# (course/lessons.toml, ``[[lesson.rule]]``) with the request. While the student's version of
# that very function runs (not another function that uses it: lm_loss may call F.cross_entropy
# freely), a dispatch mode watches every tensor operation that reaches torch's kernels, however
# the function got hold of it: an alias, a default argument, a closure, a Tensor method, an
# nn module. The checker also reads the function's source (graders/rules.py) for those names
# and for anything that would switch this watch off.


class ForbiddenCall(RuntimeError):
    """The student's code called a library function that its exercise asks to write by hand."""


class _Watch(TorchDispatchMode):
    """Refuses the rule's operations and, when the rule lists the allowed ones, every other.

    The mode sees only the operations of its own thread (the lesson process can start no
    other: see ``refuse_syscalls``), and code that switches it off for a while (torch's
    dispatch internals) computes out of its sight. So it also keeps the provenance of every
    tensor: an operation may only use the call's inputs and what earlier watched operations
    made (or their storage), unchanged since; anything else was computed where the watch could
    not see it. Two more eyes keep that provenance whole (see ``_Sight`` and ``_look``): every
    torch function the code calls gets only tensors the watch knows (``tolist``, ``numpy`` and
    storage reads turn no unseen tensor into Python data), and the student's code calls nothing
    while a watch is off. Tensors that torch makes from Python data (``torch.tensor(0.5)``,
    ``x[range(n), targets]``) come to the mode as ``aten::lift_fresh`` of a tensor it never saw:
    known from then on when the torch function that makes them is one of ``FROM_DATA``.
    """

    def __init__(self, rule: dict, inputs: Any, student: str = "") -> None:
        super().__init__()
        self.ops = set(rule["ops"])
        self.allow = set(rule.get("allow", ()))
        self.message = rule["message"]
        self.storages: set[int] = set()
        self.seen: dict[int, tuple[Tensor, int]] = {}  # id -> (tensor kept alive, its version)
        self.sight = _Sight(self)
        self.calls: list[Any] = []  # the torch functions running now, innermost last
        self.student = student  # the folder of the student's files ("": no profile hook)
        self.breach: str | None = None  # the first thing the student's code did unwatched
        self.know(inputs)

    def refuse(self, why: str) -> ForbiddenCall:
        return ForbiddenCall(f"{self.message} ({why})")

    def know(self, obj: Any) -> None:
        for tensor in _tensors(obj):
            self.storages.add(_storage(tensor))
            self.seen[id(tensor)] = (tensor, tensor._version)

    def verify(self, obj: Any) -> None:
        """Every tensor in ``obj`` is known, and as the watch last saw it."""
        for tensor in _tensors(obj):
            entry = self.seen.get(id(tensor))
            if entry is not None and entry[1] != tensor._version:
                raise self.refuse("a tensor was changed where the grader's watch could not see")
            if entry is None and _storage(tensor) not in self.storages:
                raise self.refuse("a tensor was computed where the grader's watch could not see")

    def unwatched(self) -> str | None:
        """Why the watch cannot see what runs now (None: it can)."""
        modes = _get_current_dispatch_mode_stack()
        if not modes or modes[-1] is not self:
            return "the grader's watch was switched off"
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
            return "torch's dispatch was switched off"
        functions = torch.overrides._get_current_function_mode_stack()
        if not functions or functions[-1] is not self.sight:
            return "the grader's watch was switched off"
        if not torch._C._is_torch_function_mode_enabled():
            return "torch functions were switched off"
        return None

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No: torch would wrap this mode's handler to keep torch.compile out of it, and the
        wrapper imports torch._dynamo (a second or more) at the first operation watched.
        Nothing is compiled under the watch."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._schema.name
        if name in self.ops:
            raise self.refuse(f"called {name}")
        # An allowed op's in-place form computes the same (a changed input is the checks'
        # to tell, as a change in place, not as a library call).
        if self.allow and name not in self.allow and name.removesuffix("_") not in self.allow:
            raise self.refuse(f"called {name}, which is not among the operations it may use")
        kwargs = kwargs or {}
        if name in FRESH and self.calls and self.calls[-1] in FROM_DATA:
            self.know((args, kwargs))  # torch's own tensor of Python data, made a moment ago
        self.verify((args, kwargs))
        out = func(*args, **kwargs)
        touched = (args, kwargs, out)
        self.know(touched)
        # An in-place op changes the version of every view of the storage it wrote, and the
        # count goes up only after this returns (autograd's in-place kernel runs above this
        # mode): what it wrote is seen one version on.
        storages = {_storage(tensor) for tensor in _tensors(touched)}
        written = _written(func, args, kwargs)
        for key, (tensor, _) in self.seen.items():
            storage = _storage(tensor)
            if storage in storages:
                self.seen[key] = (tensor, tensor._version + (storage in written))
        # A view made here has a version counter of its own until autograd, after this
        # returns, gives it its base's: it will read the version of the input it views.
        inputs = _tensors((args, kwargs))
        versions = {
            _storage(tensor): tensor._version + (_storage(tensor) in written) for tensor in inputs
        }
        given = {id(tensor) for tensor in inputs}
        for tensor in _tensors(out):
            if id(tensor) not in given and _storage(tensor) in versions:
                self.seen[id(tensor)] = (tensor, versions[_storage(tensor)])
        return out


class _Sight(TorchFunctionMode):
    """The watch's eye on torch's Python functions and Tensor methods, with their arguments:
    each gets only tensors the watch knows, and the innermost one running is kept (for
    ``aten::lift_fresh``)."""

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        self.watch.verify((args, kwargs))
        self.watch.calls.append(func)
        try:
            return func(*args, **kwargs)
        finally:
            self.watch.calls.pop()


# Where torch makes a tensor of Python data (numbers, lists, ranges, numpy arrays) and hands it
# to the dispatcher as aten::lift_fresh: a tensor the watch could not have seen made.
FRESH = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
FROM_DATA = frozenset(
    {
        torch.tensor,
        torch.as_tensor,
        torch.asarray,
        Tensor.new_tensor,
        Tensor.__getitem__,
        Tensor.__setitem__,
    }
)
# What would stop the profile hook that looks for unwatched code (``_look``).
UNHOOKS = frozenset({sys.setprofile, sys.settrace})


def _tensors(obj: Any) -> list[Tensor]:
    from torch.utils._pytree import tree_leaves

    return [leaf for leaf in tree_leaves(obj) if isinstance(leaf, Tensor)]


def _written(func: Any, args: Any, kwargs: dict) -> set[int]:
    """The storages of the tensors an operation writes (its schema's mutable arguments)."""
    found: set[int] = set()
    for index, spec in enumerate(func._schema.arguments):
        if spec.alias_info is None or not spec.alias_info.is_write:
            continue
        value = args[index] if index < len(args) else kwargs.get(spec.name)
        found.update(_storage(tensor) for tensor in _tensors(value))
    return found


def _storage(tensor: Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage of its own (a wrapper)
        return -1


@contextmanager
def watched(
    rule: dict | None, inputs: Any = (), result: list | None = None, student: str = ""
) -> Iterator[None]:
    """Raise ForbiddenCall when an operation the rule refuses runs inside the block, the code
    in ``student`` (a folder) calls anything while the watch is off, or the block's tensors
    (``result``'s first item, once set) come from outside the watch."""
    if not rule:
        yield
        return
    if _threads() > LESSON_THREADS[0]:
        raise ForbiddenCall(f"{rule['message']} (another thread runs, out of the grader's watch)")
    watch = _Watch(rule, inputs, student)
    profile = sys.getprofile()
    look = _look(watch)
    watch.__enter__()
    watch.sight.__enter__()
    sys.setprofile(look)
    try:
        yield
    finally:
        hooked = sys.getprofile() is look
        sys.setprofile(profile)
        why = watch.unwatched()
        if why is not None:  # popped, or buried under a mode of its own
            raise ForbiddenCall(f"{rule['message']} ({why})")
        watch.sight.__exit__(None, None, None)
        watch.__exit__(None, None, None)
        if not hooked:
            raise watch.refuse("the grader's watch was switched off")
    if watch.breach is not None:
        raise watch.refuse(watch.breach)
    if _threads() > LESSON_THREADS[0]:
        raise watch.refuse("another thread runs, out of the grader's watch")
    watch.verify(result or ())


def _look(watch: _Watch) -> Callable:
    """A profile hook: every call the student's own code makes (its frames are files in
    ``watch.student``) finds the watch on, and none unhooks this hook. What runs in a moment
    the watch is off, even one line (``with no_dispatch(): x = f(y).tolist()``), is a call the
    student's code makes in that moment. Python code that torch runs on the student's behalf
    (an operator, a C function calling back, the watch's own handlers) is no such call: only a
    call instruction of the student's frame, with no C function of its own running, of
    something that is not one of the watch's handlers counts."""
    folder = watch.student
    running: set[int] = set()  # the student's frames in a C function call

    def look(frame: Any, event: str, arg: Any) -> None:
        if not folder or watch.breach is not None:
            return
        caller = frame.f_back if event == "call" else frame
        if caller is None or not caller.f_code.co_filename.startswith(folder):
            return
        if event in ("c_return", "c_exception"):
            running.discard(id(caller))
            return
        if event == "c_call":
            running.add(id(caller))
            if arg in UNHOOKS:
                watch.breach = "the grader's watch was switched off"
                return
        elif event != "call" or id(caller) in running or frame.f_code in HANDLERS:
            return
        elif _instruction(caller) not in CALLS:
            return
        watch.breach = watch.unwatched()

    return look


CALLS = frozenset(
    dis.opmap[name] for name in ("CALL", "CALL_KW", "CALL_FUNCTION_EX") if name in dis.opmap
)
# The watch's own handlers, which torch calls from the student's frame (float(x), int(x)).
HANDLERS = frozenset({_Watch.__torch_dispatch__.__code__, _Sight.__torch_function__.__code__})
CACHE = dis.opmap.get("CACHE")  # a call's inline caches, where the frame may stand meanwhile


def _instruction(frame: Any) -> int:
    """The opcode that ``frame`` is running."""
    code, at = frame.f_code.co_code, frame.f_lasti
    while at > 0 and code[at] == CACHE:
        at -= 2
    return code[at]


# The threads of the lesson process before the student's code: no more may run while a by-hand
# function is watched. Where the seccomp filter holds, no thread or process can even start.
LESSON_THREADS = [1 << 30]
SECCOMP = [False]  # whether the lesson process's seccomp filter is in place


def _threads() -> int:
    """The threads of this process, as the kernel and as Python count them."""
    import threading

    try:
        return len(os.listdir("/proc/self/task")) + threading.active_count()
    except OSError:
        return threading.active_count()
