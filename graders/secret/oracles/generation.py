"""The generation lesson's oracles: its checks' answers, correct and mistaken."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from graders.worker import scenarios

from .. import trusted
from . import unknown


def sample_next(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, seed: int = 0
) -> Tensor:
    """The trusted sample with a generator seeded with ``seed`` (argmax at temperature 0)."""
    return trusted.sample_next(logits, temperature, top_k, torch.Generator().manual_seed(seed))


def sample(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    draws: int = 1,
    mistake: str | None = None,
) -> dict:
    """What the sample scenario gives: the samples and the generator's next numbers after them
    ("argmax-top-1", "own-generator": a generator that was never drawn from)."""
    if mistake not in (None, "argmax-top-1", "own-generator"):
        raise unknown(mistake)
    result = scenarios.scenario_sample(trusted.sample_next, logits, temperature, top_k, seed, draws)
    if mistake is not None:
        fresh = torch.Generator().manual_seed(seed)
        result["next"] = torch.randint(0, 2**30, (4,), generator=fresh)
    return result


_GENERATE_MISTAKES = {
    "first-position": "first",
    "cropped-start": "crop_start",
    "only-new": "only_new",
}


def _generate(
    model,
    ids,
    max_new_tokens,
    context_length,
    temperature=1.0,
    top_k=None,
    generator=None,
    *,
    first: bool = False,
    crop_start: bool = False,
    only_new: bool = False,
) -> Tensor:
    """The loop as the contract says; the flags give classic mistakes."""
    start = ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            context = ids[:, :context_length] if crop_start else ids[:, -context_length:]
            logits = model(context)[:, 0 if first else -1, :]
            token = trusted.sample_next(logits, temperature, top_k, generator)
            ids = torch.cat([ids, token.unsqueeze(-1)], dim=-1)
    return ids[:, start.shape[1] :] if only_new else ids


def generate(config: dict, mistake: str | None = None) -> Tensor:
    """The ids the generate scenario returns with the oracle's loop."""
    if mistake is not None and mistake not in _GENERATE_MISTAKES:
        raise unknown(mistake)
    flags = {_GENERATE_MISTAKES[mistake]: True} if mistake else {}
    return scenarios.scenario_generate(functools.partial(_generate, **flags), **config)["ids"]


CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_LOAD_MISTAKES = {
    "drops-c-attn-bias": {"drop_c_attn_bias": True},
    "keeps-buffers": {"keep_buffers": True},
    "no-prefix": {"add_prefix": False},
    "not-tied": {"tie": False},
    "not-transposed": {"transpose": False},
    "transposes-all": {"transpose": False, "transpose_all": True},
}


def _ours_from_gpt2(
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
    wte = ours.get("transformer.wte.weight", ours.get("wte.weight"))
    if tie and "lm_head.weight" not in ours and wte is not None:
        ours["lm_head.weight"] = wte
    return ours


def load_gpt2_state_dict(hf: dict[str, Tensor], mistake: str | None = None) -> dict[str, Tensor]:
    if mistake is not None and mistake not in _LOAD_MISTAKES:
        raise unknown(mistake)
    return _ours_from_gpt2(hf, **({} if mistake is None else _LOAD_MISTAKES[mistake]))


def load_gpt2_keys(hf: dict[str, Tensor], mistake: str | None = None) -> list[str]:
    """The sorted keys of :func:`load_gpt2_state_dict`'s answer ("prefixes-lm-head": with
    ``transformer.lm_head.weight`` for ``lm_head.weight``)."""
    if mistake == "prefixes-lm-head":
        keys = load_gpt2_state_dict(hf)
        return sorted(k if k != "lm_head.weight" else "transformer.lm_head.weight" for k in keys)
    return sorted(load_gpt2_state_dict(hf, mistake))
