"""Planted variants of lesson 9, generation (solutions/generation.py): wrong ones, each
making the mistake it names, and correct ones written differently."""

from __future__ import annotations

from .base import V, Variant, changed

# load_gpt2_state_dict written out; the wrong variants below change one line.
LOAD_GPT2 = """
def load_gpt2_state_dict(hf_state):
    ours = {}
    for key, value in hf_state.items():
        if key.endswith(MASK_BUFFERS):
            continue
        if key != "lm_head.weight" and not key.startswith("transformer."):
            key = "transformer." + key
        if key.endswith(CONV1D_WEIGHTS):
            value = value.t()
        ours[key] = value
    ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
    return ours
"""

WRONG: list[Variant] = [
    V(
        "generation",
        "sample_next",
        "k-plus-one-sorted",
        "top-k-one-more",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = logits.sort(dim=-1, descending=True).values[:, k : k + 1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "k-plus-one-topk",
        "top-k-one-more",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k + 1, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "top-k-not-capped",
        "not-capped",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "zero-temperature",
        "check:sample-greedy",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "no-generator",
        "own-generator",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            return torch.multinomial(torch.softmax(logits, dim=-1), 1).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "exactly-k",
        "check:sample-top-k-ties",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                keep = torch.topk(logits, k, dim=-1).indices
                masked = torch.full_like(logits, float("-inf"))
                logits = masked.scatter(-1, keep, logits.gather(-1, keep))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "unsqueezed",
        "shape",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "squeezes-all",
        "squeezed-all",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze()
    """,
    ),
    V(
        "generation",
        "sample_next",
        "argmax-top-1",
        "argmax-top-1",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0 or top_k == 1:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "own-generator",
        "own-generator",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            own = torch.Generator().manual_seed(1234)
            return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=own).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "multiplies",
        "multiplies",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits * temperature
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "sample_next",
        "top-k-ignored",
        "top-k-ignored",
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return logits.argmax(dim=-1)
            logits = logits / temperature
            if False:
                k = min(top_k, logits.shape[-1])
                kth = torch.topk(logits, k, dim=-1).values[..., -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    """,
    ),
    V(
        "generation",
        "generate",
        "not-cropped",
        "not-cropped",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(ids)
                    next_id = sample_next(logits[:, -1, :], temperature, top_k, generator)
                    ids = torch.cat([ids, next_id.unsqueeze(-1)], dim=-1)
            return ids
    """,
    ),
    V(
        "generation",
        "generate",
        "first-position",
        "first-position",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(ids[:, -context_length:])
                    next_id = sample_next(logits[:, 0, :], temperature, top_k, generator)
                    ids = torch.cat([ids, next_id.unsqueeze(-1)], dim=-1)
            return ids
    """,
    ),
    V(
        "generation",
        "generate",
        "cropped-start",
        "cropped-start",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(ids[:, :context_length])
                    next_id = sample_next(logits[:, -1, :], temperature, top_k, generator)
                    ids = torch.cat([ids, next_id.unsqueeze(-1)], dim=-1)
            return ids
    """,
    ),
    V(
        "generation",
        "generate",
        "with-grad",
        "grad-enabled",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            for _ in range(max_new_tokens):
                logits = model(ids[:, -context_length:])
                next_id = sample_next(logits[:, -1, :].detach(), temperature, top_k, generator)
                ids = torch.cat([ids, next_id.unsqueeze(-1)], dim=-1)
            return ids
    """,
    ),
    V(
        "generation",
        "generate",
        "rolls-prompt",
        "changed-prompt",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            out = ids
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(out[:, -context_length:])
                    next_id = sample_next(logits[:, -1, :], temperature, top_k, generator)
                    out = torch.cat([out, next_id.unsqueeze(-1)], dim=-1)
            ids.copy_(out[:, -ids.shape[1]:])  # keep the caller's buffer up to date
            return out
    """,
    ),
    V(
        "generation",
        "generate",
        "only-new",
        "only-new",
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            prompt_length = ids.shape[1]
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(ids[:, -context_length:])
                    next_id = sample_next(logits[:, -1, :], temperature, top_k, generator)
                    ids = torch.cat([ids, next_id.unsqueeze(-1)], dim=-1)
            return ids[:, prompt_length:]
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "drops-c-attn-bias",
        "drops-c-attn-bias",
        changed(
            LOAD_GPT2,
            "        if key.endswith(MASK_BUFFERS):\n",
            '        if key.endswith(("attn.bias", "attn.masked_bias")):\n',
        ),
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "no-transpose",
        "not-transposed",
        changed(
            LOAD_GPT2,
            "        if key.endswith(CONV1D_WEIGHTS):\n            value = value.t()\n",
            "",
        ),
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "transposes-all",
        "transposes-all",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS):
                    continue
                if key != "lm_head.weight" and not key.startswith("transformer."):
                    key = "transformer." + key
                ours[key] = value.t() if value.dim() == 2 else value
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"].t())
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "no-prefix",
        "no-prefix",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS):
                    continue
                if key.endswith(CONV1D_WEIGHTS):
                    value = value.t()
                ours[key] = value
            if "lm_head.weight" not in ours:
                wte = ours.get("transformer.wte.weight", ours.get("wte.weight"))
                ours["lm_head.weight"] = wte
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "not-tied",
        "not-tied",
        changed(
            LOAD_GPT2, '    ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])\n', ""
        ),
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "pops-input",
        "in-place",
        """
        def load_gpt2_state_dict(hf_state):
            for key in [k for k in hf_state if k.endswith(MASK_BUFFERS)]:
                del hf_state[key]
            ours = {}
            for key, value in hf_state.items():
                if key != "lm_head.weight" and not key.startswith("transformer."):
                    key = "transformer." + key
                if key.endswith(CONV1D_WEIGHTS):
                    value = value.t()
                ours[key] = value
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "not-transposed-hidden",
        "not-transposed",
        changed(
            LOAD_GPT2,
            "        if key.endswith(CONV1D_WEIGHTS):\n            value = value.t()\n",
            "",
        ),
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "replaces-lm-head",
        "replaced-lm-head",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS) or key == "lm_head.weight":
                    continue
                if not key.startswith("transformer."):
                    key = "transformer." + key
                if key.endswith(CONV1D_WEIGHTS):
                    value = value.t()
                ours[key] = value
            ours["lm_head.weight"] = ours["transformer.wte.weight"]
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "keeps-buffers",
        "keeps-buffers",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if False:
                    continue
                if key != "lm_head.weight" and not key.startswith("transformer."):
                    key = "transformer." + key
                if key.endswith(CONV1D_WEIGHTS):
                    value = value.t()
                ours[key] = value.contiguous()
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "prefixes-lm-head",
        "prefixes-lm-head",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS):
                    continue
                if not key.startswith("transformer."):
                    key = "transformer." + key
                if key.endswith(CONV1D_WEIGHTS):
                    value = value.t()
                ours[key] = value.contiguous()
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
            return ours
    """,
    ),
]

RIGHT: list[Variant] = [
    V(
        "generation",
        "sample_next",
        "mask-then-divide",
        None,
        """
        def sample_next(logits, temperature=1.0, top_k=None, generator=None):
            if temperature == 0:
                return torch.argmax(logits, dim=-1)
            if top_k is not None:
                k = min(top_k, logits.shape[-1])
                kth = logits.sort(dim=-1, descending=True).values[:, k - 1]
                logits = logits.masked_fill(logits < kth.unsqueeze(-1), float("-inf"))
            probs = (logits / temperature).softmax(dim=-1)
            return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
    """,
    ),
    V(
        "generation",
        "generate",
        "preallocated",
        None,
        """
        def generate(model, ids, max_new_tokens, context_length, temperature=1.0, top_k=None,
                     generator=None):
            B, T = ids.shape
            out = torch.empty(B, T + max_new_tokens, dtype=ids.dtype)
            out[:, :T] = ids
            with torch.inference_mode():
                for t in range(T, T + max_new_tokens):
                    logits = model(out[:, max(0, t - context_length) : t])
                    out[:, t] = sample_next(logits[:, -1], temperature, top_k, generator)
            return out
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "regex",
        None,
        """
        def load_gpt2_state_dict(hf_state):
            import re
            ours = {}
            for key, value in hf_state.items():
                name = re.sub(r"^transformer\\.", "", key)
                if re.search(r"\\.attn\\.(masked_)?bias$", name):
                    continue
                if name != "lm_head.weight":
                    name = "transformer." + name
                if re.search(r"\\.(attn\\.c_attn|attn\\.c_proj|mlp\\.c_(fc|proj))\\.weight$", name):
                    value = value.transpose(0, 1)
                ours[name] = value.clone()
            if "lm_head.weight" not in ours:
                ours["lm_head.weight"] = ours["transformer.wte.weight"]
            return ours
    """,
    ),
]
