"""The training lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from graders import worker

from .. import trusted
from . import unknown

_LR_MISTAKES = {
    "starts-at-zero": "zero_start",
    "ignores-min": "to_zero",
    "no-warmup-offset": "no_offset",
    "keeps-cycling": "cycle",
}


def _lr(
    step: int,
    *,
    max_lr: float,
    min_lr: float,
    warmup_steps: int,
    max_steps: int,
    zero_start: bool = False,
    to_zero: bool = False,
    no_offset: bool = False,
    cycle: bool = False,
) -> float:
    """The contract's schedule, written out; the flags give classic mistakes."""
    floor = 0.0 if to_zero else min_lr
    if step < warmup_steps:
        return max_lr * (step if zero_start else step + 1) / warmup_steps
    if step > max_steps and not cycle:
        return min_lr
    progress = step / max_steps if no_offset else (step - warmup_steps) / (max_steps - warmup_steps)
    return floor + 0.5 * (max_lr - floor) * (1 + math.cos(math.pi * progress))


def lr_at(steps: list[int], mistake: str | None = None, **schedule: Any) -> list[float]:
    """The learning rate at each of ``steps``."""
    if mistake is not None and mistake not in _LR_MISTAKES:
        raise unknown(mistake)
    flags = {_LR_MISTAKES[mistake]: True} if mistake else {}
    return [_lr(step, **schedule, **flags) for step in steps]


_ADAMW_MISTAKES: dict[str, dict[str, Any]] = {
    "no-bias-correction": {"correct": False},
    "no-bias-correction:m": {"correct": "v"},  # only the second moment corrected
    "no-bias-correction:v": {"correct": "m"},  # only the first
    "no-sqrt": {"sqrt": False},
    "decay-after-step": {"decay_first": False},
    "l2-decay": {"l2": True},
    "decay-without-lr": {"decay_lr": False},
    "eps-inside": {"eps_inside": True},
    "step-off-by-one": {"step_offset": 1},
    "step-off-by-one:less": {"step_offset": -1},
    "shared-state": {"shared": True},
}


def _adamw(
    params: list[Tensor],
    grads: list[list[Tensor]],
    *,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    correct: bool | str = True,
    l2: bool = False,
    decay_lr: bool = True,
    eps_inside: bool = False,
    step_offset: int = 0,
    shared: bool = False,
    sqrt: bool = True,
    decay_first: bool = True,
) -> list[list[Tensor]]:
    """AdamW written out, one step per entry of ``grads``; the flags give classic mistakes
    (``correct``: both moments' bias corrected, neither, or only "m" or "v"; ``shared``: one
    pair of moments carried from parameter to parameter; ``decay_first``: the weight shrinks
    before the step is subtracted, not after)."""
    b1, b2 = betas
    p = [t.clone() for t in params]
    m = [torch.zeros_like(t) for t in params]
    v = [torch.zeros_like(t) for t in params]
    after = []
    for t, step_grads in enumerate(grads, start=1 + step_offset):
        carried = (m[-1], v[-1])
        for i, g in enumerate(step_grads):
            if l2:
                g = g + weight_decay * p[i]
            m_i, v_i = carried if shared else (m[i], v[i])
            m_i = b1 * m_i + (1 - b1) * g
            v_i = b2 * v_i + (1 - b2) * g * g
            m[i], v[i] = m_i, v_i
            carried = (m_i, v_i)
            m_hat = m_i / (1 - b1**t) if correct in (True, "m") else m_i
            v_hat = v_i / (1 - b2**t) if correct in (True, "v") else v_i
            root = v_hat.sqrt() if sqrt else v_hat
            denom = (v_hat + eps).sqrt() if eps_inside else root + eps
            decay = 1.0 if l2 else 1 - (lr if decay_lr else 1.0) * weight_decay
            if decay_first:
                p[i] = p[i] * decay - lr * m_hat / denom
            else:
                p[i] = (p[i] - lr * m_hat / denom) * decay
        if shared:
            m, v = [carried[0]] * len(p), [carried[1]] * len(p)
        after.append([t.clone() for t in p])
    return after


