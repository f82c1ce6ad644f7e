"""`--compile`: when training compiles, the same losses as eager, and eager when compiling fails."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from gpt import compiled, train
from gpt.model import GPT, preset

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _config(tmp_path: Path, corpus: Path, name: str, **overrides) -> train.TrainConfig:
    settings = dict(
        preset="micro",
        corpus=str(corpus),
        # The lessons' merges (300 ranks), not GPT-2's 50,257: what a CPU compiles is the blocks,
        # the same graph whatever the vocabulary (compiled.targets).
        tokenizer="lesson",
        vocab_size=300,
        steps=4,
        batch_size=2,
        context_length=16,
        stride=16,
        warmup_steps=1,
        eval_every=4,
        eval_batches=1,
        sample_tokens=2,
        out=str(tmp_path / name),
    )
    settings.update(overrides)
    return train.TrainConfig(**settings)


def _losses(out: str) -> list[float]:
    lines = (Path(out) / train.METRICS).read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


def test_auto_compiles_on_gpus_only_and_on_compiles_everywhere() -> None:
    assert compiled.wanted("auto", CUDA) and not compiled.wanted("auto", CPU)
    assert compiled.wanted("on", CPU) and compiled.wanted("on", CUDA)
    assert not compiled.wanted("off", CUDA)


def test_a_cpu_compiles_the_library_blocks_and_anything_else_whole() -> None:
    fused = GPT(preset("micro"))
    assert compiled.targets(fused, CPU) == list(fused.transformer.h)
    assert compiled.targets(fused, CUDA) == [fused]
    lesson = GPT(preset("micro"), attention="lesson", block="lesson")
    assert compiled.targets(lesson, CPU) == [lesson]
    compiled.compile_now(fused, CPU)
    assert compiled.is_compiled(fused) and fused._compiled_call_impl is None
    compiled.decompile(fused)
    assert not compiled.is_compiled(fused)


def _trial(monkeypatch: pytest.MonkeyPatch, steps: int) -> compiled.AutoTrial:
    """An AutoTrial whose compiling only marks the model compiled (no compiler runs)."""
    model = nn.Linear(2, 2)

    def mark(module: nn.Module, device: torch.device) -> None:
        module._compiled_call_impl = module._call_impl  # what is_compiled looks for

    monkeypatch.setattr(compiled, "compile_now", mark)
    monkeypatch.setattr(compiled, "unavailable", lambda device: None)
    return compiled.AutoTrial(model, CPU, steps)


def _feed(trial: compiled.AutoTrial, seconds: list[float]) -> list[str]:
    return [note for s in seconds if (note := trial.after_step(s)) is not None]


def test_auto_on_a_cpu_never_compiles_a_run_too_short_to_pay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial = _trial(monkeypatch, steps=500)  # 496 steps left at 1 s: under MIN_EAGER_SECONDS
    assert _feed(trial, [9.0, 1.0, 1.0, 1.0] + [1.0] * 20) == []
    assert trial.done and not compiled.is_compiled(trial.model)


def test_auto_on_a_cpu_keeps_compiled_steps_that_measure_faster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial = _trial(monkeypatch, steps=1000)
    # The first eager step and the compiling step are not timed: 9 s and 60 s count for nothing.
    notes = _feed(trial, [9.0, 1.0, 1.2, 0.9, 60.0, 0.6, 0.5, 0.7] + [0.6] * 5)
    assert notes[0].startswith("compiling (torch.compile): 996 steps left at 1.00 s each eager")
    assert notes[1:] == ["training compiled: 0.60 s a step against 1.00 s eager"]
    assert compiled.is_compiled(trial.model)


def test_auto_on_a_cpu_goes_back_to_eager_when_compiled_steps_are_slower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial = _trial(monkeypatch, steps=1000)
    notes = _feed(trial, [9.0, 1.0, 1.0, 1.0, 60.0, 1.1, 1.3, 1.2, 0.1])
    assert notes[1:] == ["training eager: compiled steps took 1.20 s against 1.00 s eager"]
    assert not compiled.is_compiled(trial.model)


def test_auto_on_a_cpu_says_nothing_more_after_a_failed_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial = _trial(monkeypatch, steps=1000)
    assert len(_feed(trial, [9.0, 1.0, 1.0, 1.0])) == 1
    compiled.decompile(trial.model)  # what step_or_eager does when the compiler fails
    assert _feed(trial, [1.0] * 6) == [] and trial.done


def test_a_cpu_without_a_cxx_compiler_trains_eager_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    model = nn.Linear(2, 2)
    note = compiled.compile_model(model, "on", CPU)
    assert note is not None and "no C++ compiler" in note and "CXX" in note
    assert not compiled.is_compiled(model)
    assert compiled.compile_model(model, "auto", CPU) is None  # auto: eager on CPUs, silently


def test_an_unknown_choice_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    cfg = train.TrainConfig(compile="yes", out=str(tmp_path / "run"))
    with pytest.raises(train.UsageError, match="--compile must be auto .*, on or off"):
        train.validate(cfg)


class _CompilerCrash(Exception):
    """Stands in for inductor's BackendCompilerFailed, by the module it names."""


