"""Lesson 5 — The transformer block: attention and an MLP on a residual stream, stacked into a GPT.

A GPT is one small function applied again and again. Each block reads the running sum of
vectors (the residual stream), normalises a copy of it (layer norm), lets every position mix
in its past (multi-head self-attention), adds the result back, and does the same with a
two-layer MLP that works on each position alone. Stack the blocks, normalise once more and
score the last vectors against the token table: that is the whole model.

Every function here takes plain tensors, and the learned weights as a dict named the way
GPT-2 names them (``ln_1.weight``, ``attn.c_attn.weight``, ...), stored as ``nn.Linear``
stores its weights: ``[out, in]``, so a linear layer is ``x @ weight.T + bias``
(``F.linear(x, weight, bias)``). The provided ``gpt/model.py`` holds the same weights under
the same names, so ``gpt_logits(ids, dict(model.state_dict()), n_head)`` is that model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import attention, causal_mask
from .embeddings import add_positions, lookup


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
    """Normalise every vector to mean 0 and variance 1, then scale and shift it.

    Over the last dimension (the C channels of one position, never across positions or the
    batch): subtract the mean μ, divide by √(σ² + eps), multiply by ``weight`` and add ``bias``.
    σ² is the *biased* variance, the mean of (x − μ)² (divide by C, not C − 1), and eps sits
    inside the square root, so a constant vector gives 0 instead of a division by zero.
    Whatever scale the residual stream has grown to, each block reads vectors of one size.

    By hand: ``mean`` and ``var`` are fine; ``F.layer_norm`` and ``nn.LayerNorm`` are not.

    Shapes:
        x: [*S, C]; weight: [C]; bias: [C] or None (no shift). returns: [*S, C].

    Example:
        >>> layer_norm(torch.tensor([[1., 2., 3.]]), torch.ones(3), None, eps=0.0)
        tensor([[-1.2247,  0.0000,  1.2247]])
        >>> layer_norm(torch.tensor([[5., 5.]]), torch.tensor([2., 2.]), torch.tensor([1., 0.]))
        tensor([[1., 0.]])
    """
    # BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * weight
    return y if bias is None else y + bias
    # END SOLUTION


def gelu(x: Tensor) -> Tensor:
    """GPT-2's GELU, in its tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).

    GELU lets positive inputs through almost unchanged and squashes negative ones towards 0,
    smoothly (unlike ReLU it has a gradient everywhere). The exact GELU is x·Φ(x), with Φ the
    normal distribution's CDF (an erf); GPT-2 was trained with this tanh approximation, and
    its weights expect it: the two differ by up to about 5e-4.

    By hand, elementwise: no ``F.gelu`` or ``nn.GELU``.

    Shapes:
        x: any shape. returns: the same shape.

    Example:
        >>> gelu(torch.tensor([-3., 0., 1., 3.]))
        tensor([-0.0036,  0.0000,  0.8412,  2.9964])
    """
    # BEGIN SOLUTION
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))
    return 0.5 * x * (1.0 + torch.tanh(inner))
    # END SOLUTION


def split_heads(x: Tensor, n_head: int) -> Tensor:
    """Cut every position's C channels into n_head heads of D = C / n_head channels each.

    Head h gets the contiguous channels h·D … (h+1)·D − 1, and the head axis moves in front
    of the positions, so that attention runs on each head as if it were a separate batch row.
    When C is not a multiple of n_head there is no such cut: raise ``ValueError`` naming both.

    Shapes:
        x: [B, T, C]. returns: [B, n_head, T, D].

    Example:
        >>> x = torch.arange(4.).reshape(1, 1, 4)    # one position, channels 0 1 2 3
        >>> split_heads(x, 2)                        # head 0: 0 1, head 1: 2 3
        tensor([[[[0., 1.]],
                 [[2., 3.]]]])
    """
    # BEGIN SOLUTION
    B, T, C = x.shape
    if C % n_head:
        raise ValueError(f"C={C} channels do not split into n_head={n_head} equal heads")
    return x.reshape(B, T, n_head, C // n_head).transpose(1, 2)
    # END SOLUTION


def merge_heads(y: Tensor) -> Tensor:
    """Undo ``split_heads``: put the heads of every position side by side again.

    The head axis goes back behind the positions and heads h = 0, 1, … are concatenated, so
    ``merge_heads(split_heads(x, H)) == x``.

    Shapes:
        y: [B, H, T, D]. returns: [B, T, H·D].

    Example:
        >>> merge_heads(torch.tensor([[[[0., 1.]], [[2., 3.]]]]))
        tensor([[[0., 1., 2., 3.]]])
    """
    # BEGIN SOLUTION
    B, H, T, D = y.shape
    return y.transpose(1, 2).reshape(B, T, H * D)
    # END SOLUTION


def self_attention(
    x: Tensor, params: dict[str, Tensor], n_head: int, mask: Tensor | None = None
) -> Tensor:
    """Multi-head causal self-attention: the part of a block where positions talk.

    One linear layer ``c_attn`` makes 3C numbers per position; its three C-wide thirds are
    the queries, the keys and the values, in that order (GPT-2's weights are laid out so).
    Each is split into heads, the lesson's ``attention`` runs on every head at once with
    ``mask`` (the causal mask of T positions when None), the heads are merged, and a second
    linear layer ``c_proj`` mixes what the heads found.

    Shapes:
        x: [B, T, C]; mask: bool, broadcastable to [B, n_head, T, T] ([T, T] or [B, 1, T, T]).
        params: ``c_attn.weight`` [3C, C], ``c_attn.bias`` [3C], ``c_proj.weight`` [C, C],
        ``c_proj.bias`` [C] (a missing bias counts as zero).
        returns: [B, T, C].

    Example:
        >>> C = 4; p = {"c_attn.weight": torch.zeros(3 * C, C), "c_attn.bias": torch.zeros(3 * C),
        ...      "c_proj.weight": torch.eye(C), "c_proj.bias": torch.zeros(C)}
        >>> p["c_attn.weight"][2 * C:] = torch.eye(C)     # v = x; q = k = 0: equal weights
        >>> self_attention(torch.tensor([[[2.] * C, [4.] * C]]), p, n_head=2)
        tensor([[[2., 2., 2., 2.],
                 [3., 3., 3., 3.]]])
    """
    # BEGIN SOLUTION
    B, T, C = x.shape
    qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
    q, k, v = (split_heads(part, n_head) for part in qkv.split(C, dim=-1))
    if mask is None:
        mask = causal_mask(T).to(x.device)
    y = merge_heads(attention(q, k, v, mask))
    return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
    # END SOLUTION


def mlp(x: Tensor, params: dict[str, Tensor]) -> Tensor:
    """The block's feed-forward part: widen to 4C, GELU, back to C, at every position alone.

    ``c_proj(gelu(c_fc(x)))``. Attention moves information between positions; the MLP is
    where each position computes on what it has gathered (most of a GPT's weights are here).

    Shapes:
        x: [*S, C]. params: ``c_fc.weight`` [4C, C], ``c_fc.bias`` [4C],
        ``c_proj.weight`` [C, 4C], ``c_proj.bias`` [C] (a missing bias counts as zero).
        returns: [*S, C].

    Example:
        >>> p = {"c_fc.weight": torch.ones(4, 1), "c_fc.bias": torch.zeros(4),
        ...      "c_proj.weight": torch.full((1, 4), 0.25), "c_proj.bias": torch.zeros(1)}
        >>> mlp(torch.tensor([[-3.], [3.]]), p)        # the mean of four gelu(x): gelu(x)
        tensor([[-0.0036],
                [ 2.9964]])
    """
    # BEGIN SOLUTION
    hidden = gelu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
    return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
    # END SOLUTION


def _under(params: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """The entries of ``params`` whose names start with ``prefix``, without it (provided).

    Example:
        >>> _under({"attn.c_proj.bias": 1, "ln_1.bias": 2}, "attn.")
        {'c_proj.bias': 1}
    """
    return {name[len(prefix) :]: p for name, p in params.items() if name.startswith(prefix)}


def transformer_block(
    x: Tensor, params: dict[str, Tensor], n_head: int, mask: Tensor | None = None
) -> Tensor:
    """One pre-LayerNorm transformer block: two reads of the residual stream, two writes.

        x = x + self_attention(layer_norm(x, ln_1), attn.*)
        x = x + mlp(layer_norm(x, ln_2), mlp.*)

    Each part reads a normalised copy of the stream and *adds* its result to it: the stream
    itself is never normalised or replaced (that is what "pre-LN" and "residual" mean), so a
    block that learns nothing passes its input through, and gradients reach the first block
    along the sums. ``_under(params, "attn.")`` gives the attention's own weights.

    Shapes:
        x: [B, T, C]; mask as for ``self_attention``. returns: [B, T, C].
        params: one GPT-2 block's weights without the ``transformer.h.N.`` prefix:
        ``ln_1.weight`` [C], ``attn.c_attn.weight`` [3C, C], ``attn.c_proj.weight`` [C, C],
        ``ln_2.weight``, ``mlp.c_fc.weight`` [4C, C], ``mlp.c_proj.weight`` [C, 4C], and, when
        the model has biases, ``ln_1.bias``, ``attn.c_attn.bias``, ``attn.c_proj.bias``,
        ``ln_2.bias``, ``mlp.c_fc.bias`` and ``mlp.c_proj.bias``. Any bias may be missing: a
        missing bias counts as zero (``params.get``), as in the example below.

    Example:
        >>> C = 4; zeros = {"ln_1.weight": torch.ones(C), "ln_2.weight": torch.ones(C),
        ...     "attn.c_attn.weight": torch.zeros(3 * C, C),
        ...     "attn.c_proj.weight": torch.zeros(C, C),
        ...     "mlp.c_fc.weight": torch.zeros(4 * C, C),
        ...     "mlp.c_proj.weight": torch.zeros(C, 4 * C)}
        >>> x = torch.randn(2, 3, C)
        >>> torch.equal(transformer_block(x, zeros, n_head=2), x)   # writes nothing: x passes
        True
    """
    # BEGIN SOLUTION
    h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
    x = x + self_attention(h, _under(params, "attn."), n_head, mask)
    h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
    return x + mlp(h, _under(params, "mlp."))
    # END SOLUTION


def gpt_logits(ids: Tensor, params: dict[str, Tensor], n_head: int) -> Tensor:
    """The whole GPT from the lesson's functions: token ids in, next-token scores out.

    ``lookup`` the ids in ``transformer.wte.weight``, ``add_positions`` from
    ``transformer.wpe.weight``, run every block ``transformer.h.0``, ``transformer.h.1``, …
    in order of its number (10 comes after 9, not after 1) with the causal mask, normalise
    with ``transformer.ln_f`` (its bias, like every bias, may be missing), and score every
    vector against every row of ``lm_head.weight``: logits = x @ lm_headᵀ. GPT-2 ties that
    head to the token table, so when ``lm_head.weight`` is absent use
    ``transformer.wte.weight``. ``dict(GPT(config).state_dict())`` is such a dict, and the
    result equals that model's logits.

    Shapes:
        ids: [B, T] integer, T at most the position table's rows (else ``add_positions``'
        ``ValueError``). params: the names above, wte [V, C], wpe [L, C].
        returns: [B, T, V].

    Example:
        >>> C, V = 4, 3; p = {"transformer.wte.weight": torch.eye(V, C) * 2,
        ...     "transformer.wpe.weight": torch.zeros(8, C),
        ...     "transformer.ln_f.weight": torch.ones(C), "transformer.ln_f.bias": torch.zeros(C)}
        >>> gpt_logits(torch.tensor([[0, 2]]), p, n_head=2)   # no blocks: tied head scores
        tensor([[[ 3.4641, -1.1547, -1.1547],
                 [-1.1547, -1.1547,  3.4641]]])
    """
    # BEGIN SOLUTION
    x = lookup(params["transformer.wte.weight"], ids)
    x = add_positions(x, params["transformer.wpe.weight"])
    mask = causal_mask(ids.shape[1]).to(ids.device)
    numbers = {int(name.split(".")[2]) for name in params if name.startswith("transformer.h.")}
    for n in sorted(numbers):
        x = transformer_block(x, _under(params, f"transformer.h.{n}."), n_head, mask)
    x = layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
    head = params.get("lm_head.weight", params["transformer.wte.weight"])
    return F.linear(x, head)
    # END SOLUTION
