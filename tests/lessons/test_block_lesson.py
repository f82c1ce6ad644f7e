"""The block lesson's reference and its oracles (graders/secret/oracles/block.py) both
compute the provided GPT."""

from __future__ import annotations

import pytest
import torch

from gpt.model import GPT, GPTConfig
from graders.secret.oracles import block as oracle
from solutions import block


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("tied", [True, False])
def test_gpt_logits_and_the_oracle_equal_the_provided_model(bias: bool, tied: bool) -> None:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=40, block_size=12, n_layer=11, n_head=3, n_embd=12, bias=bias)
    model = GPT(config).eval()
    with torch.no_grad():
        for param in model.parameters():  # away from the init, so that every part matters
            param.add_(0.1 * torch.randn_like(param))
        if not tied:
            model.lm_head.weight = torch.nn.Parameter(torch.randn(40, 12))
        params = dict(model.state_dict())
        if tied:
            del params["lm_head.weight"]  # a tied checkpoint may leave it out
        ids = torch.randint(0, 40, (2, 12))
        expected = model(ids)
        for gpt_logits in (block.gpt_logits, oracle.gpt_logits):
            assert torch.allclose(gpt_logits(ids, params, 3), expected, atol=1e-5)
        with pytest.raises(ValueError, match="13"):
            block.gpt_logits(torch.zeros(1, 13, dtype=torch.long), params, 3)


def test_a_block_with_a_document_mask_equals_the_provided_block() -> None:
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8)).eval()
    layer = model.transformer.h[0]
    params = dict(layer.state_dict())
    docs = torch.tensor([[0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 1, 1]])
    mask = ((docs[:, :, None] == docs[:, None, :]) & torch.ones(6, 6).tril().bool())[:, None]
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        expected = layer(x, mask)
        assert torch.allclose(block.transformer_block(x, params, 2, mask), expected, atol=1e-6)
        assert torch.allclose(oracle.transformer_block(x, params, 2, mask), expected, atol=1e-6)
