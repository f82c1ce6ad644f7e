"""AdamW as a ``torch.optim.Optimizer`` whose arithmetic is a lesson's ``adamw_step``.

``torch.optim.AdamW`` is what the fused default trains with. ``LessonAdamW`` keeps PyTorch's
optimizer interface (parameter groups with their own ``lr`` and ``weight_decay``, ``zero_grad``,
``state_dict`` for checkpoints) and hands the numbers to ``training.adamw_step`` of the lessons
it is given: every step of every parameter is then the student's own code.

The lesson's function takes plain lists and a state ``{"step", "exp_avg", "exp_avg_sq"}`` and
returns new tensors. Here each parameter keeps its own entry of that state in ``self.state``
(so a checkpoint saves and restores it as PyTorch's optimizers do), and the parameters of a
group that have taken the same number of steps are stepped together in one call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, overload

import torch
from torch import Tensor

AdamWStep = Callable[..., tuple[list[Tensor], dict]]


class LessonAdamW(torch.optim.Optimizer):
    """AdamW by a lesson's ``adamw_step(params, grads, state, *, lr, betas, eps, weight_decay)``."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        adamw_step: AdamWStep,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        self.adamw_step = adamw_step

    # The overloads of torch.optim.Optimizer.step: no closure, no loss.
    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            # Parameters without a gradient sit the step out, as in torch.optim.AdamW; the
            # others are grouped by how many steps they have taken (their bias correction).
            by_steps: dict[int, list[Tensor]] = {}
            for p in group["params"]:
                if p.grad is not None:
                    by_steps.setdefault(self.state[p].get("step", 0), []).append(p)
            for steps, params in by_steps.items():
                self._step(params, steps, group)
        return loss

    def _step(self, params: list[Tensor], steps: int, group: dict[str, Any]) -> None:
        states = [self.state[p] for p in params]
        state: dict[str, Any] = {}
        if steps:
            state = {
                "step": steps,
                "exp_avg": [s["exp_avg"] for s in states],
                "exp_avg_sq": [s["exp_avg_sq"] for s in states],
            }
        new, state = self.adamw_step(
            [p.detach() for p in params],
            [p.grad for p in params],
            state,
            lr=group["lr"],
            betas=tuple(group["betas"]),
            eps=group["eps"],
            weight_decay=group["weight_decay"],
        )
        shapes = [p.shape for p in params]
        if [getattr(a, "shape", None) for a in new] != shapes:
            raise ValueError(
                "adamw_step returned parameters that do not match the ones it was given "
                "(one new tensor per parameter, of the same shape)"
            )
        for i, (p, value) in enumerate(zip(params, new, strict=True)):
            p.copy_(value)
            self.state[p] = {
                "step": state["step"],
                "exp_avg": state["exp_avg"][i],
                "exp_avg_sq": state["exp_avg_sq"][i],
            }
