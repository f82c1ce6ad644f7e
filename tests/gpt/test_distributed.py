"""Training on two processes with torchrun equals training on one with the same global batch.

Everything runs on the CPU with gloo over loopback (127.0.0.1, a free port). The runs are
tiny (the ``micro`` preset, a few steps, the lessons' tokenizer with 300 ranks rather than
GPT-2's 50,257-way output layer) and use dropout 0, so one process and two compute the same
numbers up to float rounding.

The commands are forked from the fork server's warm template (tests/support/forkserver.py),
torchrun's workers too (``--run-path --start-method fork``: torchrun forks them from its own
process, tests/support/as_module.py), except in test_two_processes_give_the_losses_of_one,
which runs ``torchrun -m gpt.train`` cold, as users run it: a fresh interpreter per process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from support import forkserver

from gpt import distributed
from gpt.model import GPT, GPTConfig
from solutions import training

pytestmark = pytest.mark.slow  # torchrun starts processes that train
ROOT = Path(__file__).resolve().parents[2]
AS_MODULE = ROOT / "tests" / "support" / "as_module.py"
RTOL = 1e-5

# Steps 0-1 warm up; with --steps 3 or --steps 5 the schedule of steps 0-2 is the same, so a
# run stopped after 3 steps and resumed to 5 must equal a straight run of 5.
FLAGS = [
    "--preset", "micro", "--batch-size", "4", "--grad-accum", "2", "--context-length", "16",
    "--stride", "16", "--warmup-steps", "2", "--dropout", "0", "--eval-every", "2",
    "--eval-batches", "2", "--checkpoint-every", "2", "--sample-tokens", "3",
    "--device", "cpu", "--dtype", "float32", "--lr", "5e-3", "--tokenizer", "lesson",
    "--vocab-size", "300",
]  # fmt: skip


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if Path("/sys/class/net/lo").exists():
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    return env


def _train(
    corpus: Path, out: Path, steps: int, nproc: int = 1, *, cold: bool = False
) -> subprocess.CompletedProcess:
    """``python -m gpt.train``, under torchrun with ``nproc`` processes; forked (see the
    module's docstring), or every process a fresh interpreter when ``cold``."""
    args = ["-m", "gpt.train", *FLAGS, "--corpus", str(corpus), "--out", str(out)]
    args += ["--steps", str(steps)]
    if nproc > 1:
        # --standalone: torchrun binds a free port itself (a port picked here and released
        # could be taken by another process before torchrun binds it).
        launcher = [
            "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
        ]  # fmt: skip
        if not cold:
            launcher += ["--run-path", "--start-method", "fork", str(AS_MODULE)]
            args = args[1:]  # as_module.py takes the module's name
        args = launcher + args
    done = forkserver.run(
        args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=1800, cold=cold
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _assert_same_run(got: list[dict], want: list[dict]) -> None:
    """Same steps, learning rates and losses; evaluations agree where both ran one."""
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for mine, theirs in zip(got, want, strict=True):
        assert mine["lr"] == theirs["lr"]
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=RTOL)
        if "eval_loss" in mine and "eval_loss" in theirs:
            assert mine["eval_loss"] == pytest.approx(theirs["eval_loss"], rel=RTOL)
    assert got[-1]["eval_loss"] == pytest.approx(want[-1]["eval_loss"], rel=RTOL)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made-up sentences: about 3,700 tokens of the lessons' merges (2,500 of GPT-2's)."""
    rng = random.Random(1)
    words = "the a cat dog river kite clock door tide watches follows remembers ignores".split()
    text = " ".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(4, 9))).capitalize() + "."
        for _ in range(300)
    )
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def single(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """One process, 5 steps: the reference numbers."""
    out = tmp_path_factory.mktemp("single") / "run"
    _train(corpus, out, steps=5)
    return _metrics(out)


def test_two_processes_give_the_losses_of_one(
    corpus: Path, single: list[dict], tmp_path: Path
) -> None:
    # cold: the one run of torchrun as users start it (forkserver.COLD_STARTS)
    done = _train(corpus, tmp_path / "ddp", steps=5, nproc=2, cold=True)
    got = _metrics(tmp_path / "ddp")
    _assert_same_run(got, single)
    assert len({round(r["loss"], 4) for r in got}) > 1  # it trained: the loss moved
    assert done.stdout.count("Trained ") == 1  # one report, from rank 0
    state = torch.load(tmp_path / "ddp" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 5 and len(state["rng_per_rank"]) == 2
    assert all(not key.startswith(("module.", "ddp.")) for key in state["model"])  # unwrapped


def test_resumed_distributed_run_continues_exactly(
    corpus: Path, single: list[dict], tmp_path: Path
) -> None:
    out = tmp_path / "ddp"
    _train(corpus, out, steps=3, nproc=2)
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 3
    _train(corpus, out, steps=5, nproc=2)  # resumes at step 3
    _assert_same_run(_metrics(out), single)


def test_a_batch_that_does_not_split_over_the_processes_is_one_clear_line(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt import train

    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    cfg = train.TrainConfig(
        preset="micro", corpus=str(corpus), out=str(tmp_path), batch_size=4, context_length=32
    )
    with pytest.raises(train.UsageError, match="--batch-size 4 does not split evenly over 3"):
        train.run(cfg, quiet=True)


def test_each_rank_trains_on_its_own_rows_of_every_batch(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """train.run as rank 0 and rank 1 of 2 (no process group: the collectives are stubbed)."""
    from gpt import train

    seen: dict[str, list[torch.Tensor]] = {}

    def recording_step(model, micro_batches, optimizer, max_grad_norm=1.0):
        seen[who].extend(x.clone() for x, _ in micro_batches)
        return 1.0

    monkeypatch.setattr(training, "train_step", recording_step)
    monkeypatch.setattr(
        distributed, "process_group", lambda world, device: contextlib.nullcontext()
    )
    monkeypatch.setattr(distributed, "SyncOnLastMicroBatch", lambda model, device: model)
    monkeypatch.setattr(distributed, "mean", lambda value, world, device: value)
    monkeypatch.setattr(distributed, "gather", lambda value, world: [value] * world.size)
    monkeypatch.setattr(distributed, "any_rank", lambda flag, world, device: flag)
    cfg = train.TrainConfig(
        preset="micro", corpus=str(corpus), steps=2, warmup_steps=1, batch_size=4,
        grad_accum=2, context_length=16, stride=16, eval_batches=1, sample_tokens=1,
    )  # fmt: skip
    for who in ("single", "0", "1"):
        seen[who] = []
        if who == "single":
            monkeypatch.delenv("WORLD_SIZE", raising=False)
        else:
            monkeypatch.setenv("WORLD_SIZE", "2")
            monkeypatch.setenv("RANK", who)
        report = train.run(dataclasses.replace(cfg, out=str(tmp_path / who)), quiet=True)
        assert bool(report) == (who != "1")  # rank 1 reports nothing ...
    assert not (tmp_path / "1").exists()  # ... and writes nothing
    assert len(seen["single"]) == 4  # 2 steps x 2 micro-batches of 4 rows
    for whole, first, second in zip(seen["single"], seen["0"], seen["1"], strict=True):
        assert whole.shape[0] == 4 and first.shape[0] == second.shape[0] == 2
        assert torch.equal(torch.cat([first, second]), whole)


def test_shards_cover_the_global_batch_once() -> None:
    x, y = torch.arange(24).view(6, 4), torch.arange(24).view(6, 4) + 100
    shards = [distributed.World(rank=r, size=3).shard((x, y)) for r in range(3)]
    assert torch.equal(torch.cat([s[0] for s in shards]), x)
    assert torch.equal(torch.cat([s[1] for s in shards]), y)
    assert distributed.World().shard((x, y))[0] is x


def test_gradients_are_all_reduced_on_the_last_micro_batch_only(tmp_path: Path) -> None:
    """DDP's communication hook counts all-reduces: one step of 3 micro-batches -> 1 round."""
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        torch.manual_seed(0)
        config = GPTConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=8)
        model = GPT(config)
        wrapped = distributed.SyncOnLastMicroBatch(model, torch.device("cpu"))
        rounds: list[int] = []

        def counting_hook(state, bucket):
            rounds.append(bucket.index())
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        wrapped.ddp.register_comm_hook(None, counting_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        micro = [(torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))) for _ in range(3)]
        with distributed.micro_batches(wrapped, len(micro)):
            training.train_step(wrapped, micro, optimizer)
        buckets = len(set(rounds))
        assert buckets >= 1 and len(rounds) == buckets  # each bucket reduced exactly once

        rounds.clear()  # and without the wrapper's help, DDP would reduce every micro-batch
        training.train_step(wrapped.ddp, micro, optimizer)
        assert len(rounds) == 3 * buckets

        with pytest.raises(RuntimeError, match="one model"):  # a step that skips a forward
            with distributed.micro_batches(wrapped, 3):
                training.train_step(wrapped, micro[:2], optimizer)
    finally:
        dist.destroy_process_group()
