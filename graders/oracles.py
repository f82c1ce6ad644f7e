"""Oracles the graders share, independent of solutions/: GPT-2's tokenizer through tiktoken,
toy merge tables, and GPT-2-shaped state dicts."""

from __future__ import annotations

import functools
import importlib.metadata
import os
from pathlib import Path

import tiktoken
import tiktoken.load
import torch
from torch import Tensor

from .checking import GraderUnavailable
from .worker import GPT2_PATTERN

EOT_ID = 50256
EOT_TEXT = "<|endoftext|>"


def gpt2_ranks_file() -> Path | None:
    """GPT-2's merge ranks on this machine: $GPT2_TIKTOKEN, or the openai-whisper sdist's copy."""
    override = os.environ.get("GPT2_TIKTOKEN")
    if override:
        return Path(override) if Path(override).is_file() else None
    try:
        dist = importlib.metadata.distribution("openai-whisper")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file("whisper/assets/gpt2.tiktoken")))
    return path if path.is_file() else None


@functools.cache
def gpt2() -> tiktoken.Encoding:
    """tiktoken's GPT-2 encoding, built offline from the ranks file."""
    path = gpt2_ranks_file()
    if path is None:
        raise GraderUnavailable(
            "GPT-2's vocabulary is not installed, so the tokens lesson cannot be graded: "
            "pip install --no-deps openai-whisper==20250625 (or set GPT2_TIKTOKEN)"
        )
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
        special_tokens={EOT_TEXT: EOT_ID},
    )


def bpe_oracle(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's own byte-pair merge of one piece, with any table holding the piece's bytes.

    tiktoken returns a piece that is itself in the table as one token without merging; the
    contract merges step by step. So the piece gets a sentinel byte that no merge involves,
    which tiktoken then merges like any piece, and the sentinel's rank is dropped again.
    """
    in_merges = {b for key in ranks if len(key) > 1 for b in key}
    sentinel = next(bytes([b]) for b in range(256) if b not in in_merges)
    table = dict(ranks)
    table.setdefault(sentinel, max(table.values(), default=-1) + 1)
    encoding = tiktoken.Encoding(
        name="toy", pat_str=r"[\s\S]+", mergeable_ranks=table, special_tokens={}
    )
    return list(encoding._encode_single_piece(piece + sentinel))[:-1]


def sub_ranks(piece: bytes, ranks: dict[bytes, int]) -> dict[bytes, int]:
    """The entries of ``ranks`` a merge of ``piece`` can look up: its substrings."""
    found = {}
    for i in range(len(piece)):
        for j in range(i + 1, len(piece) + 1):
            part = piece[i:j]
            if part in ranks:
                found[part] = ranks[part]
    return found


CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


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
    g = torch.Generator().manual_seed(seed)

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


def ours_from_gpt2(
    hf: dict[str, Tensor],
    *,
    transpose: bool = True,
    transpose_all: bool = False,
    add_prefix: bool = True,
    tie: bool = True,
    keep_buffers: bool = False,
    drop_c_attn_bias: bool = False,
) -> dict[str, Tensor]:
    """Our model's state dict from ``hf``; the flags give the answers of classic mistakes."""
    ours: dict[str, Tensor] = {}
    for key, value in hf.items():
        name = key.removeprefix("transformer.")
        buffer = name.endswith((".attn.bias", ".attn.masked_bias"))
        if (buffer and not keep_buffers) or (drop_c_attn_bias and name.endswith("attn.bias")):
            continue
        if key != "lm_head.weight" and (add_prefix or key.startswith("transformer.")):
            name = "transformer." + name
        if (transpose and name.endswith(CONV1D)) or (transpose_all and value.dim() == 2):
            value = value.t()
        ours[name] = value
    if tie and "lm_head.weight" not in ours:
        ours["lm_head.weight"] = ours.get("transformer.wte.weight", ours.get("wte.weight"))
    return ours