def adamw_steps(
    params: list[Tensor],
    grads: list[list[Tensor]],
    mistake: str | None = None,
    *,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> dict:
    """torch.optim.AdamW over the steps of ``grads`` (one list of gradients per step): the
    parameters after each step and the final state; or the parameters a mistake gives."""
    hyper: dict[str, Any] = {
        "lr": lr,
        "betas": tuple(betas),
        "eps": eps,
        "weight_decay": weight_decay,
    }
    if mistake is not None:
        if mistake not in _ADAMW_MISTAKES:
            raise unknown(mistake)
        return {"params": _adamw(params, grads, **hyper, **_ADAMW_MISTAKES[mistake])}
    leaves = [t.clone().requires_grad_(True) for t in params]
    optimizer = torch.optim.AdamW(leaves, **hyper, foreach=False)
    after = []
    for step_grads in grads:
        for leaf, g in zip(leaves, step_grads, strict=True):
            leaf.grad = g.clone()
        optimizer.step()
        after.append([leaf.detach().clone() for leaf in leaves])
    states = [optimizer.state[leaf] for leaf in leaves]
    state = {
        "step": len(grads),
        "exp_avg": [s["exp_avg"].clone() for s in states],
        "exp_avg_sq": [s["exp_avg_sq"].clone() for s in states],
    }
    return {"params": after, "state": state}


def _zero_each_batch(model, micro_batches, optimizer, max_grad_norm=1.0):
    """The mistake: zeroing the gradients inside the loop keeps only the last micro-batch."""
    model.train()
    for x, y in micro_batches:
        optimizer.zero_grad()
        (trusted.next_token_loss(model, x, y) / len(micro_batches)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return 0.0


def _no_step(model, micro_batches, optimizer, max_grad_norm=1.0):
    return 0.0


def _token_weighted(model, micro_batches, optimizer, max_grad_norm=1.0):
    """The mistake: each micro-batch weighted by its share of the counted targets."""
    model.train()
    counts = [int((y != -100).sum()) for _, y in micro_batches]
    for (x, y), n in zip(micro_batches, counts, strict=True):
        (trusted.next_token_loss(model, x, y) * n / sum(counts)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return 0.0


def _loss_step(loss_of):
    """A step whose micro-batch losses come from ``loss_of(logits, y)`` (a mistaken loss)."""

    def step(model, micro_batches, optimizer, max_grad_norm=1.0):
        model.train()
        for x, y in micro_batches:
            logits = model(x).flatten(0, -2).float()
            (loss_of(logits, y.flatten()) / len(micro_batches)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        return 0.0

    return step


def _clamped(logits: Tensor, y: Tensor) -> Tensor:
    """The mistake: ignored targets (-100) turned into class 0."""
    return F.cross_entropy(logits, y.clamp(min=0))


def _over_all(logits: Tensor, y: Tensor) -> Tensor:
    """The mistake: the kept targets' losses summed, divided by every target, ignored ones too."""
    return F.cross_entropy(logits, y, ignore_index=-100, reduction="sum") / y.numel()


_STEPS: dict[str | None, Callable[..., Any]] = {
    None: trusted.train_step,
    "token-weighted": _token_weighted,
    "unscaled": functools.partial(trusted.train_step, scale=False),
    "no-clip": functools.partial(trusted.train_step, clip=False),
    "last-batch-only": _zero_each_batch,
    "no-step": _no_step,
    "clamps-ignored": _loss_step(_clamped),
    "counts-ignored": _loss_step(_over_all),
}


def train_step_params(config: dict, mistake: str | None = None) -> list[list[Tensor]]:
    """The parameters after each step of the train_step scenario."""
    if mistake not in _STEPS:
        raise unknown(mistake)
    return worker.scenario_train_step(_STEPS[mistake], **config)["params"]


def micro_losses(config: dict) -> list[float]:
    """The loss of each micro-batch of the scenario's first step, before the step."""
    model = worker.ToyLM(**config["model"])
    with torch.no_grad():
        return [
            trusted.next_token_loss(model, x, y).item()
            for x, y in config["steps"][0]["micro_batches"]
        ]


def evaluate(config: dict, mistake: str | None = None) -> float:
    """The loss the evaluate scenario returns; "token-weighted" weighs batches by tokens."""
    if mistake is None:
        return worker.scenario_evaluate(trusted.evaluate, **config)["loss"]
    if mistake != "token-weighted":
        raise unknown(mistake)
    model = worker.ToyLM(**config["model"])
    with torch.no_grad():
        logits = [model(x).flatten(0, 1) for x, _ in config["batches"]]
        targets = [y.flatten() for _, y in config["batches"]]
        return F.cross_entropy(torch.cat(logits), torch.cat(targets)).item()


_FIT_MISTAKES = {
    "restarts-each-step": {"restart": True},
    "ignores-accum": {"one_batch": True},
    "lr-after-step": {"lr_after": True},
    "lr-not-set": {"lr_never": True},
    "eval-off-by-one": {"eval_from_zero": True},
    "no-final-eval": {"final_eval": False},
    "cycle-replays": {"replay": True},
    "first-group-only": {"first_group": True},
}


def _fit(
    model,
    optimizer,
    train_batches,
    *,
    steps,
    grad_accum,
    lr_schedule,
    eval_batches=None,
    eval_every=None,
    restart: bool = False,
    lr_after: bool = False,
    lr_never: bool = False,
    eval_from_zero: bool = False,
    final_eval: bool = True,
    replay: bool = False,
    one_batch: bool = False,
    first_group: bool = False,
) -> list[dict]:
    """The loop as the contract says; the flags give classic mistakes."""

    def forever():
        if replay:
            yield from itertools.cycle(train_batches)
        while True:
            empty = True
            for b in train_batches:  # a fresh iter() per pass
                empty = False
                yield b
            if empty:
                return

    def set_lr(lr):
        for group in optimizer.param_groups[:1] if first_group else optimizer.param_groups:
            group["lr"] = lr

    batches = forever()
    history = []
    for step in range(steps):
        lr = lr_schedule(step)
        if not (lr_after or lr_never):
            set_lr(lr)
        if restart:
            batches = forever()
        micro = [next(batches) for _ in range(1 if one_batch else grad_accum)]
        record = {"step": step, "lr": lr, "loss": trusted.train_step(model, micro, optimizer)}
        if lr_after:
            set_lr(lr)
        if eval_every is None:
            due = False
        elif eval_from_zero:
            due = step % eval_every == 0
        else:
            due = (step + 1) % eval_every == 0
        if eval_batches is not None and (due or (final_eval and step == steps - 1)):
            record["eval_loss"] = trusted.evaluate(model, eval_batches)
        history.append(record)
    return history


def fit(config: dict, mistake: str | None = None) -> dict:
    """The fit scenario's result (history, step_lrs, params) with the oracle's loop."""
    if mistake is not None and mistake not in _FIT_MISTAKES:
        raise unknown(mistake)
    flags = {} if mistake is None else _FIT_MISTAKES[mistake]
    return worker.scenario_fit(functools.partial(_fit, **flags), **config)
