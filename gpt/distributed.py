"""Training on many processes: ``torchrun`` and DistributedDataParallel.

    torchrun --nproc_per_node 4 -m gpt.train --batch-size 32 ...

torchrun starts one process per GPU (or per CPU worker) and tells each its place through the
environment: ``WORLD_SIZE`` processes in all, this one's ``RANK`` and ``LOCAL_RANK`` (its GPU
on this machine). The training CLI then works like this:

- **Same global batch, whatever the number of processes.** ``--batch-size`` is the global
  number of windows per micro-batch; every process reads the same batch from the same
  ``BatchStream`` and keeps its own shard of ``batch_size / WORLD_SIZE`` rows (rank r keeps
  rows r*b ... r*b + b - 1). One optimizer step still sees ``batch_size x grad_accum``
  windows, so a run on N processes computes what a single process computes with the same
  flags (to float rounding, and exactly so with dropout 0), and a checkpoint can be resumed
  with a different number of processes.
- **Gradients are averaged once per step.** DistributedDataParallel all-reduces gradients
  during ``backward``. With gradient accumulation that is wasted on every micro-batch but the
  last, so ``SyncOnLastMicroBatch`` runs the forward passes of the others inside
  ``no_sync()``. It wraps the model that the lesson's ``train_step`` is given: the same
  ``train_step`` trains on one process or many.
- **Rank 0 writes.** Every rank trains; only rank 0 evaluates, logs metrics, writes
  checkpoints (the unwrapped model's state) and the report. The logged loss is the mean over
  ranks, which is the loss of the global batch.

Backends: NCCL between GPUs, gloo between CPU processes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar, cast

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

Batch = tuple[Tensor, Tensor]
T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """Where this process stands: ``size`` processes in all, this one is ``rank``."""

    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @classmethod
    def from_env(cls) -> World:
        """The world torchrun describes in the environment (a world of one without it)."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size <= 1:
            return cls()
        return cls(
            rank=int(os.environ.get("RANK", "0")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            size=size,
        )

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that evaluates, logs and writes files."""
        return self.rank == 0

    def shard(self, batch: Batch) -> Batch:
        """This rank's rows of a global batch: ``b = B / size`` rows from ``rank * b``."""
        if self.size == 1:
            return batch
        x, y = batch
        rows = x.shape[0] // self.size
        start = self.rank * rows
        return x[start : start + rows], y[start : start + rows]


def rank_device(world: World, device: torch.device) -> torch.device:
    """This process's device: its own GPU (``cuda:LOCAL_RANK``) when training on CUDA."""
    if world.size > 1 and device.type == "cuda":
        return torch.device("cuda", world.local_rank)
    return device


@contextlib.contextmanager
def process_group(world: World, device: torch.device) -> Iterator[None]:
    """Join the process group for the duration (NCCL on CUDA, else gloo), then leave it.

    Does nothing in a world of one, or when the group is already up (the caller owns it).
    """
    if world.size == 1 or dist.is_initialized():
        yield
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        rank=world.rank,
        world_size=world.size,
    )
    try:
        yield
        # Leave together: rank 0 still reports and samples after the last step, and gloo
        # aborts a process whose peer tears its connections down first.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def mean(value: float, world: World, device: torch.device) -> float:
    """The mean of ``value`` over all ranks (every rank gets it)."""
    if world.size == 1:
        return value
    total = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return float(total.item()) / world.size


def any_rank(flag: bool, world: World, device: torch.device) -> bool:
    """True on every rank when ``flag`` is True on any (every rank gets it)."""
    if world.size == 1:
        return flag
    raised = torch.tensor([float(flag)], device=device)
    dist.all_reduce(raised, op=dist.ReduceOp.MAX)
    return bool(raised.item())


def gather(value: T, world: World) -> list[T]:
    """``value`` from every rank, in rank order (every rank gets the list)."""
    if world.size == 1:
        return [value]
    values: list[T | None] = [None] * world.size
    dist.all_gather_object(values, value)
    return cast(list[T], values)  # all_gather_object filled every slot


class SyncOnLastMicroBatch(nn.Module):
    """A DistributedDataParallel model that all-reduces gradients once per optimizer step.

    ``train_step`` runs one forward and one backward per micro-batch. DDP decides at forward
    time whether the coming backward all-reduces, so the forwards of all micro-batches but
    the last run inside ``ddp.no_sync()``: their gradients just add up locally, and the last
    backward averages the sum across ranks. Tell it how many micro-batches come::

        with model.micro_batches(len(micro)):
            loss = training.train_step(model, micro, optimizer)
    """

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        super().__init__()
        ids = [device.index] if device.type == "cuda" else None
        self.ddp = DistributedDataParallel(model, device_ids=ids)
        # next_token_loss asks the model whether it computes its loss itself.
        self.fused_loss = getattr(model, "fused_loss", False)
        self._left: int | None = None

    @contextlib.contextmanager
    def micro_batches(self, n: int) -> Iterator[None]:
        """Expect ``n`` forward passes, one per micro-batch of one optimizer step."""
        self._left = n
        try:
            yield
            if self._left != 0:
                raise RuntimeError(
                    f"train_step ran {n - self._left} forward passes for {n} micro-batches; "
                    "distributed training needs exactly one model(x) call per micro-batch"
                )
        finally:
            self._left = None

    def forward(self, *args, **kwargs):
        if self._left is None or not torch.is_grad_enabled():
            return self.ddp(*args, **kwargs)
        self._left -= 1
        if self._left > 0:
            with self.ddp.no_sync():
                return self.ddp(*args, **kwargs)
        return self.ddp(*args, **kwargs)


def micro_batches(model: nn.Module, n: int) -> contextlib.AbstractContextManager:
    """``model.micro_batches(n)`` for a ``SyncOnLastMicroBatch``; nothing for a plain model."""
    expect = getattr(model, "micro_batches", None)
    return expect(n) if expect is not None else contextlib.nullcontext()
