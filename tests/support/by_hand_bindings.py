"""Ways a cross_entropy could bind a library cross-entropy, log-softmax or log-sum-exp: the
"by hand" rule must hold against each, with and without the sandbox (test_hostile.py,
test_sandbox.py). Each binding is a module-level setup and a function."""

from __future__ import annotations

import textwrap
from pathlib import Path

from variants import replace_definition

ROOT = Path(__file__).resolve().parents[2]

BINDINGS = {
    "default-argument": """
        import torch.nn.functional as F
        def cross_entropy(logits, targets, ignore_index=-100, _f=F.cross_entropy):
            return _f(logits, targets, ignore_index=ignore_index)
    """,
    "alias": """
        import torch
        _lse = torch.logsumexp
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            picked = logits[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (_lse(logits[keep], dim=-1) - picked).mean()
    """,
    "closure": """
        import torch
        def _make():
            log_probs = torch.nn.functional.log_softmax
            def nll(logits, targets, keep):
                rows = log_probs(logits[keep], dim=-1)
                return -rows.gather(-1, targets[keep].unsqueeze(-1)).mean()
            return nll
        _nll = _make()
        def cross_entropy(logits, targets, ignore_index=-100):
            return _nll(logits, targets, targets != ignore_index)
    """,
    "tensor-method": """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            picked = logits[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (logits[keep].logsumexp(dim=-1) - picked).mean()
    """,
    "nn-module": """
        import torch
        def cross_entropy(logits, targets, ignore_index=-100):
            return torch.nn.CrossEntropyLoss(ignore_index=ignore_index)(logits, targets)
    """,
    "from-import-as": """
        from torch.special import logsumexp as _norm
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            picked = logits[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (_norm(logits[keep], dim=-1) - picked).mean()
    """,
    # Names built at run time get past the reading of the code; the watch still sees the op.
    "name-built-at-run-time": """
        import torch
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            picked = logits[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            norm = getattr(torch, "log" + "sum" + "exp")
            return (norm(logits[keep], dim=-1) - picked).mean()
    """,
    "bound-after-import": """
        import importlib
        _lib = {}
        def cross_entropy(logits, targets, ignore_index=-100):
            if not _lib:
                functional = importlib.import_module("torch.nn." + "functional")
                _lib["f"] = getattr(functional, "cross_" + "entropy")
            return _lib["f"](logits, targets, ignore_index=ignore_index)
    """,
    "switches-the-watch-off": """
        import torch
        from torch.utils import _python_dispatch as modes
        def cross_entropy(logits, targets, ignore_index=-100):
            while modes._get_current_dispatch_mode_stack():
                modes._pop_mode()
            return torch.nn.functional.cross_entropy(logits, targets, ignore_index=ignore_index)
    """,
}


def objective_with(setup_and_function: str) -> str:
    """objective.py of solutions/ with cross_entropy (and its setup) replaced."""
    source = (ROOT / "solutions" / "objective.py").read_text()
    return replace_definition(source, "cross_entropy", "def cross_entropy(*a, **k): pass") + (
        "\n" + textwrap.dedent(setup_and_function)
    )
