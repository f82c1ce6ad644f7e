"""The block lesson's oracles: its checks' answers, correct and mistaken.

The correct answers come from library kernels laid out as gpt/model.py lays out GPT-2
(F.layer_norm, F.gelu with approximate="tanh", F.linear, F.scaled_dot_product_attention), so
they are independent of solutions/block.py; tests/lessons/test_block_lesson.py shows they equal the
provided model. The checker also answers the block functions' proxies with them (the mistake
None).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from graders.checking import summarise_logits

from . import unknown

# -- the provided model's computation, in library kernels ----------------------------------------


def _layer_norm(x: Tensor, weight: Tensor, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def _gelu(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


def _split_heads(x: Tensor, n_head: int) -> Tensor:
    B, T, C = x.shape
    return x.view(B, T, n_head, C // n_head).transpose(1, 2)


def _merge_heads(y: Tensor) -> Tensor:
    B, H, T, D = y.shape
    return y.transpose(1, 2).reshape(B, T, H * D)


def _self_attention(
    x: Tensor, params: dict[str, Tensor], n_head: int, mask: Tensor | None = None
) -> Tensor:
    C = x.shape[-1]
    qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
    q, k, v = (_split_heads(t, n_head) for t in qkv.split(C, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
    return F.linear(_merge_heads(y), params["c_proj.weight"], params.get("c_proj.bias"))


def _mlp(x: Tensor, params: dict[str, Tensor]) -> Tensor:
    h = _gelu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
    return F.linear(h, params["c_proj.weight"], params.get("c_proj.bias"))


def _part(params: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}


def _transformer_block(
    x: Tensor, params: dict[str, Tensor], n_head: int, mask: Tensor | None = None
) -> Tensor:
    ln_1 = _layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
    x = x + _self_attention(ln_1, _part(params, "attn."), n_head, mask)
    ln_2 = _layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
    return x + _mlp(ln_2, _part(params, "mlp."))


def _gpt_logits(ids: Tensor, params: dict[str, Tensor], n_head: int) -> Tensor:
    wte, wpe = params["transformer.wte.weight"], params["transformer.wpe.weight"]
    if ids.shape[-1] > wpe.shape[0]:
        raise ValueError(f"T={ids.shape[-1]} is more than the {wpe.shape[0]} positions")
    x = F.embedding(ids, wte) + wpe[: ids.shape[-1]]
    layers = sorted({int(k.split(".")[2]) for k in params if k.startswith("transformer.h.")})
    for n in layers:
        x = _transformer_block(x, _part(params, f"transformer.h.{n}."), n_head)
    x = _layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
    return F.linear(x, params.get("lm_head.weight", wte))


# -- the answers, correct and mistaken ------------------------------------------------------------


def _normalise(x: Tensor, dims: tuple[int, ...], *, unbiased=False, eps=1e-5, outside=False):
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    if outside:
        return (x - mean) / (var.sqrt() + eps)
    return (x - mean) / (var + eps).sqrt()


def layer_norm(
    x: Tensor, weight: Tensor, bias: Tensor | None, eps: float = 1e-5, mistake: str | None = None
) -> Tensor:
    """F.layer_norm, or what a classic mistake gives (``key:form``: the same mistake written
    another way)."""
    if mistake is None:
        return _layer_norm(x, weight, bias, eps)
    shift = 0 if bias is None else bias
    if mistake == "no-affine":
        return _normalise(x, (-1,), eps=eps)
    if mistake == "no-affine:weight-only":
        return _normalise(x, (-1,), eps=eps) * weight
    if mistake == "no-affine:bias-only":
        return _normalise(x, (-1,), eps=eps) + shift
    if mistake == "wrong-axis:first":
        return _normalise(x, (0,), eps=eps) * weight + shift
    if mistake == "wrong-axis:all":
        return _normalise(x, tuple(range(x.dim())), eps=eps) * weight + shift
    if mistake == "std-not-var":
        centred = x - x.mean(dim=-1, keepdim=True)
        return centred / (x.var(dim=-1, keepdim=True, unbiased=False) + eps) * weight + shift
    forms: dict[str, dict[str, Any]] = {
        "unbiased-variance": dict(dims=(-1,), unbiased=True, eps=eps),
        "eps-outside-sqrt": dict(dims=(-1,), eps=eps, outside=True),
        "wrong-axis": dict(dims=(-2,), eps=eps),
        "no-eps": dict(dims=(-1,), eps=0.0),
    }
    if mistake not in forms:
        raise unknown(mistake)
    return _normalise(x, **forms[mistake]) * weight + shift


def layer_norm_grad(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    upstream: Tensor,
    eps: float = 1e-5,
    mistake: str | None = None,
) -> Tensor:
    """The gradient of ``(layer_norm(x) * upstream).sum()`` with respect to x, or what a
    layer norm whose mean and variance come from a detached x gives."""
    leaf = x.clone().requires_grad_(True)
    if mistake is None:
        out = _layer_norm(leaf, weight, bias, eps)
    elif mistake == "detached-statistics":
        stats = leaf.detach()
        mean = stats.mean(dim=-1, keepdim=True)
        var = stats.var(dim=-1, keepdim=True, unbiased=False)
        out = (leaf - mean) / (var + eps).sqrt() * weight
        out = out if bias is None else out + bias
    else:
        raise unknown(mistake)
    out.backward(upstream)
    assert leaf.grad is not None
    return leaf.grad


def gelu(x: Tensor, mistake: str | None = None) -> Tensor:
    if mistake is None:
        return _gelu(x)
    if mistake == "erf-gelu":
        return F.gelu(x)
    if mistake == "relu":
        return torch.relu(x)
    c = math.sqrt(2 / math.pi)
    forms = {
        "no-cube": lambda: 0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * x * x))),
        "no-cube:x-alone": lambda: 0.5 * x * (1 + torch.tanh(c * x)),
        "no-cube:linear": lambda: 0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * x))),
        "wrong-constant": lambda: 0.5 * x * (1 + torch.tanh(2 / math.pi * (x + 0.044715 * x**3))),
        "wrong-constant:pi-over-2": lambda: (
            0.5 * x * (1 + torch.tanh(math.sqrt(math.pi / 2) * (x + 0.044715 * x**3)))
        ),
        "wrong-constant:no-half": lambda: x * (1 + torch.tanh(c * (x + 0.044715 * x**3))),
    }
    if mistake not in forms:
        raise unknown(mistake)
    return forms[mistake]()


def split_heads(x: Tensor, n_head: int, mistake: str | None = None) -> Tensor:
    B, T, C = x.shape
    D = C // n_head
    if mistake is None:
        return _split_heads(x, n_head)
    if mistake == "interleaved":
        return x.reshape(B, T, D, n_head).permute(0, 3, 1, 2)
    if mistake == "no-transpose":
        return x.reshape(B, T, n_head, D)
    if mistake == "reshape-not-transpose":
        return x.reshape(B, n_head, T, D)
    raise unknown(mistake)


def merge_heads(y: Tensor, mistake: str | None = None) -> Tensor:
    B, H, T, D = y.shape
    if mistake is None:
        return _merge_heads(y)
    if mistake == "interleaved":
        return y.permute(0, 2, 3, 1).reshape(B, T, H * D)
    if mistake == "reshape-not-transpose":
        return y.reshape(B, T, H * D)
    raise unknown(mistake)


def _causal(T: int) -> Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()


def self_attention(
    x: Tensor,
    params: dict[str, Tensor],
    n_head: int,
    mask: Tensor | None = None,
    mistake: str | None = None,
) -> Tensor:
    """The provided model's attention (SDPA), or what a classic mistake gives."""
    if mistake is None:
        return _self_attention(x, params, n_head, mask)
    B, T, C = x.shape
    mistake, _, form = mistake.partition(":")
    if mistake == "no-bias":
        dropped = {"": ".bias", "c-attn": "c_attn.bias", "c-proj": "c_proj.bias"}[form]
        params = {k: v for k, v in params.items() if not k.endswith(dropped)}
    if mistake == "mask-ignored":
        mask = None
    attn_mask = _causal(T) if mask is None else mask
    if mistake == "no-causal-mask":
        attn_mask = torch.ones(T, T, dtype=torch.bool)
    qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
    parts = dict(zip("qkv", qkv.split(C, dim=-1), strict=True))
    if mistake == "qkv-order":  # the thirds read in another order ("kqv" by default)
        parts = dict(zip(form or "kqv", parts.values(), strict=True))
    q, k, v = parts["q"], parts["k"], parts["v"]
    heads = 1 if mistake == "no-heads" else n_head
    if mistake == "heads-interleaved":  # channel c goes to head c % n_head
        q, k, v = (t.unflatten(-1, (C // n_head, n_head)).mT.flatten(-2) for t in (q, k, v))
    q, k, v = (_split_heads(t, heads) for t in (q, k, v))
    scale = 1 / math.sqrt(C) if mistake == "scale-by-c" else None
    y = _merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask, scale=scale))
    if mistake == "heads-interleaved" and form == "merged-interleaved":
        y = y.unflatten(-1, (n_head, C // n_head)).mT.flatten(-2)
    if mistake == "no-output-projection":
        return y
    if mistake == "weight-not-transposed":
        return y @ params["c_proj.weight"] + params.get("c_proj.bias", 0)
    if mistake not in (
        "no-bias",
        "mask-ignored",
        "no-causal-mask",
        "qkv-order",
        "no-heads",
        "scale-by-c",
        "heads-interleaved",
    ):
        raise unknown(mistake)
    return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))


def mlp(x: Tensor, params: dict[str, Tensor], mistake: str | None = None) -> Tensor:
    if mistake is None:
        return _mlp(x, params)
    activation = {"erf-gelu": F.gelu, "relu": torch.relu, "no-activation": lambda h: h}
    if mistake not in activation:
        raise unknown(mistake)
    h = activation[mistake](F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
    return F.linear(h, params["c_proj.weight"], params.get("c_proj.bias"))


def transformer_block(
    x: Tensor,
    params: dict[str, Tensor],
    n_head: int,
    mask: Tensor | None = None,
    mistake: str | None = None,
) -> Tensor:
    """The provided model's pre-LN Block, or what a classic mistake gives."""
    if mistake is None:
        return _transformer_block(x, params, n_head, mask)
    if mistake == "mask-ignored":
        return _transformer_block(x, params, n_head)
    attn, ffn = _part(params, "attn."), _part(params, "mlp.")

    def ln(h: Tensor, name: str) -> Tensor:
        if mistake == "no-norm":
            return h
        if mistake == "wrong-norm":
            name = "ln_1"
        return _layer_norm(h, params[f"{name}.weight"], params.get(f"{name}.bias"))

    def a(h: Tensor) -> Tensor:
        return _self_attention(h, attn, n_head, mask)

    if mistake == "post-ln":
        x = ln(x + a(x), "ln_1")
        return ln(x + _mlp(x, ffn), "ln_2")
    if mistake == "parallel":
        return x + a(ln(x, "ln_1")) + _mlp(ln(x, "ln_2"), ffn)
    if mistake not in ("no-attention-residual", "no-mlp-residual", "no-norm", "wrong-norm"):
        raise unknown(mistake)
    h = a(ln(x, "ln_1"))
    x = h if mistake == "no-attention-residual" else x + h
    h = _mlp(ln(x, "ln_2"), ffn)
    return h if mistake == "no-mlp-residual" else x + h


def gpt_logits(
    ids: Tensor, params: dict[str, Tensor], n_head: int, mistake: str | None = None
) -> Tensor:
    """The provided GPT's logits (library kernels), or what a classic mistake gives."""
    if mistake is None:
        return _gpt_logits(ids, params, n_head)
    if mistake not in (
        "no-positions",
        "no-final-norm",
        "block-order",
        "no-causal-mask",
        "head-ignored",
        "dict-order",
    ):
        raise unknown(mistake)
    wte, T = params["transformer.wte.weight"], ids.shape[-1]
    x = F.embedding(ids, wte)
    if mistake != "no-positions":
        x = x + params["transformer.wpe.weight"][:T]
    layers = sorted({k.split(".")[2] for k in params if k.startswith("transformer.h.")}, key=int)
    if mistake == "block-order":
        layers.sort()  # as strings: 10 and 11 between 1 and 2
    if mistake == "dict-order":  # as the dict lists them
        layers = list(
            dict.fromkeys(k.split(".")[2] for k in params if k.startswith("transformer.h."))
        )
    mask = torch.ones(T, T, dtype=torch.bool) if mistake == "no-causal-mask" else None
    for n in layers:
        x = _transformer_block(x, _part(params, f"transformer.h.{n}."), n_head, mask)
    if mistake != "no-final-norm":
        ln_f = "transformer.ln_f"
        x = _layer_norm(x, params[f"{ln_f}.weight"], params.get(f"{ln_f}.bias"))
    head = wte if mistake == "head-ignored" else params.get("lm_head.weight", wte)
    return F.linear(x, head)


def gpt_logits_summary(
    ids: Tensor, params: dict[str, Tensor], n_head: int, columns: list[int]
) -> dict[str, Tensor]:
    """What a check compares of [B, T, V] logits too large to record whole: the logits of some
    vocabulary ``columns``, every position's log-sum-exp (which every logit enters) and its
    most likely token."""
    return summarise_logits(_gpt_logits(ids, params, n_head), columns)
