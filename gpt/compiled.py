"""``torch.compile`` for training: when it is used, and falling back to eager when it fails.

``--compile`` takes ``auto`` (the default), ``on`` or ``off``. ``auto`` compiles on a CUDA GPU,
where fusing the elementwise work between the matrix multiplies pays from the first minutes.
On a CPU it is a measured trial (``AutoTrial``): a run with minutes of steps ahead times a few
eager steps, compiles, times a few compiled steps and keeps the faster; a short run (a test, a
smoke run) never pays the compile and stays eager without trying.

What is compiled on a CPU is the transformer blocks (layer norm, attention with its dropout,
GELU, residual adds: many small passes that inductor fuses), not the chunked output layer,
whose large matrix multiplies compiling leaves as they are and whose traced loop was slower
(``python bench/train_throughput.py --compile`` measures both). Elsewhere the whole model is.
Dropout under inductor draws its masks from eager's generator (``fallback_random``), so a
compiled CPU run computes the eager run's numbers, within float rounding.

``on`` compiles wherever a compiler is there. Modules are compiled in place
(``nn.Module.compile``), so the ``state_dict`` and checkpoints are the eager model's. Inductor
needs a C++ compiler on the CPU (and Triton on a GPU); when it is missing, or the first step
fails to compile, the run goes on eager and says so in one line. Evaluation and sampling run
eager: their shapes differ from training's and would each cost a compilation of their own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
from collections.abc import Iterator

import torch
from torch import nn

CHOICES = ("auto", "on", "off")
# Inductor's options on a CPU: dropout through aten's generator, so its masks are eager's.
CPU_OPTIONS = {"fallback_random": True}


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
    """Whether ``--compile CHOICE`` compiles on ``device`` from the start (before checking it
    can); ``auto`` on a CPU compiles later, if its trial says so (``AutoTrial``)."""
    return choice == "on" or (choice == "auto" and device.type == "cuda")


def targets(model: nn.Module, device: torch.device) -> list[nn.Module]:
    """The modules to compile: on a CPU the model's transformer blocks where it has library
    ones (``gpt.model.GPT`` with ``block="fused"``), else the whole model."""
    blocks = getattr(getattr(model, "transformer", None), "h", None)
    if device.type == "cpu" and blocks is not None and getattr(model, "block", "") == "fused":
        return list(blocks)
    return [model]


def compile_now(model: nn.Module, device: torch.device) -> None:
    """Compile ``targets(model, device)`` in place (each compiles at its first call)."""
    options = CPU_OPTIONS if device.type == "cpu" else None
    for module in targets(model, device):
        module.compile(options=options)


def compile_model(model: nn.Module, choice: str, device: torch.device) -> str | None:
    """Compile ``model`` in place when ``choice`` asks for it and it can be done here.

    Returns the line to print: what was decided and why (None: nothing to say, eager by choice
    or, for ``auto`` on a CPU, until ``AutoTrial`` decides).
    """
    if not wanted(choice, device):
        return None
    reason = unavailable(device)
    if reason is not None:
        return f"training eager: {reason}"
    compile_now(model, device)
    return "training compiled (torch.compile; the first step compiles, then steps are faster)"


def is_compiled(model: nn.Module) -> bool:
    return any(getattr(m, "_compiled_call_impl", None) is not None for m in model.modules())


def decompile(model: nn.Module) -> None:
    """Undo ``compile_now``: every module runs eager again, with the same parameters."""
    for module in model.modules():
        module._compiled_call_impl = None


def compile_failure(error: BaseException) -> bool:
    """Whether ``error`` came from the compiler rather than from the model's own code."""
    compiler = ("torch._dynamo", "torch._inductor", "torch.fx", "triton")
    seen: BaseException | None = error
    while seen is not None:
        if type(seen).__module__.startswith(compiler):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class AutoTrial:
    """``--compile auto`` on a CPU: compile only where the run's own step times say it pays.

    Fed each step's seconds (``after_step``). The first step pays one-off costs (allocation,
    threads) and the first compiled step the compilation, so neither is timed. After
    ``TIMED`` eager steps, a run whose steps left would take less than ``MIN_EAGER_SECONDS``
    eager stays eager; otherwise it compiles, times ``TIMED`` compiled steps and keeps whichever
    median step was shorter. Both run the same numbers, so the choice changes the run's speed,
    never its result.

    A trial is not free: with inductor's cache empty, as on a fresh machine, compiling the
    blocks takes half a minute to a minute of a 2-core CPU, and on this course's CPU shapes the
    compiled steps have measured slower (docs/developers.md), so a trial is usually that time
    lost. Ten minutes of eager steps is where a 10% faster compiled step would win it back;
    below that a run stays eager. (At 180 s, `nox -s train` on a machine a seventh slower than
    a quiet one crossed the line: 216 s wall against 175 s.)
    """

    TIMED = 3
    MIN_EAGER_SECONDS = 600.0

    def __init__(self, model: nn.Module, device: torch.device, steps: int) -> None:
        self.model, self.device, self.steps_left = model, device, steps
        self.eager: list[float] = []
        self.compiled: list[float] = []  # the first is the step that compiled
        self.tried = self.done = False

    def after_step(self, seconds: float) -> str | None:
        """Record a finished step's time; the line to print when a decision is made."""
        self.steps_left -= 1
        if self.done:
            return None
        if self.tried and not is_compiled(self.model):
            self.done = True  # the compile failed and the run went eager, saying so
            return None
        timings = self.compiled if self.tried else self.eager
        timings.append(seconds)
        if len(timings) <= self.TIMED:
            return None
        median = statistics.median(timings[1:])
        if not self.tried:
            if self.steps_left * median < self.MIN_EAGER_SECONDS or unavailable(self.device):
                self.done = True
                return None
            compile_now(self.model, self.device)
            self.tried = True
            return (
                f"compiling (torch.compile): {self.steps_left} steps left at {median:.2f} s "
                "each eager; kept only if the compiled steps are faster (--compile off: never)"
            )
        self.done = True
        eager = statistics.median(self.eager[1:])
        if median < eager:
            return f"training compiled: {median:.2f} s a step against {eager:.2f} s eager"
        decompile(self.model)
        return f"training eager: compiled steps took {median:.2f} s against {eager:.2f} s eager"


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Run a compiled model eager inside the block (evaluation, sampling)."""
    with torch.compiler.set_stance("force_eager"):
        yield
