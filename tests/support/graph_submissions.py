"""By-hand functions written as a determined student would (HOSTILE: each must earn nothing) and
as honest students write correct code in unusual ways (HONEST: each keeps every point), for
the graph the checker runs (graders/graph.py, tests/graders/test_graph.py).

Each entry is (lesson module, function, source); the source is the whole definition, run with
``math``, ``numpy``, ``torch`` and ``F`` (torch.nn.functional) imported.
"""

from __future__ import annotations

PRELUDE = "import math\nimport numpy\nimport torch\nimport torch.nn.functional as F\n"

HOSTILE: dict[str, tuple[str, str, str]] = {
    # The library under its own name: the graph holds its kernel.
    "library-layer-norm": (
        "block",
        "layer_norm",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
""",
    ),
    "library-cross-entropy": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    return F.cross_entropy(logits, targets, ignore_index=ignore_index)
""",
    ),
    "sdpa": (
        "attention",
        "attention",
        """
def attention(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
""",
    ),
    "library-gelu": (
        "block",
        "gelu",
        """
def gelu(x):
    return torch.ops.aten.gelu_(x.clone(), approximate="tanh")
""",
    ),
    # GELU element by element with math.tanh, rebuilt with torch.tensor: a constant of the graph.
    "element-by-element-gelu": (
        "block",
        "gelu",
        """
def gelu(x):
    c = math.sqrt(2 / math.pi)
    values = [0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v**3))) for v in x.flatten().tolist()]
    return torch.tensor(values).reshape(x.shape)
""",
    ),
    # Computed where the tracer cannot see: numpy, or torch's dispatch switched off.
    "numpy-log-sum-exp": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    rows = logits[keep]
    array = rows.detach().numpy()
    peak = array.max(axis=-1, keepdims=True)
    norm = torch.from_numpy(numpy.log(numpy.exp(array - peak).sum(axis=-1)) + peak[:, 0])
    picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
    return (norm - picked).mean()
""",
    ),
    "dispatch-switched-off": (
        "block",
        "layer_norm",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C._DisableTorchDispatch():
        out = F.layer_norm(x, x.shape[-1:], weight, bias, eps)
    return out + 0
""",
    ),
    # The library's answer read out as Python numbers and put back into the graph: the graph
    # gives that answer whatever its inputs (the second draw).
    "answer-baked-through-item": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    with torch._C._DisableTorchDispatch():
        answer = F.cross_entropy(logits, targets, ignore_index=ignore_index).item()
    return logits.sum() * 0 + answer
""",
    ),
    "answer-baked-elementwise": (
        "block",
        "layer_norm",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C._DisableTorchDispatch():
        answer = F.layer_norm(x, x.shape[-1:], weight, bias, eps).flatten().tolist()
    flat = x.flatten() * 0
    out = torch.stack([flat[i] + answer[i] for i in range(len(answer))])
    return out.reshape(x.shape)
""",
    ),
    # An op the forbidden list does not name that computes the same: not in the allowlist.
    "unlisted-log-sum-exp": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    rows = logits[keep]
    norm = rows.logcumsumexp(dim=-1)[:, -1]
    picked = rows.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
    return (norm - picked).mean()
""",
    ),
    "optim-adamw": (
        "training",
        "adamw_step",
        """
def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
    leaves = [p.detach().clone().requires_grad_(True) for p in params]
    optimizer = torch.optim.AdamW(leaves, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if state:
        optimizer.load_state_dict(state["torch"])
    for leaf, grad in zip(leaves, grads):
        leaf.grad = grad.clone()
    optimizer.step()
    return [leaf.detach() for leaf in leaves], {"torch": optimizer.state_dict()}
""",
    ),
}

HONEST: dict[str, tuple[str, str, str]] = {
    # GELU's constant under a name of its own (a module-level _C).
    "gelu-constant-named-C": (
        "block",
        "gelu",
        """
_C = math.sqrt(2.0 / math.pi)
def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(_C * (x + 0.044715 * x**3)))
""",
    ),
    "gelu-tensor-constants": (
        "block",
        "gelu",
        """
def gelu(x):
    c = torch.sqrt(torch.tensor(2.0 / torch.pi))
    return 0.5 * x * (1 + torch.tanh(c * (x + torch.tensor(0.044715) * torch.pow(x, 3))))
""",
    ),
    # Means as products with a vector of 1/C.
    "layer-norm-einsum-ones": (
        "block",
        "layer_norm",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    C = x.shape[-1]
    average = torch.ones(C, dtype=x.dtype) / C
    mean = torch.einsum("...c,c->...", x, average).unsqueeze(-1)
    var = torch.einsum("...c,c->...", (x - mean) ** 2, average).unsqueeze(-1)
    out = (x - mean) / torch.sqrt(var + eps) * weight
    return out if bias is None else out + bias
""",
    ),
    "layer-norm-var-mean": (
        "block",
        "layer_norm",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    out = (x - mean) * torch.rsqrt(var + eps) * weight
    return out if bias is None else out + bias
""",
    ),
    # The target's logit picked with a one-hot mask.
    "cross-entropy-one-hot": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    rows, kept = logits[keep], targets[keep]
    peak = rows.amax(dim=-1, keepdim=True)
    norm = peak.squeeze(-1) + (rows - peak).exp().sum(dim=-1).log()
    picked = (F.one_hot(kept, rows.shape[-1]).to(rows.dtype) * rows).sum(dim=-1)
    return (norm - picked).sum() / keep.sum()
""",
    ),
    # The stabilising maximum read out as a Python number: the graph freezes it, and on the
    # second draw the frozen shift still gives the same log-sum-exp.
    "cross-entropy-item-peak": (
        "objective",
        "cross_entropy",
        """
def cross_entropy(logits, targets, ignore_index=-100):
    keep = targets != ignore_index
    rows, kept = logits[keep], targets[keep]
    peak = rows.max().item()
    norm = peak + (rows - peak).exp().sum(dim=-1).log()
    picked = rows[torch.arange(len(kept)), kept]
    return (norm - picked).mean()
""",
    ),
    "attention-einsum": (
        "attention",
        "attention",
        """
def attention(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    weights = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return (weights / weights.sum(dim=-1, keepdim=True)) @ v
""",
    ),
    # The update written into p.data, in place, on a copy.
    "adamw-p-data": (
        "training",
        "adamw_step",
        """
def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
    beta1, beta2 = betas
    step = state.get("step", 0) + 1
    exp_avg = state.get("exp_avg") or [torch.zeros_like(p) for p in params]
    exp_avg_sq = state.get("exp_avg_sq") or [torch.zeros_like(p) for p in params]
    new_params, new_avg, new_avg_sq = [], [], []
    for p, g, m, v in zip(params, grads, exp_avg, exp_avg_sq):
        p = p.clone()
        p.data.mul_(1 - lr * weight_decay)
        m = m.lerp(g, 1 - beta1)
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**step)
        v_hat = v / (1 - beta2**step)
        p.data.add_(-lr * m_hat / (v_hat.sqrt() + eps))
        new_params.append(p)
        new_avg.append(m)
        new_avg_sq.append(v)
    return new_params, {"step": step, "exp_avg": new_avg, "exp_avg_sq": new_avg_sq}
""",
    ),
}
