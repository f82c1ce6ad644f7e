"""The provided fused loss ships to students (gpt/ is released whole), so it must not hold the
stable log-sum-exp with ``ignore_index`` that the objective lesson's ``cross_entropy`` asks
them to write: its softmax (and, where a probability underflows, its log-sum-exp) is the
library's, an operation outside what the lesson's "by hand" rule allows in ``cross_entropy``,
so copying it earns nothing."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from core.manifest import load_manifest
from gpt.fused_loss import linear_cross_entropy


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name)
        return func(*args, **(kwargs or {}))


def test_the_released_fused_loss_takes_its_log_sum_exp_from_the_library() -> None:
    rule = load_manifest().lesson("objective").rule("cross_entropy")
    assert rule is not None and rule.allow
    h = torch.randn(12, 4)
    w = torch.randn(9, 4)
    y = torch.tensor([3, -100, 0, 8, -100, 1, 2, 2, 5, 7, -100, 4])
    with _Ops() as seen:
        loss = linear_cross_entropy(h, w, y, chunk_rows=5)  # the loss alone: no gradient
    assert torch.allclose(loss, F.cross_entropy(h @ w.T, y), atol=1e-6)
    refused = {name for name in seen.names if name not in rule.allow}
    # Computed by hand (max, subtract, exp, sum, log, gather), it would run only allowed ops.
    assert refused, f"the fused loss runs only ops a by-hand cross_entropy may run: {seen.names}"
