"""GPT-2's vocabulary, offline, and GPT-2-shaped inputs for the graders' checks.

Nothing here computes an exercise's answer (graders/secret/oracles/ does, for instructors): this
module ships to students. The float inputs it builds are recorded (see graders/answers.py), so
that a student release checks the very inputs its answers were recorded for.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
from torch import Tensor

# The provided package's vocabulary loader (gpt/ ships beside graders/ in the release too).
from gpt.vocab import (
    EOT_ID,
    GPT2_PATTERN,
    RANKS_ENV,
    VOCAB_INSTALL,
    VocabularyNotFound,
    gpt2_encoding,
    ranks_path,
)

from .answers import recorded
from .checking import GraderUnavailable, generator

if TYPE_CHECKING:
    import tiktoken

__all__ = ["EOT_ID", "GPT2_PATTERN", "gpt2"]


@functools.cache
def gpt2() -> tiktoken.Encoding:
    """tiktoken's GPT-2 encoding, built offline from the ranks file (never downloaded here)."""
    try:
        if ranks_path() is None:
            raise VocabularyNotFound("no gpt2.tiktoken")
        return gpt2_encoding()
    except VocabularyNotFound:
        raise GraderUnavailable(
            "GPT-2's vocabulary is not installed, so the tokens lesson cannot be graded: "
            f"{VOCAB_INSTALL} (or set {RANKS_ENV})"
        ) from None


def sub_ranks(piece: bytes, ranks: dict[bytes, int]) -> dict[bytes, int]:
    """The entries of ``ranks`` a merge of ``piece`` can look up: its substrings."""
    found = {}
    for i in range(len(piece)):
        for j in range(i + 1, len(piece) + 1):
            part = piece[i:j]
            if part in ranks:
                found[part] = ranks[part]
    return found


@recorded
def gpt2_sub_ranks(piece: bytes) -> dict[bytes, int]:
    """GPT-2's ranks of the substrings of ``piece``: a merge table for a check of bpe_merge."""
    return sub_ranks(piece, gpt2()._mergeable_ranks)


@recorded
def gpt2_state(
    n_layer: int,
    dim: int,
    vocab: int,
    n_ctx: int,
    seed: int,
    *,
    prefix: bool,
    lm_head: bool,
    masked_bias: bool = True,
) -> dict[str, Tensor]:
    """A Hugging Face GPT-2 state dict in miniature: Conv1D weights as [in, out], mask buffers."""
    g = generator(seed)

    def rand(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=g)

    p = "transformer." if prefix else ""
    state = {f"{p}wte.weight": rand(vocab, dim), f"{p}wpe.weight": rand(n_ctx, dim)}
    for i in range(n_layer):
        h = f"{p}h.{i}."
        state |= {
            h + "ln_1.weight": rand(dim),
            h + "ln_1.bias": rand(dim),
            h + "attn.bias": torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx),
            h + "attn.c_attn.weight": rand(dim, 3 * dim),
            h + "attn.c_attn.bias": rand(3 * dim),
            h + "attn.c_proj.weight": rand(dim, dim),
            h + "attn.c_proj.bias": rand(dim),
            h + "ln_2.weight": rand(dim),
            h + "ln_2.bias": rand(dim),
            h + "mlp.c_fc.weight": rand(dim, 4 * dim),
            h + "mlp.c_fc.bias": rand(4 * dim),
            h + "mlp.c_proj.weight": rand(4 * dim, dim),
            h + "mlp.c_proj.bias": rand(dim),
        }
        if masked_bias:
            state[h + "attn.masked_bias"] = torch.tensor(-1e4)
    state |= {f"{p}ln_f.weight": rand(dim), f"{p}ln_f.bias": rand(dim)}
    if lm_head:
        state["lm_head.weight"] = rand(vocab, dim)
    return state
