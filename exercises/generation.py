"""Lesson 9 — Generation and GPT-2 weights.

A trained GPT gives, at every position, scores for the next token. Generating text is a loop:
score, pick one token, append it, repeat. How the token is picked (greedy, or sampled with a
temperature and a top-k cut) decides whether text is dull, lively or nonsense. The same
architecture can load OpenAI's published GPT-2 weights, once their names and layouts are
mapped onto ours.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# GPT-2 stores these four projections as Conv1D, whose weight is [in, out]; nn.Linear is [out, in].
CONV1D_WEIGHTS = (
    "attn.c_attn.weight",
    "attn.c_proj.weight",
    "mlp.c_fc.weight",
    "mlp.c_proj.weight",
)
# Buffers in Hugging Face's GPT-2 checkpoints that are constants, not parameters.
MASK_BUFFERS = (".attn.bias", ".attn.masked_bias")


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick the next token for every row of ``logits``.

    - ``temperature == 0``: greedy, the argmax of each row.
    - otherwise divide the logits by the temperature (below 1 sharpens the distribution,
      above 1 flattens it); if ``top_k`` is set, keep only logits >= the k-th largest of the
      row (k capped at V), setting the rest to -inf; softmax; draw one sample per row with
      ``torch.multinomial(probs, 1, generator=generator)``. Use exactly that one call, so a
      seeded generator gives the same tokens as the reference.

    Shapes:
        logits: [B, V]. returns: [B] long.
    """
    raise NotImplementedError('sample_next in exercises/generation.py is not implemented yet (lesson 9, Generation and GPT-2 weights: see course/chapters/09-generation.md#temperature-and-top-k)')


def generate(
    model: nn.Module,
    ids: Tensor,
    max_new_tokens: int,
    context_length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Extend ``ids`` by ``max_new_tokens`` tokens, one at a time.

    At each step, crop the running sequence to its last ``context_length`` tokens (the model
    has no positions beyond that), compute ``model(context)`` (logits [B, T, V]) without
    gradients, take the logits of the last position and pick one token per row with
    ``sample_next``; append it.

    Shapes:
        ids: [B, T]. returns: [B, T + max_new_tokens]; the first T columns are ``ids``.
    """
    raise NotImplementedError('generate in exercises/generation.py is not implemented yet (lesson 9, Generation and GPT-2 weights: see course/chapters/09-generation.md#generating-text)')


def load_gpt2_state_dict(hf_state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Map a published GPT-2 state dict onto our model's parameter names and layouts.

    Our GPT keeps GPT-2's names (``transformer.wte.weight``, ``transformer.h.0.attn.c_attn
    .weight``, ..., ``lm_head.weight``) but uses ``nn.Linear``, whose weight is the transpose
    of GPT-2's Conv1D weight. So:

    - accept keys with or without the ``transformer.`` prefix (the Hub's safetensors file has
      none) and return them all with it (``lm_head.weight`` stays as it is);
    - drop the attention-mask buffers (keys ending in ``.attn.bias`` or ``.attn.masked_bias``;
      careful: ``c_attn.bias`` is a real parameter);
    - transpose the four Conv1D weights of every block (``CONV1D_WEIGHTS``);
    - when ``lm_head.weight`` is absent, set it to ``transformer.wte.weight`` (weight tying).

    Returns a new dict; the input is not changed.
    """
    raise NotImplementedError('load_gpt2_state_dict in exercises/generation.py is not implemented yet (lesson 9, Generation and GPT-2 weights: see course/chapters/09-generation.md#loading-gpt-2-weights)')
