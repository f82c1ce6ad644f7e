"""Lesson 8 — The training loop: schedule, step, evaluation, loop.

Training repeats one step: compute the loss on a batch, backpropagate, clip the gradient,
let the optimizer move the weights. Around it: a learning-rate schedule (warm up, then
decay along a cosine), gradient accumulation to fit large batches in little memory, and
regular evaluation on held-out data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Batch = tuple[Tensor, Tensor]


def next_token_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Mean cross-entropy of ``model(x)`` against ``y``, targets of -100 ignored.

    Provided helper. A model that sets ``fused_loss = True`` (our GPT does) computes the same
    number itself from ``model(x, targets=y)`` without materialising the [B, T, V] logits.
    """
    core = getattr(model, "module", model)  # DistributedDataParallel wraps the model
    if getattr(core, "fused_loss", False):
        return model(x, targets=y)
    logits = model(x)
    return F.cross_entropy(logits.flatten(0, -2).float(), y.flatten(), ignore_index=-100)


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """The learning rate at ``step``: linear warmup, then cosine decay to ``min_lr``.

    - while step < warmup_steps: ``max_lr * (step + 1) / warmup_steps`` (never 0 at step 0);
    - for warmup_steps <= step <= max_steps: follow half a cosine from max_lr down to min_lr,
      ``min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))`` with
      ``progress = (step - warmup_steps) / (max_steps - warmup_steps)``;
    - after max_steps: ``min_lr``.

    Raise ``ValueError`` unless ``0 <= warmup_steps < max_steps``.

    Example:
        >>> [round(lr_at(s, max_lr=1.0, min_lr=0.0, warmup_steps=2, max_steps=4), 3)
        ...  for s in range(6)]
        [0.5, 1.0, 1.0, 0.5, 0.0, 0.0]
    """
    raise NotImplementedError('lr_at in exercises/training.py is not implemented yet (lesson 8, The training loop: see course/chapters/08-training.md#learning-rate-schedule)')


def adamw_step(
    params: list[Tensor],
    grads: list[Tensor],
    state: dict,
    *,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[list[Tensor], dict]:
    """One AdamW step, by hand: new parameters and the optimizer's new state.

    For every parameter p with gradient g (t is this step's number, 1 on the first call):

    - decay the weight, decoupled from the gradient: ``p = p * (1 - lr * weight_decay)``;
    - update the moments: ``m = beta1 * m + (1 - beta1) * g`` and
      ``v = beta2 * v + (1 - beta2) * g * g``;
    - correct their bias (both start at zero, so early averages are too small):
      ``m_hat = m / (1 - beta1 ** t)``, ``v_hat = v / (1 - beta2 ** t)``;
    - step: ``p = p - lr * m_hat / (sqrt(v_hat) + eps)``, eps added *after* the square root.

    Every parameter has moments of its own. Nothing given is changed in place: return new
    tensors, and a new state ``{"step": t, "exp_avg": [m per parameter], "exp_avg_sq":
    [v per parameter]}``. An empty ``state`` means no step was taken yet: moments of zeros.

    Args:
        params: the parameters, tensors of any shapes.
        grads: their gradients, the same shapes.
        state: ``{}`` before the first step, else what the previous call returned.
        lr, betas, eps, weight_decay: as in ``torch.optim.AdamW``.

    Returns:
        (new parameters, new state); equal to ``torch.optim.AdamW`` with the same settings.

    Example:
        >>> p, s = adamw_step([torch.tensor([1.0])], [torch.tensor([0.5])], {}, lr=0.1)
        >>> p[0], s["step"]       # the first step moves every weight by about lr
        (tensor([0.9000]), 1)
    """
    raise NotImplementedError('adamw_step in exercises/training.py is not implemented yet (lesson 8, The training loop: see course/chapters/08-training.md#adamw-by-hand)')


def train_step(
    model: nn.Module,
    micro_batches: list[Batch],
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float = 1.0,
) -> float:
    """One optimizer step, accumulating gradients over several micro-batches.

    Put the model in train mode. For each (x, y): the loss is the cross-entropy of
    ``model(x)`` (logits [B, T, V]) against y, targets of -100 ignored (``next_token_loss``
    computes it). Backpropagate ``loss / len(micro_batches)``: gradients add up across
    ``backward`` calls, so dividing makes k micro-batches give the same gradient as one batch
    k times as large. Then clip the total gradient norm to ``max_grad_norm``, step the
    optimizer and zero the gradients.

    Returns:
        The mean of the micro-batch losses, as a Python float.
    """
    raise NotImplementedError('train_step in exercises/training.py is not implemented yet (lesson 8, The training loop: see course/chapters/08-training.md#a-training-step)')


def evaluate(model: nn.Module, batches: Iterable[Batch]) -> float:
    """Mean loss over ``batches``, without gradients and in eval mode.

    Each batch's loss is ``next_token_loss`` (targets of -100 ignored); the result is the
    plain mean of the per-batch losses. Leave the model in the mode it was in: a loop that
    evaluates halfway through training must keep training with dropout on.
    """
    raise NotImplementedError('evaluate in exercises/training.py is not implemented yet (lesson 8, The training loop: see course/chapters/08-training.md#evaluation)')


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_batches: Iterable[Batch],
    *,
    steps: int,
    grad_accum: int,
    lr_schedule: Callable[[int], float],
    eval_batches: Iterable[Batch] | None = None,
    eval_every: int | None = None,
) -> list[dict]:
    """The training loop.

    Run ``steps`` optimizer steps numbered 0, 1, ... Before step s, set every param group's
    ``lr`` to ``lr_schedule(s)``. Each step takes the next ``grad_accum`` batches from
    ``train_batches`` for one ``train_step``; when the batches run out, start a fresh
    ``iter(train_batches)`` (a shuffling DataLoader then reshuffles). When ``eval_batches`` is
    given, evaluate after every ``eval_every``-th step (steps eval_every-1, 2*eval_every-1, ...
    when set) and after the last step.

    Returns:
        One dict per step: ``{"step": s, "lr": lr, "loss": loss}`` plus ``"eval_loss"`` on
        steps that evaluated.
    """
    raise NotImplementedError('fit in exercises/training.py is not implemented yet (lesson 8, The training loop: see course/chapters/08-training.md#the-loop)')


def _cycle(batches: Iterable[Batch]) -> Iterator[Batch]:
    """Endless batches: a fresh ``iter()`` each time the iterable runs out."""
    while True:
        empty = True
        for batch in batches:
            empty = False
            yield batch
        if empty:
            raise ValueError("train_batches yielded no batch; is the dataset shorter than a batch?")
