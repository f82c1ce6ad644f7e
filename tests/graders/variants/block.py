"""Planted variants of lesson 5, block (solutions/block.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

import textwrap

from .base import V, Variant

_LN = "def layer_norm(x, weight, bias, eps=1e-5):\n"
_SA = "def self_attention(x, params, n_head, mask=None):\n"
_TB = "def transformer_block(x, params, n_head, mask=None):\n"
_GPT = "def gpt_logits(ids, params, n_head):\n"
_GPT_BODY = """
    x = lookup(params["transformer.wte.weight"], ids)
    x = add_positions(x, params["transformer.wpe.weight"])
    mask = causal_mask(ids.shape[1])
    numbers = sorted({int(k.split(".")[2]) for k in params if k.startswith("transformer.h.")})
    for n in numbers:
        x = transformer_block(x, _under(params, f"transformer.h.{n}."), n_head, mask)
    x = layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
    return F.linear(x, params.get("lm_head.weight", params["transformer.wte.weight"]))
"""


def _block_variant(name: str, label: str, mistake: str | None, head: str, body: str) -> Variant:
    return V("block", name, label, mistake, head + textwrap.indent(textwrap.dedent(body), "    "))


def _gpt(label: str, mistake: str | None, old: str, new: str) -> Variant:
    """A gpt_logits that differs from the reference in one line."""
    assert old in _GPT_BODY
    return _block_variant("gpt_logits", label, mistake, _GPT, _GPT_BODY.replace(old, new))


WRONG: list[Variant] = [
    _block_variant(
        "layer_norm",
        "unbiased-variance",
        "unbiased-variance",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "eps-outside-sqrt",
        "eps-outside-sqrt",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        std = (x - mean).pow(2).mean(-1, keepdim=True).sqrt()
        y = (x - mean) / (std + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "wrong-axis",
        "wrong-axis",
        _LN,
        """
        mean = x.mean(-2, keepdim=True)
        var = (x - mean).pow(2).mean(-2, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "no-affine",
        "no-affine",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
        """,
    ),
    _block_variant(
        "layer_norm",
        "std-not-var",
        "std-not-var",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / ((x - mean).pow(2).mean(-1, keepdim=True) + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "bias-always-added",
        "bias-none",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "no-eps",
        "no-eps",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True)) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "library",
        "by-hand",
        _LN,
        """
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
        """,
    ),
    _block_variant(
        "layer_norm",
        "library-module",
        "by-hand",
        _LN,
        """
        norm = torch.nn.LayerNorm(x.shape[-1], eps=eps, bias=bias is not None)
        with torch.no_grad():
            norm.weight.copy_(weight)
            if bias is not None:
                norm.bias.copy_(bias)
        return norm(x).detach()
        """,
    ),
    _block_variant(
        "layer_norm",
        "name-built-at-run-time",
        "by-hand",
        _LN,
        """
        kernel = getattr(F, "_".join(["layer", "norm"]))
        return kernel(x, x.shape[-1:], weight, bias, eps)
        """,
    ),
    V(
        "block",
        "gelu",
        "erf",
        "erf-gelu",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        """,
    ),
    V(
        "block",
        "gelu",
        "relu",
        "relu",
        """
        def gelu(x):
            return torch.relu(x)
        """,
    ),
    V(
        "block",
        "gelu",
        "square-not-cube",
        "no-cube",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x)))
        """,
    ),
    V(
        "block",
        "gelu",
        "two-over-pi",
        "wrong-constant",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(2.0 / math.pi * (x + 0.044715 * x**3)))
        """,
    ),
    V(
        "block",
        "gelu",
        "library",
        "by-hand",
        """
        def gelu(x):
            return F.gelu(x, approximate="tanh")
        """,
    ),
    V(
        "block",
        "gelu",
        "library-module",
        "by-hand",
        """
        def gelu(x):
            return torch.nn.GELU(approximate="tanh")(x)
        """,
    ),
    V(
        "block",
        "split_heads",
        "interleaved",
        "interleaved",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, T, C // n_head, n_head).permute(0, 3, 1, 2)
        """,
    ),
    V(
        "block",
        "split_heads",
        "no-transpose",
        "no-transpose",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, T, n_head, C // n_head)
        """,
    ),
    V(
        "block",
        "split_heads",
        "reshape",
        "reshape-not-transpose",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, n_head, T, C // n_head)
        """,
    ),
    V(
        "block",
        "split_heads",
        "no-value-error",
        "check:split-heads-indivisible",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            return x.view(B, T, n_head, C // n_head).transpose(1, 2)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "interleaved",
        "interleaved",
        """
        def merge_heads(y):
            B, H, T, D = y.shape
            return y.permute(0, 2, 3, 1).reshape(B, T, H * D)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "reshape",
        "reshape-not-transpose",
        """
        def merge_heads(y):
            B, H, T, D = y.shape
            return y.reshape(B, T, H * D)
        """,
    ),
    _block_variant(
        "self_attention",
        "kqv",
        "qkv-order",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        k, q, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = merge_heads(attention(q, k, v, mask))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "no-causal-mask",
        "no-causal-mask",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        y = merge_heads(attention(q, k, v, mask))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "one-head",
        "no-heads",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = qkv.split(C, dim=-1)
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = attention(q, k, v, mask)
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "no-output-projection",
        "no-output-projection",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        return merge_heads(attention(q, k, v, mask))
        """,
    ),
    _block_variant(
        "self_attention",
        "scaled-by-c",
        "scale-by-c",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        scores = (q @ k.transpose(-2, -1) / math.sqrt(C)).masked_fill(~mask, float("-inf"))
        y = merge_heads(torch.softmax(scores, dim=-1) @ v)
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "weights-not-transposed",
        "weight-not-transposed",
        _SA,
        """
        C = x.shape[-1]
        qkv = x @ params["c_attn.weight"] + params["c_attn.bias"]
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = merge_heads(attention(q, k, v, mask))
        return y @ params["c_proj.weight"] + params["c_proj.bias"]
        """,
    ),
    _block_variant(
        "self_attention",
        "no-bias",
        "no-bias",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"])
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        return F.linear(merge_heads(attention(q, k, v, mask)), params["c_proj.weight"])
        """,
    ),
    _block_variant(
        "self_attention",
        "mask-ignored",
        "mask-ignored",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        y = merge_heads(attention(q, k, v, causal_mask(x.shape[1])))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "erf-gelu",
        "erf-gelu",
        """
        def mlp(x, params):
            hidden = F.gelu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "relu",
        "relu",
        """
        def mlp(x, params):
            hidden = torch.relu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "no-activation",
        "no-activation",
        """
        def mlp(x, params):
            hidden = F.linear(x, params["c_fc.weight"], params.get("c_fc.bias"))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "weights-not-transposed",
        "weight-not-transposed",
        """
        def mlp(x, params):
            hidden = gelu(x @ params["c_fc.weight"] + params["c_fc.bias"])
            return hidden @ params["c_proj.weight"] + params["c_proj.bias"]
        """,
    ),
    _block_variant(
        "transformer_block",
        "post-ln",
        "post-ln",
        _TB,
        """
        attn = self_attention(x, _under(params, "attn."), n_head, mask)
        x = layer_norm(x + attn, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + mlp(x, _under(params, "mlp."))
        return layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-attention-residual",
        "no-attention-residual",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = self_attention(h, _under(params, "attn."), n_head, mask)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return x + mlp(h, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-mlp-residual",
        "no-mlp-residual",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, _under(params, "attn."), n_head, mask)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return mlp(h, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "parallel",
        "parallel",
        _TB,
        """
        h1 = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        h2 = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        attn = self_attention(h1, _under(params, "attn."), n_head, mask)
        return x + attn + mlp(h2, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "ln-1-twice",
        "wrong-norm",
        _TB,
        """
        w, b = params["ln_1.weight"], params.get("ln_1.bias")
        x = x + self_attention(layer_norm(x, w, b), _under(params, "attn."), n_head, mask)
        return x + mlp(layer_norm(x, w, b), _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-norm",
        "no-norm",
        _TB,
        """
        x = x + self_attention(x, _under(params, "attn."), n_head, mask)
        return x + mlp(x, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "mask-dropped",
        "mask-ignored",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, _under(params, "attn."), n_head)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return x + mlp(h, _under(params, "mlp."))
        """,
    ),
    _gpt(
        "no-positions",
        "no-positions",
        '    x = add_positions(x, params["transformer.wpe.weight"])\n',
        "",
    ),
    _gpt(
        "no-final-norm",
        "no-final-norm",
        "    x = layer_norm(x, ",
        "    _ = layer_norm(x, ",
    ),
    _gpt(
        "lm-head-required",
        "untied-head",
        'params.get("lm_head.weight", params["transformer.wte.weight"])',
        'params["lm_head.weight"]',
    ),
    _gpt(
        "string-order",
        "block-order",
        '{int(k.split(".")[2]) for',
        '{k.split(".")[2] for',
    ),
    _gpt(
        "head-ignored",
        "head-ignored",
        'params.get("lm_head.weight", params["transformer.wte.weight"])',
        'params["transformer.wte.weight"]',
    ),
    _gpt(
        "no-causal-mask",
        "no-causal-mask",
        "    mask = causal_mask(ids.shape[1])\n",
        "    mask = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool)\n",
    ),
    _gpt(
        "dict-order",
        "dict-order",
        'sorted({int(k.split(".")[2]) for k in params if k.startswith("transformer.h.")})',
        'dict.fromkeys(k.split(".")[2] for k in params if k.startswith("transformer.h."))',
    ),
    _block_variant(
        "layer_norm",
        "detached-statistics",
        "detached-statistics",
        _LN,
        """
        with torch.no_grad():  # statistics without a gradient
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, keepdim=True, unbiased=False)
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
]


# The classic slips once more, as other students write them: a mistake is one rule broken,
# however the code breaks it.
_GELU = "def gelu(x):\n"
_SA_BODY = """
C = x.shape[-1]
qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
mask = causal_mask(x.shape[1]) if mask is None else mask
y = merge_heads(attention(q, k, v, mask))
return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
"""
_LN_BODY = """
mean = x.mean(-1, keepdim=True)
var = (x - mean).pow(2).mean(-1, keepdim=True)
y = (x - mean) / torch.sqrt(var + eps) * weight
return y if bias is None else y + bias
"""


def _attention(label: str, mistake: str, old: str, new: str) -> Variant:
    assert old in _SA_BODY
    return _block_variant("self_attention", label, mistake, _SA, _SA_BODY.replace(old, new))


def _norm(label: str, mistake: str, body: str) -> Variant:
    return _block_variant("layer_norm", label, mistake, _LN, body)


def _gelu(label: str, mistake: str, inner: str, outer: str = "0.5 * x * (1.0 + torch.tanh(inner))"):
    return _block_variant("gelu", label, mistake, _GELU, f"inner = {inner}\nreturn {outer}\n")


WRONG += [
    _gelu("sqrt-pi-over-2", "wrong-constant", "math.sqrt(math.pi / 2) * (x + 0.044715 * x**3)"),
    _gelu(
        "no-half",
        "wrong-constant",
        "math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)",
        "x * (1.0 + torch.tanh(inner))",
    ),
    _gelu("coefficient-typo", "wrong-constant", "math.sqrt(2 / math.pi) * (x + 0.04715 * x**3)"),
    _gelu("x-alone", "no-cube", "math.sqrt(2 / math.pi) * x"),
    _gelu("x-squared-pow", "no-cube", "math.sqrt(2 / math.pi) * (x + 0.044715 * x**2)"),
    _gelu("coefficient-times-x", "no-cube", "math.sqrt(2 / math.pi) * (x + 0.044715 * x)"),
    _norm(
        "mean-of-everything",
        "wrong-axis",
        """
        mean = x.mean()
        var = ((x - mean) ** 2).mean()
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _norm(
        "first-axis",
        "wrong-axis",
        """
        mean = x.mean(0, keepdim=True)
        var = ((x - mean) ** 2).mean(0, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _norm(
        "no-keepdim",
        "wrong-axis",
        """
        mean = x.mean(-1)
        var = ((x - mean) ** 2).mean(-1)
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _norm(
        "weight-only",
        "no-affine",
        """
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight
        """,
    ),
    _norm(
        "bias-only",
        "no-affine",
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
        return y if bias is None else y + bias
        """,
    ),
    _attention("vkq", "qkv-order", "q, k, v = (split", "v, k, q = (split"),
    _attention("qvk", "qkv-order", "q, k, v = (split", "q, v, k = (split"),
    _attention("kvq", "qkv-order", "q, k, v = (split", "k, v, q = (split"),
    _attention(
        "no-c-attn-bias",
        "no-bias",
        'F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))',
        'F.linear(x, params["c_attn.weight"])',
    ),
    _attention(
        "no-c-proj-bias",
        "no-bias",
        'F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))',
        'F.linear(y, params["c_proj.weight"])',
    ),
    _attention(
        "heads-interleaved",
        "heads-interleaved",
        "q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))",
        "B, T = x.shape[:2]\n"
        "q, k, v = (t.reshape(B, T, C // n_head, n_head).permute(0, 3, 1, 2)"
        " for t in qkv.split(C, dim=-1))",
    ),
    _gpt(
        "head-get-none",
        "untied-head",
        'params.get("lm_head.weight", params["transformer.wte.weight"])',
        'params.get("lm_head.weight")',
    ),
]

RIGHT: list[Variant] = [
    _block_variant(
        "layer_norm",
        "addcmul",
        None,
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        normed = (x - mean) * torch.rsqrt(var + eps)
        return normed * weight if bias is None else torch.addcmul(bias, normed, weight)
        """,
    ),
    _block_variant(
        "layer_norm",
        "var-unbiased-false",
        None,
        _LN,
        """
        mean = x.mean(dim=-1, keepdim=True)
        var = torch.var(x, dim=-1, keepdim=True, unbiased=False)
        out = (x - mean) * torch.rsqrt(var + eps) * weight
        return out + bias if bias is not None else out
        """,
    ),
    _block_variant(
        "layer_norm",
        "mean-of-squares",
        None,
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean
        out = weight * (x - mean) / (var + eps) ** 0.5
        if bias is not None:
            out = out + bias
        return out
        """,
    ),
    V(
        "block",
        "gelu",
        "x-times-x-times-x",
        None,
        """
        def gelu(x):
            c = (2 / math.pi) ** 0.5
            return x * 0.5 * (1 + torch.tanh(c * (x + 0.044715 * x * x * x)))
        """,
    ),
    V(
        "block",
        "gelu",
        "pow",
        None,
        """
        def gelu(x):
            inner = torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))
            return 0.5 * x * (1 + inner.tanh())
        """,
    ),
    V(
        "block",
        "split_heads",
        "view-transpose",
        None,
        """
        def split_heads(x, n_head):
            B, T, C = x.size()
            if C % n_head != 0:
                raise ValueError(f"cannot split C={C} into n_head={n_head} heads")
            return x.view(B, T, n_head, C // n_head).transpose(1, 2)
        """,
    ),
    V(
        "block",
        "split_heads",
        "unflatten-permute",
        None,
        """
        def split_heads(x, n_head):
            C = x.shape[-1]
            if C % n_head:
                raise ValueError(f"{C} channels, {n_head} heads: not divisible")
            return x.unflatten(-1, (n_head, C // n_head)).permute(0, 2, 1, 3)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "permute-flatten",
        None,
        """
        def merge_heads(y):
            return y.permute(0, 2, 1, 3).flatten(2)
        """,
    ),
    _block_variant(
        "self_attention",
        "chunk-and-matmul",
        None,
        _SA,
        """
        def linear(h, name):
            out = h @ params[name + ".weight"].T
            return out + params[name + ".bias"] if name + ".bias" in params else out
        q, k, v = linear(x, "c_attn").chunk(3, dim=-1)
        T = x.shape[1]
        m = mask if mask is not None else torch.tril(torch.ones(T, T, dtype=torch.bool))
        heads = attention(split_heads(q, n_head), split_heads(k, n_head), split_heads(v, n_head), m)
        return linear(merge_heads(heads), "c_proj")
        """,
    ),
    V(
        "block",
        "mlp",
        "matmul",
        None,
        """
        def mlp(x, params):
            h = x @ params["c_fc.weight"].t()
            if "c_fc.bias" in params:
                h = h + params["c_fc.bias"]
            h = gelu(h) @ params["c_proj.weight"].t()
            return h + params["c_proj.bias"] if "c_proj.bias" in params else h
        """,
    ),
    _block_variant(
        "transformer_block",
        "own-prefix-split",
        None,
        _TB,
        """
        attn = {k[len("attn."):]: v for k, v in params.items() if k.startswith("attn.")}
        ffn = {k[len("mlp."):]: v for k, v in params.items() if k.startswith("mlp.")}
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, attn, n_head, mask)
        return x + mlp(layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias")), ffn)
        """,
    ),
    _block_variant(
        "gpt_logits",
        "embedding-and-while",
        None,
        _GPT,
        """
        wte = params["transformer.wte.weight"]
        x = add_positions(F.embedding(ids, wte), params["transformer.wpe.weight"])
        mask = causal_mask(ids.shape[-1]).to(ids.device)
        n = 0
        while f"transformer.h.{n}.ln_1.weight" in params:
            x = transformer_block(x, _under(params, f"transformer.h.{n}."), n_head, mask)
            n += 1
        x = layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
        head = params["lm_head.weight"] if "lm_head.weight" in params else wte
        return x @ head.T
        """,
    ),
]
