"""``torch.compile`` for training: when it is used, and falling back to eager when it fails.

``--compile`` takes ``auto`` (the default), ``on`` or ``off``. ``auto`` compiles on a CUDA GPU,
where fusing the elementwise work between the matrix multiplies pays from the first minutes;
on a CPU it stays eager: on the course's CPU shapes about 85% of the FLOPs are the output
layer's matrix multiplies, which compiling leaves as they are, and the first compiled step
costs tens of seconds (``python bench/train_throughput.py --compile`` measures both).

``on`` compiles wherever a compiler is there. The model is compiled in place
(``nn.Module.compile``), so its ``state_dict`` and checkpoints are the eager model's. Inductor
needs a C++ compiler on the CPU (and Triton on a GPU); when it is missing, or the first step
fails to compile, the run goes on eager and says so in one line. Evaluation and sampling run
eager: their shapes differ from training's and would each cost a compilation of their own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator

import torch
from torch import nn

CHOICES = ("auto", "on", "off")


def unavailable(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot run here, or None when it can."""
    if sys.platform == "win32" and device.type == "cpu":
        return "torch.compile on a Windows CPU needs MSVC, which this run does not look for"
    if device.type == "cpu":
        names = [os.environ.get("CXX", ""), "c++", "g++", "clang++"]
        if not any(name and shutil.which(name) for name in names):
            return "no C++ compiler on PATH (install g++ or clang++, or set CXX)"
    if device.type == "cuda":
        try:
            import triton  # noqa: F401  (inductor's GPU code generator)
        except ImportError:
            return "Triton is not installed (it comes with PyTorch's CUDA wheels)"
    if device.type not in ("cpu", "cuda"):
        return f"compiling for {device.type} is not tried by this course"
    return None


def wanted(choice: str, device: torch.device) -> bool:
    """Whether ``--compile CHOICE`` compiles on ``device`` (before checking it can)."""
    return choice == "on" or (choice == "auto" and device.type == "cuda")


def compile_model(model: nn.Module, choice: str, device: torch.device) -> str | None:
    """Compile ``model`` in place when ``choice`` asks for it and it can be done here.

    Returns the line to print: what was decided and why (None: nothing to say, eager by choice).
    """
    if not wanted(choice, device):
        return None
    reason = unavailable(device)
    if reason is not None:
        return f"training eager: {reason}"
    model.compile()
    return "training compiled (torch.compile; the first step compiles, then steps are faster)"


def is_compiled(model: nn.Module) -> bool:
    return getattr(model, "_compiled_call_impl", None) is not None


def decompile(model: nn.Module) -> None:
    """Undo ``model.compile()``: the model runs eager again, with the same parameters."""
    model._compiled_call_impl = None


def compile_failure(error: BaseException) -> bool:
    """Whether ``error`` came from the compiler rather than from the model's own code."""
    compiler = ("torch._dynamo", "torch._inductor", "torch.fx", "triton")
    seen: BaseException | None = error
    while seen is not None:
        if type(seen).__module__.startswith(compiler):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Run a compiled model eager inside the block (evaluation, sampling)."""
    with torch.compiler.set_stance("force_eager"):
        yield
