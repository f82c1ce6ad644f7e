"""The model's pieces against independent oracles."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gpt import fused_loss
from gpt.fused_loss import linear_cross_entropy
from gpt.model import GPT, GPTConfig, preset
from solutions import attention, packing

SMALL = GPTConfig(vocab_size=97, block_size=32, n_layer=2, n_head=4, n_embd=32)


def naive_attention(q, k, v, mask):
    """Masked softmax written out position by position: the definition, nothing clever."""
    *batch, T, D = q.shape
    out = torch.zeros_like(q)
    for index in torch.cartesian_prod(*[torch.arange(n) for n in batch]) if batch else [()]:
        index = tuple(index.tolist()) if batch else ()
        for i in range(T):
            scores = [float(q[index][i] @ k[index][j]) / math.sqrt(D) for j in range(T)]
            allowed = [bool(mask[i, j]) for j in range(T)]
            top = max(s for s, a in zip(scores, allowed, strict=True) if a)
            pairs = zip(scores, allowed, strict=True)
            weights = [math.exp(s - top) if a else 0.0 for s, a in pairs]
            total = sum(weights)
            out[index][i] = sum(w / total * v[index][j] for j, w in enumerate(weights))
    return out


def test_attention_matches_naive_masked_softmax() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64) for _ in range(3))
    mask = attention.causal_mask(5)
    expected = naive_attention(q, k, v, mask)
    torch.testing.assert_close(attention.attention(q, k, v, mask), expected)
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(fused, expected)


def test_model_with_lesson_attention_equals_fused_attention() -> None:
    torch.manual_seed(0)
    model = GPT(SMALL).eval()
    ids = torch.randint(0, SMALL.vocab_size, (2, 16))
    fused = model(ids)
    model.attention_fn = attention.attention
    torch.testing.assert_close(model(ids), fused, atol=1e-5, rtol=1e-5)


def test_packed_rows_equal_each_document_alone() -> None:
    torch.manual_seed(0)
    model = GPT(SMALL).eval()
    docs = [[5, 6, 7], [8, 9, 10, 11, 12], [13, 14], [15, 16, 17, 18]]
    ids, doc_ids = packing.pack(docs, seq_len=8, eos_id=0)
    packed = model(ids, doc_ids=doc_ids)
    for row in range(ids.shape[0]):
        for doc in doc_ids[row].unique():
            cols = (doc_ids[row] == doc).nonzero().squeeze(1)
            alone = model(ids[row, cols].unsqueeze(0))[0]
            torch.testing.assert_close(packed[row, cols], alone, atol=1e-5, rtol=1e-5)


def test_packed_rows_differ_from_unmasked() -> None:
    """The oracle above can fail: without the mask, later documents see earlier ones."""
    torch.manual_seed(0)
    model = GPT(SMALL).eval()
    ids, doc_ids = packing.pack([[5, 6, 7], [8, 9, 10, 11]], seq_len=8, eos_id=0)
    assert not torch.allclose(model(ids, doc_ids=doc_ids)[0, 5], model(ids)[0, 5], atol=1e-4)


def test_fused_loss_matches_cross_entropy_and_its_gradients() -> None:
    torch.manual_seed(0)
    h = torch.randn(300, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 50, (300,))
    y[::7] = -100
    loss = linear_cross_entropy(h, w, y, chunk_rows=64)
    grads = torch.autograd.grad(loss * 3.0, (h, w))
    ref = F.cross_entropy(h @ w.t(), y, ignore_index=-100)
    ref_grads = torch.autograd.grad(ref * 3.0, (h, w))
    torch.testing.assert_close(loss, ref)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(linear_cross_entropy(h, w, y), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_loss_in_column_blocks_and_where_a_target_probability_underflows(
    monkeypatch, dtype
) -> None:
    """The forward product in blocks of columns (7 here, the last block shorter) and rows whose
    target's probability is far below float32's range (a logit gap of hundreds: -log p[y] alone
    would be inf) give F.cross_entropy's loss and gradients."""
    monkeypatch.setattr(fused_loss, "FORWARD_COLUMNS", 7)
    torch.manual_seed(1)
    h = torch.randn(40, 8, dtype=dtype)
    h[:5] *= 400.0  # these rows' logits spread over hundreds
    h.requires_grad_(True)
    w = torch.randn(23, 8, dtype=dtype, requires_grad=True)
    y = torch.randint(0, 23, (40,))
    y[7] = -100
    with torch.no_grad():
        gaps = (h @ w.t()).amax(1) - (h @ w.t()).gather(1, y.clamp(min=0).unsqueeze(1)).squeeze(1)
    assert (gaps[:5] > 200).any()  # some target probability underflows even float64's 1e-30
    loss = linear_cross_entropy(h, w, y, chunk_rows=16)
    grads = torch.autograd.grad(loss, (h, w))
    ref = F.cross_entropy(h @ w.t(), y, ignore_index=-100)
    ref_grads = torch.autograd.grad(ref, (h, w))
    assert torch.isfinite(loss)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(loss, ref, **tolerance)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, **tolerance)


