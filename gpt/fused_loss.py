"""Cross-entropy of the output layer, computed in chunks of rows.

The plain way, ``F.cross_entropy(h @ W.T, y)``, materialises logits of shape [N, V] and, in
backward, a gradient of the same shape: at N = 8 x 256 tokens and V = 50,257 that is two
~400 MB tensors allocated afresh every step, and on a CPU much of the step goes to page
faults. Here the rows are processed a chunk at a time in one reused buffer; for each chunk
the loss and the gradients with respect to ``h`` and ``W`` are computed together (the
gradient of cross-entropy is softmax minus one-hot), so nothing of size [N, V] exists beyond
a chunk's.
The numbers are those of ``F.cross_entropy(h @ W.T, y, ignore_index=-100)``.

On a CPU the work is the three matrix multiplies per chunk and one softmax over its rows, so two
things decide the speed (``python bench/train_throughput.py`` measures them): the forward
product is taken in blocks of columns (``h @ W[a:b].T`` into ``logits[:, a:b]``), which the
CPU's BLAS runs about a quarter faster than the whole ``[rows, 50,257]`` product at once; and
the probabilities come from one ``softmax`` (one ``exp`` per logit), the loss from the target's
probability, ``-log p[y]``, where ``log_softmax`` followed by ``exp`` computed every exponential
twice. Where ``p[y]`` underflows float32 (a logit gap beyond about 69), that row's loss is
taken from ``logsumexp`` of its logits instead, so the loss stays exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

IGNORE_INDEX = -100
# Rows per chunk: 512 x 50,257 float32 logits is ~103 MB (two buffers: logits, probabilities),
# small beside the ~400 MB that full logits take at the benchmark's 8 x 256 tokens. Measured
# with bench/train_throughput.py on course-tiny (2 threads): 256 rows 2,504-2,675 tokens/s,
# 512 rows 2,958-3,105, 1,024 rows 3,119 with 170 MB more memory.
DEFAULT_CHUNK_ROWS = 512
# Columns of the forward product per matrix multiply on a CPU (see the module docstring).
FORWARD_COLUMNS = 1024
# Below this target probability, -log p[y] has lost its digits to float32's underflow.
SMALLEST_EXACT_PROBABILITY = 1e-30


_BUFFERS: dict[tuple, Tensor] = {}


def _buffer(name: str, rows: int, vocab: int, like: Tensor) -> Tensor:
    """A [rows, vocab] scratch buffer, kept between steps (one per name, shape, dtype, device).

    Allocating it afresh each step costs page faults on every one of its pages; keeping one
    costs its size once (~103 MB at the default chunk).
    """
    key = (name, rows, vocab, like.dtype, like.device)
    if key not in _BUFFERS:
        _BUFFERS[key] = like.new_empty(rows, vocab)
    return _BUFFERS[key]


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def _logits(h: Tensor, weight: Tensor, out: Tensor) -> Tensor:
    """``h @ weight.T`` into ``out`` ([rows, V]); on a CPU a block of columns at a time."""
    if h.device.type != "cpu":
        return torch.mm(h, weight.t(), out=out)
    for columns in _chunks(weight.shape[0], FORWARD_COLUMNS):
        torch.mm(h, weight[columns].t(), out=out[:, columns])
    return out


def _chunked(
    h: Tensor, weight: Tensor, targets: Tensor, chunk_rows: int, with_grad: bool
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """The mean loss and, when ``with_grad``, its gradients with respect to h and weight.

    The softmax and the log-sum-exp are the library's (``torch.softmax``, ``torch.logsumexp``):
    this file ships to students, and the objective lesson asks them to write that log-sum-exp
    themselves, so it must not hold one they could copy."""
    n_rows, vocab = h.shape[0], weight.shape[0]
    kept_rows = targets != IGNORE_INDEX
    n_valid = kept_rows.sum()
    scale = 1.0 / n_valid.clamp(min=1).to(h.dtype)
    # Each row's weight in the mean (0 for an ignored target), applied to the [rows, C] sides
    # of the gradient's products rather than to the [rows, V] probabilities: the same sums,
    # one pass over a chunk's 50k columns fewer.
    row_weight = (kept_rows.to(h.dtype) * scale).unsqueeze(1)
    grad_h = torch.empty_like(h) if with_grad else None
    grad_w = torch.empty_like(weight) if with_grad else None
    total = h.new_zeros(())
    rows_per_chunk = min(chunk_rows, n_rows)
    logits_buffer = _buffer("logits", rows_per_chunk, vocab, h)
    probs_buffer = _buffer("probs", rows_per_chunk, vocab, h)
    for index, rows in enumerate(_chunks(n_rows, chunk_rows)):
        h_c, y_c = h[rows], targets[rows]
        logits = _logits(h_c, weight, logits_buffer[: h_c.shape[0]])
        probs = torch.softmax(logits, dim=1, out=probs_buffer[: h_c.shape[0]])
        kept = kept_rows[rows].nonzero().squeeze(1)
        y_kept = y_c[kept]
        p_target = probs[kept, y_kept]
        losses = -p_target.log()
        underflowed = p_target < SMALLEST_EXACT_PROBABILITY
        if bool(underflowed.any()):
            lost = kept[underflowed]
            losses[underflowed] = torch.logsumexp(logits[lost], dim=1) - logits[lost, y_c[lost]]
        total += losses.sum()
        if with_grad:
            assert grad_h is not None and grad_w is not None  # allocated above when with_grad
            # d loss / d logits = (softmax - one_hot) * row_weight.
            probs[kept, y_kept] -= 1.0
            weight_c = row_weight[rows]
            torch.mm(probs, weight, out=grad_h[rows]).mul_(weight_c)
            # The first chunk writes grad_w, the others add to it: no pass to zero its V x C.
            if index == 0:
                torch.mm(probs.t(), h_c * weight_c, out=grad_w)
            else:
                grad_w.addmm_(probs.t(), h_c * weight_c)
    loss = total * scale
    return torch.where(n_valid > 0, loss, torch.full_like(loss, float("nan"))), grad_h, grad_w


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, targets: Tensor, chunk_rows: int) -> Tensor:
        loss, grad_h, grad_w = _chunked(h, weight, targets, chunk_rows, with_grad=True)
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx, grad_loss: Tensor):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_loss, grad_w * grad_loss, None, None


def linear_cross_entropy(
    h: Tensor, weight: Tensor, targets: Tensor, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Tensor:
    """Mean cross-entropy of ``h @ weight.T`` against ``targets`` (-100 ignored).

    Shapes:
        h: [N, C]; weight: [V, C]; targets: [N]. Returns a scalar (NaN if all are ignored).

    Computed in float32 whatever autocast says: log-sum-exp over 50k logits wants the range.
    """
    with torch.autocast(device_type=h.device.type, enabled=False):
        dtype = torch.promote_types(h.dtype, torch.float32)
        h32, w32 = h.to(dtype), weight.to(dtype)
        if torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
            return _ChunkedLinearCrossEntropy.apply(h32, w32, targets, chunk_rows)
        return _chunked(h32, w32, targets, chunk_rows, with_grad=False)[0]