_CompilerCrash.__module__ = "torch._dynamo.exc"


def test_a_failed_compile_redoes_the_step_eager_from_the_same_random_state(
    capsys: pytest.CaptureFixture,
) -> None:
    model = nn.Linear(3, 1)
    model.compile()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    draws: list[float] = []

    def step() -> float:
        model(torch.ones(3)).sum().backward()  # leaves gradients the redo must not add to
        draws.append(torch.rand(()).item())
        if compiled.is_compiled(model):
            raise _CompilerCrash("C++ compile error: cannot find -lgomp\nmore lines")
        return 1.0

    assert train.step_or_eager(step, model, optimizer, quiet=False) == 1.0
    assert not compiled.is_compiled(model)
    assert draws[0] == draws[1]  # the redo drew what the failed attempt drew
    assert capsys.readouterr().out.strip() == (
        "training eager: torch.compile failed (C++ compile error: cannot find -lgomp)"
    )


def test_an_error_of_the_models_own_code_is_not_taken_for_a_compile_failure() -> None:
    model = nn.Linear(3, 1)
    model.compile()

    def step() -> float:
        raise NotImplementedError("lm_loss is not implemented yet")

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(NotImplementedError):
        train.step_or_eager(step, model, optimizer, quiet=True)
    assert compiled.is_compiled(model)


@pytest.mark.slow
def test_compiled_training_gives_the_eager_losses(tmp_path: Path, small_corpus: Path) -> None:
    """With dropout (the default 0.1): compiled on a CPU, its masks are eager's.

    One graph is compiled (the two blocks share it, no recompilation): 8 kernels forward and 7
    backward. With inductor's cache empty, as on a fresh machine, that is about 20 CPU-seconds,
    nearly all of it g++: its precompiled header, then the kernels. The model's size changes
    none of it. Inductor would first build and load a test program per vector instruction set
    the CPU reports (AVX2, AVX-512: 10 CPU-seconds more); here it takes the instruction sets
    torch's own CPU detection reports (``cpp.vec_isa_ok``), which is what the probes confirm,
    so the kernels it compiles are the same."""
    from torch._inductor import config as inductor

    eager = train.run(_config(tmp_path, small_corpus, "eager", compile="off"), quiet=True)
    with inductor.patch({"cpp.vec_isa_ok": True}):
        fast = train.run(_config(tmp_path, small_corpus, "compiled", compile="on"), quiet=True)
    assert fast["compiled"] and not eager["compiled"]
    for a, b in zip(_losses(eager["out"]), _losses(fast["out"]), strict=True):
        assert math.isclose(a, b, rel_tol=1e-4), (a, b)
    assert math.isclose(eager["val_loss"], fast["val_loss"], rel_tol=1e-4)
    # Its checkpoint is the eager model's: no torch.compile prefix on the parameters' names.
    state = torch.load(Path(fast["out"]) / train.CHECKPOINT, weights_only=True)
    assert not any(name.startswith("_orig_mod") for name in state["model"])
