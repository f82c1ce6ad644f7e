"""bench/train_throughput.py: its arguments, its GPU path's CPU fallback and its FLOP counts.

The numbers it prints are measurements and no test reads them; what is tested is that the GPU
benchmark runs its whole path (one process, then torchrun with DDP) where there is no GPU, so
that it runs unchanged the first time one is there."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support import forkserver

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "train_throughput.py"


def _bench():
    spec = importlib.util.spec_from_file_location("train_throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str, cold: bool = False) -> subprocess.CompletedProcess:
    """``python bench/train_throughput.py ARGS``, forked from the tests' warm template unless
    ``cold`` (tests/support/forkserver.py); what it starts itself starts cold."""
    return forkserver.run(
        [str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard only
        cold=cold,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "--steps and --batch-size must be at least 1"),
        (["--nanogpt", "no/such/model.py"], "no such file (give the path of nanoGPT's model.py)"),
        (["--device", "tpu"], "invalid choice: 'tpu'"),
    ],
)
def test_bad_arguments_are_one_line_before_anything_runs(args: list[str], message: str) -> None:
    done = _run(*args, cold=True)  # before torch loads: forkserver.COLD_STARTS
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fallback is for machines with no GPU")
@pytest.mark.slow
def test_the_gpu_benchmark_runs_its_whole_path_on_a_cpu() -> None:
    done = _run("--device", "cuda", "--steps", "2", "--batch-size", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("no CUDA GPU is visible here")
    rows = {line.split("  ")[0]: line for line in lines if line.startswith(("1 process", "DDP"))}
    assert set(rows) == {"1 process (cpu)", "DDP, 1 process"}, done.stdout
    for row in rows.values():
        assert row.endswith("CPU fallback: measured float32")


def test_a_gpu_it_knows_is_measured_against_its_data_sheet_peak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = _bench()
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    peak, source = bench.gpu_peak()
    assert peak == 989e12 and "data sheet" in source
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100-SXM4-80GB")
    assert bench.gpu_peak()[0] == 312e12


def test_model_flops_count_the_tied_output_layer_once_and_attention() -> None:
    sys.path.insert(0, str(ROOT))
    from gpt.model import GPT, GPTConfig

    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=100))
    counted = _bench().model_flops_per_token(model, 2, 32, 64)
    blocks = 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32  # weights, biases, layer norms, ln_f
    embeddings = 100 * 32  # the token table, which is also the output layer
    assert model.num_parameters(exclude_positions=True) == blocks + embeddings
    assert counted == 6 * (blocks + embeddings) + 12 * 2 * 32 * 64


def test_mfu_is_taken_against_the_higher_of_the_peaks_before_and_after_the_configs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A peak measured at a busy moment is low and would flatter every MFU: the table divides
    by the higher of the two measurements and says both."""
    bench = _bench()
    peaks = iter([150e9, 200e9])
    asked: list[list[str]] = []

    def child(args: list[str]) -> dict:
        asked.append(args)
        if args == ["--peak"]:
            return {"flops": next(peaks)}
        return {
            "config": args[1],
            "tokens_per_s": 2000.0,
            "ms_per_step": 1024.0,
            "model_flops_per_s": 140e9,
            "peak_rss_mb": 900.0,
            "page_faults_per_step": 3.0,
        }

    monkeypatch.setattr(bench, "_child", child)
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", "--configs", "course-tiny"])
    bench.main()
    out = capsys.readouterr().out
    assert [a[0] for a in asked] == ["--peak", "--child", "--peak"]
    assert "float32 peak: 200 GFLOP/s" in out and "150 before the configs, 200 after" in out
    row = next(line for line in out.splitlines() if line.startswith("course-tiny"))
    assert row.split()[3] == "0.70"  # 140 / 200, not 140 / 150
