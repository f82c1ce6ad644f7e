"""Lesson 5, The transformer block: public checks. The oracles are F.layer_norm, F.gelu
(approximate="tanh") and the provided model's layout with F.scaled_dot_product_attention."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from graders.answers import later, oracle
from graders.checking import (
    AnyOf,
    as_tensor,
    close,
    diagnose,
    difference,
    drawn,
    expect_close,
    fail,
    randint,
    randn,
    relabel,
    summarise_logits,
)
from graders.client import StudentError

# -- inputs -------------------------------------------------------------------------------------


def patterned(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """Numbers in [-scale, scale] from integer arithmetic and one division: the same bits on
    every CPU, so inputs too large to record (GPT-2's vocabulary and positions) need no
    recording (graders/answers.py)."""
    n = 1
    for size in shape:
        n *= size
    shift = drawn(seed) % 2003  # the seed itself, or one mixed with the secret seed
    codes = (torch.arange(n, dtype=torch.int64) * 2654435761 + shift * 7919) % 2003 - 1001
    return (codes.to(torch.float32) / 1001 * scale).reshape(shape)


Draw = Callable[..., torch.Tensor]  # (seed, *shape) -> numbers of spread about 1


def _vector(seed: int, n: int, scale: float, around: float = 0.0, draw: Draw = randn):
    return draw(seed, n) * scale + around


def block_params(seed: int, C: int, bias: bool = True, draw: Draw = randn) -> dict[str, Tensor]:
    """One block's weights under GPT-2's names: random, of the scale that keeps every part of
    the block visible in its output (so that a missing part changes the answer)."""
    shapes = {
        "attn.c_attn": (3 * C, C),
        "attn.c_proj": (C, C),
        "mlp.c_fc": (4 * C, C),
        "mlp.c_proj": (C, 4 * C),
    }
    params: dict[str, torch.Tensor] = {}
    for i, name in enumerate(("ln_1", "ln_2")):
        params[f"{name}.weight"] = _vector(seed + i, C, 0.2, 1.0, draw)
        if bias:
            params[f"{name}.bias"] = _vector(seed + 10 + i, C, 0.2, draw=draw)
    for i, (name, (out, inp)) in enumerate(shapes.items()):
        params[f"{name}.weight"] = draw(seed + 20 + i, out, inp) * (1.0 / inp**0.5)
        if bias:
            params[f"{name}.bias"] = _vector(seed + 30 + i, out, 0.1, draw=draw)
    return params


def _under(params: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {
        name.removeprefix(prefix): value
        for name, value in params.items()
        if name.startswith(prefix)
    }


def gpt_params(
    seed: int, n_layer: int, C: int, V: int, L: int, *, tied: bool = True, bias: bool = True
) -> dict[str, torch.Tensor]:
    """A whole GPT's state dict, GPT-2's names: tied (no ``lm_head.weight``) unless asked."""
    params = {
        "transformer.wte.weight": randn(seed, V, C),
        "transformer.wpe.weight": randn(seed + 1, L, C) * 0.5,
        "transformer.ln_f.weight": _vector(seed + 2, C, 0.2, 1.0),
    }
    if bias:
        params["transformer.ln_f.bias"] = _vector(seed + 3, C, 0.2)
    for n in range(n_layer):
        for key, value in block_params(seed + 100 * (n + 1), C, bias).items():
            params[f"transformer.h.{n}.{key}"] = value
    if not tied:
        params["lm_head.weight"] = randn(seed + 4, V, C)
    return params


def gpt2_layout(seed: int, C: int = 96) -> dict[str, torch.Tensor]:
    """GPT-2's vocabulary (50,257), 1,024 positions and 12 blocks of 12 heads, narrower; every
    number patterned, so that nothing of it is recorded."""
    params = {
        "transformer.wte.weight": patterned(seed, 50257, C, scale=0.1),
        "transformer.wpe.weight": patterned(seed + 1, 1024, C, scale=0.05),
        "transformer.ln_f.weight": _vector(seed + 2, C, 0.2, 1.0, patterned),
        "transformer.ln_f.bias": _vector(seed + 3, C, 0.2, draw=patterned),
    }
    for n in range(12):
        for key, value in block_params(seed + 100 * (n + 1), C, draw=patterned).items():
            params[f"transformer.h.{n}.{key}"] = value
    return params


def document_mask(docs: list[list[int]]) -> torch.Tensor:
    """[B, 1, T, T]: causal within each document (the packing lesson's mask, for every head)."""
    d = torch.tensor(docs)
    T = d.shape[1]
    return ((d[:, :, None] == d[:, None, :]) & torch.ones(T, T, dtype=torch.bool).tril())[:, None]


# -- calling, with the mistakes that raise ---------------------------------------------------

RAISED = (
    ("cannot be multiplied", "weight-not-transposed"),
    ("'lm_head.weight'", "untied-head"),
    ("not NoneType", "untied-head"),  # F.linear(x, params.get("lm_head.weight"))
    ("'NoneType'", "bias-none"),
    ("must match the size of tensor", "wrong-axis"),  # a mean without keepdim
)

# The ways one mistake is written (the oracle's ``key:form``; "" is the key alone).
FORMS = {
    "wrong-axis": ("", "first", "all"),
    "no-affine": ("", "weight-only", "bias-only"),
    "no-cube": ("", "x-alone", "linear"),
    "wrong-constant": ("", "pi-over-2", "no-half"),
    "qkv-order": ("kqv", "vkq", "qvk", "kvq", "vqk"),
    "no-bias": ("", "c-attn", "c-proj"),
    "heads-interleaved": ("", "merged-interleaved"),
}


def call(student, function: str, *args, what: str, allowed: tuple[str, ...] = ()):
    """The student's answer; an exception that a classic mistake raises is named (``allowed``:
    the mistakes of this check)."""
    try:
        return student.call(function, *args)
    except StudentError as error:
        for text, key in RAISED:
            if key in allowed and text in error.message:
                fail(f"{what} raised {error.type_name}: {error.message}", key)
        raise


def check(student, function, args, what, keys, *, raised=(), near=None, **tolerance):
    """Compare the student's ``function(*args)`` with the oracle's, diagnosing ``keys`` (each
    in every form it is written in); ``near``: the mistake an answer close to the right one
    shows when no key matches it (a mistyped constant)."""
    out = call(student, function, *args, what=what, allowed=raised)
    expected = getattr(oracle, function)(*args)
    answer = getattr(later, function)
    mistakes = {
        key: AnyOf(
            *(answer(*args, mistake=f"{key}:{f}" if f else key) for f in FORMS.get(key, ("",)))
        )
        for key in keys
    }
    value = as_tensor(out, what)
    if (
        near is not None
        and value.shape == expected.shape
        and not close(value, expected, **tolerance)
        and close(value, expected, rtol=1e-2, atol=1e-3)
    ):
        detail = f"{what} is close but wrong: {difference(value, expected)}"
        diagnose(value, mistakes, detail=detail, otherwise=near, **tolerance)
    expect_close(out, expected, what, mistakes=mistakes, **tolerance)


# -- layer_norm ---------------------------------------------------------------------------------

LN_MISTAKES = (
    "unbiased-variance",
    "eps-outside-sqrt",
    "wrong-axis",
    "no-affine",
    "std-not-var",
    "no-eps",
)
# Rows of very different scales: eps matters only where the variance is small.
ROW_SCALES = torch.tensor([0.003, 0.03, 1.0, 10.0, 3.0]).view(1, 5, 1)


@pytest.mark.check("layer-norm-matches-torch")
def test_layer_norm_matches_torch(student):
    x = randn(1, 2, 5, 16) * ROW_SCALES
    w, b = _vector(2, 16, 0.5, 1.0), _vector(3, 16, 0.5)
    what = "layer_norm(x [2, 5, 16], weight, bias)"
    raised = ("wrong-axis",)
    check(student, "layer_norm", (x, w, b), what, LN_MISTAKES, raised=raised, atol=1e-5)
    what = "layer_norm(x [5, 16], weight, bias, eps=1e-3)"
    args = (x[0], w, b, 1e-3)
    check(student, "layer_norm", args, what, LN_MISTAKES, raised=raised, atol=1e-5)


@pytest.mark.check("layer-norm-no-bias")
def test_layer_norm_no_bias(student):
    x = randn(4, 3, 8) * 2
    w = _vector(5, 8, 0.5, 1.0)
    check(
        student,
        "layer_norm",
        (x, w, None),
        "layer_norm(x [3, 8], weight, None)",
        LN_MISTAKES,
        raised=("bias-none", "wrong-axis"),
        atol=1e-5,
    )


@pytest.mark.check("layer-norm-constant-rows")
def test_layer_norm_constant_rows(student):
    w, b = _vector(6, 6, 0.5, 1.0), _vector(7, 6, 0.5)
    constant = torch.full((2, 6), 4.0)
    what = "layer_norm of constant rows"
    check(student, "layer_norm", (constant, w, b), what, ("no-eps",), atol=1e-5)
    near = (4.0 + 1e-4 * randn(8, 3, 6)).double()  # float64: see the contract
    check(
        student,
        "layer_norm",
        (near, w.double(), b.double()),
        "layer_norm of near-constant rows (float64)",
        ("no-eps", "eps-outside-sqrt", "unbiased-variance"),
    )


@pytest.mark.check("layer-norm-gradient")
def test_layer_norm_gradient(student):
    x = randn(40, 4, 12) * 2
    w, b, upstream = _vector(41, 12, 0.5, 1.0), _vector(42, 12, 0.5), randn(43, 4, 12)
    got = student.scenario("grad", args=[x, w, b], wrt=[0], weights=upstream)
    grads = got["grads"] if isinstance(got, dict) else None
    if not isinstance(grads, list) or len(grads) != 1 or grads[0] is None:
        fail("no gradient reached x: layer_norm's output is detached from it")
    expect_close(
        grads[0],
        oracle.layer_norm_grad(x, w, b, upstream),
        "the gradient of layer_norm(x [4, 12], weight, bias) with respect to x",
        mistakes={
            "detached-statistics": later.layer_norm_grad(
                x, w, b, upstream, mistake="detached-statistics"
            )
        },
        rtol=1e-4,
        atol=1e-5,
    )


# -- gelu ---------------------------------------------------------------------------------------

GELU_MISTAKES = ("erf-gelu", "relu", "no-cube", "wrong-constant")


@pytest.mark.check("gelu-matches-tanh")
def test_gelu_matches_tanh(student):
    grid = torch.linspace(-6, 6, 121)
    near = "wrong-constant"
    check(student, "gelu", (grid,), "gelu(x) on -6 … 6", GELU_MISTAKES, near=near)
    x = randn(9, 2, 3, 7) * 2
    check(student, "gelu", (x,), "gelu(x [2, 3, 7])", GELU_MISTAKES, near=near)


# -- split_heads, merge_heads -------------------------------------------------------------------


@pytest.mark.check("split-heads-contiguous")
@pytest.mark.parametrize("n_head", [3, 4])
def test_split_heads_contiguous(student, n_head):
    x = relabel(50, torch.arange(2 * 5 * 12, dtype=torch.float32).reshape(2, 5, 12), -999, 1000)
    check(
        student,
        "split_heads",
        (x, n_head),
        f"split_heads(x [2, 5, 12], {n_head})",
        ("interleaved", "no-transpose", "reshape-not-transpose"),
    )


@pytest.mark.check("split-heads-indivisible")
def test_split_heads_indivisible(student):
    error = student.error("split_heads", randn(10, 2, 3, 10), 4)
    if not error.is_a("ValueError"):
        fail(f"with C=10 and n_head=4, split_heads raised {error.type_name}, expected ValueError")
    if "10" not in error.message or "4" not in error.message:
        fail(f"the ValueError's message {error.message!r} names not both C=10 and n_head=4")


@pytest.mark.check("merge-heads-inverse")
def test_merge_heads_inverse(student):
    y = relabel(
        51, torch.arange(2 * 3 * 5 * 4, dtype=torch.float32).reshape(2, 3, 5, 4), -999, 1000
    )
    check(
        student,
        "merge_heads",
        (y,),
        "merge_heads(y [2, 3, 5, 4])",
        ("interleaved", "reshape-not-transpose"),
    )


# -- self_attention ------------------------------------------------------------------------------

ATTENTION_MISTAKES = (
    "qkv-order",
    "no-causal-mask",
    "no-heads",
    "scale-by-c",
    "no-output-projection",
    "weight-not-transposed",
    "no-bias",
    "heads-interleaved",
)


@pytest.mark.check("self-attention-matches-model")
def test_self_attention_matches_model(student):
    params = _under(block_params(11, 16), "attn.")
    x = randn(12, 2, 6, 16)
    check(
        student,
        "self_attention",
        (x, params, 4),
        "self_attention(x [2, 6, 16], params, n_head=4)",
        ATTENTION_MISTAKES,
        raised=("weight-not-transposed",),
        atol=1e-5,
    )


@pytest.mark.check("self-attention-given-mask")
def test_self_attention_given_mask(student):
    params = _under(block_params(13, 8), "attn.")
    x = randn(14, 2, 5, 8)
    mask = document_mask([[0, 0, 1, 1, 1], [0, 1, 1, 1, 2]])
    check(
        student,
        "self_attention",
        (x, params, 2, mask),
        "self_attention(x [2, 5, 8], params, 2, document mask [2, 1, 5, 5])",
        ("mask-ignored",),
        atol=1e-5,
    )


# -- mlp ----------------------------------------------------------------------------------------

MLP_MISTAKES = ("erf-gelu", "relu", "no-activation")


@pytest.mark.check("mlp-matches-model")
def test_mlp_matches_model(student):
    params = _under(block_params(15, 8), "mlp.")
    for x, what in ((randn(16, 2, 5, 8), "mlp(x [2, 5, 8], params)"), (randn(17, 8), "mlp(x [8])")):
        check(
            student,
            "mlp",
            (x, params),
            what,
            MLP_MISTAKES,
            raised=("weight-not-transposed",),
            atol=1e-5,
        )


# -- transformer_block ----------------------------------------------------------------------------

BLOCK_MISTAKES = (
    "post-ln",
    "no-attention-residual",
    "no-mlp-residual",
    "parallel",
    "wrong-norm",
    "no-norm",
)


@pytest.mark.check("block-matches-model")
def test_block_matches_model(student):
    params = block_params(18, 16)
    x = randn(19, 2, 6, 16)
    check(
        student,
        "transformer_block",
        (x, params, 4),
        "transformer_block(x [2, 6, 16], params, n_head=4)",
        BLOCK_MISTAKES,
        atol=1e-5,
    )


@pytest.mark.check("block-given-mask")
def test_block_given_mask(student):
    params = block_params(20, 8)
    x = randn(21, 2, 5, 8)
    mask = document_mask([[0, 0, 0, 1, 1], [0, 1, 1, 2, 2]])
    check(
        student,
        "transformer_block",
        (x, params, 2, mask),
        "transformer_block(x [2, 5, 8], params, 2, document mask)",
        ("mask-ignored",),
        atol=1e-5,
    )


# -- gpt_logits ---------------------------------------------------------------------------------

GPT_MISTAKES = ("no-positions", "no-final-norm", "block-order", "no-causal-mask")


@pytest.mark.check("gpt-logits-matches-model")
def test_gpt_logits_matches_model(student):
    params = gpt_params(22, n_layer=12, C=8, V=20, L=16)  # 12 blocks: h.10 follows h.9
    ids = randint(23, 0, 20, 2, 10)
    check(
        student,
        "gpt_logits",
        (ids, params, 2),
        "gpt_logits(ids [2, 10], a tied GPT of 12 blocks, n_head=2)",
        GPT_MISTAKES,
        raised=("untied-head",),
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.check("gpt-logits-untied")
def test_gpt_logits_untied(student):
    params = gpt_params(24, n_layer=2, C=8, V=20, L=16, tied=False)
    ids = randint(25, 0, 20, 2, 7)
    check(
        student,
        "gpt_logits",
        (ids, params, 2),
        "gpt_logits(ids [2, 7], a GPT with its own lm_head.weight, n_head=2)",
        ("head-ignored",),
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.check("gpt-logits-gpt2-shaped")
def test_gpt_logits_gpt2_shaped(student):
    params = gpt2_layout(26)
    ids = relabel(52, torch.tensor([[464, 3862, 43662, 6051, 357, 1640, 50256, 0]]), 0, 50257)
    what = "gpt_logits(ids [1, 8], GPT-2's vocabulary and positions, 12 blocks of 12 heads)"
    out = as_tensor(
        call(student, "gpt_logits", ids, params, 12, what=what, allowed=("untied-head",)), what
    )
    if list(out.shape) != [1, 8, 50257] or not out.is_floating_point():
        fail(f"{what} has shape {list(out.shape)} ({out.dtype}), expected [1, 8, 50257] (float)")
    # Compared through a summary: the whole [1, 8, 50257] answer is too large to ship.
    columns = list(range(0, 50257, 97))
    expected = oracle.gpt_logits_summary(ids, params, 12, columns)
    got = summarise_logits(out, columns)
    expect_close(got["columns"], expected["columns"], f"{what}, some columns", rtol=1e-4, atol=1e-4)
    expect_close(
        got["logsumexp"], expected["logsumexp"], f"{what}, log-sum-exp", rtol=1e-5, atol=1e-4
    )
    if not torch.equal(got["argmax"], expected["argmax"]):
        fail(f"{what} predicts other tokens than the provided GPT")


@pytest.mark.check("gpt-logits-key-order")
def test_gpt_logits_key_order(student):
    params = gpt_params(29, n_layer=3, C=8, V=20, L=16)
    # the blocks listed last first: a model takes them by N, not in the dict's order
    listed = sorted(params, key=lambda k: -int(k.split(".")[2]) if ".h." in k else 1)
    ids = randint(30, 0, 20, 2, 6)
    check(
        student,
        "gpt_logits",
        (ids, {key: params[key] for key in listed}, 2),
        "gpt_logits(ids [2, 6], a GPT of 3 blocks whose keys list h.2 first, n_head=2)",
        ("dict-order",),
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.check("gpt-logits-too-long")
def test_gpt_logits_too_long(student):
    params = gpt_params(27, n_layer=1, C=8, V=20, L=6)
    error = student.error("gpt_logits", randint(28, 0, 20, 1, 9), params, 2)
    if not error.is_a("ValueError"):
        fail(f"with T=9 > L=6, gpt_logits raised {error.type_name}, expected ValueError")