def test_fused_loss_of_only_ignored_targets_is_nan_like_cross_entropy() -> None:
    h, w = torch.randn(6, 4), torch.randn(9, 4)
    y = torch.full((6,), -100)
    assert torch.isnan(linear_cross_entropy(h, w, y))
    assert torch.isnan(F.cross_entropy(h @ w.t(), y))


def test_model_loss_equals_cross_entropy_of_logits() -> None:
    torch.manual_seed(0)
    model = GPT(SMALL)
    ids = torch.randint(0, SMALL.vocab_size, (3, 12))
    targets = torch.randint(0, SMALL.vocab_size, (3, 12))
    targets[0, :4] = -100
    expected = F.cross_entropy(model(ids).flatten(0, 1), targets.flatten(), ignore_index=-100)
    torch.testing.assert_close(model(ids, targets=targets), expected, atol=1e-5, rtol=1e-5)


def test_loss_at_initialisation_is_about_log_vocab() -> None:
    torch.manual_seed(0)
    model = GPT(preset("micro"))
    ids = torch.randint(0, 50257, (4, 64))
    loss = model(ids, targets=torch.randint(0, 50257, (4, 64))).item()
    assert abs(loss - math.log(50257)) < 0.1


def test_weight_tying_and_initialisation_scales() -> None:
    torch.manual_seed(0)
    config = GPTConfig(n_layer=8, n_embd=256, n_head=4, block_size=64)
    model = GPT(config)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert abs(model.transformer.wte.weight.std().item() - 0.02) < 1e-3
    c_proj = model.transformer.h[0].mlp.c_proj.weight.std().item()
    assert abs(c_proj - 0.02 / math.sqrt(2 * config.n_layer)) < 1e-3
    assert model.transformer.h[0].attn.c_attn.bias.abs().max() == 0


def test_gpt2_preset_has_124m_parameters() -> None:
    with torch.device("meta"):
        model = GPT(preset("gpt2"))
    assert round(model.num_parameters() / 1e6) == 124


def test_context_longer_than_positions_is_a_clear_error() -> None:
    model = GPT(SMALL)
    with pytest.raises(ValueError, match="T=33.*L=32"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_unknown_preset_lists_the_names() -> None:
    with pytest.raises(ValueError, match="tiny"):
        preset("huge")


def test_model_with_lesson_block_equals_fused_block() -> None:
    pytest.importorskip("solutions.block", reason="needs the block lesson (solutions/block.py)")
    torch.manual_seed(0)
    fused = GPT(SMALL)
    parts = {"attention": "lesson", "block": "lesson"}
    twins = {loss: GPT(SMALL, loss=loss, **parts) for loss in ("fused", "lesson")}
    ids = torch.randint(0, SMALL.vocab_size, (2, 16))
    targets = torch.randint(0, SMALL.vocab_size, (2, 16))
    doc_ids = torch.tensor([[0] * 7 + [1] * 9, [0] * 16])
    expected = fused(ids, targets=targets)
    expected.backward()
    for twin in twins.values():
        twin.load_state_dict(fused.state_dict())
        torch.testing.assert_close(twin(ids), fused(ids), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(twin(ids, doc_ids=doc_ids), fused(ids, doc_ids=doc_ids))
        loss = twin(ids, targets=targets)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
        loss.backward()
        for (name, a), b in zip(twin.named_parameters(), fused.parameters(), strict=True):
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_lesson_block_needs_lesson_attention() -> None:
    with pytest.raises(ValueError, match="attention='lesson' too"):
        GPT(SMALL, block="lesson")
