"""The checks' answers: what a correct implementation returns, and what each classic mistake
returns, for the diagnosis. Instructors' graders only, never released.

Independent of solutions/ wherever an independent oracle exists: PyTorch's own ops, tiktoken,
naive loops and formulas written out, and the trusted implementations of graders/trusted.py
run through the worker's very scenarios. Many of these are full implementations of exercises,
so this file is as secret as solutions/: the student release leaves it out and replays the
answers it recorded instead (graders/answers.py). Checks reach these functions through
``graders.answers.oracle`` / ``later`` only, by name; every argument and every answer is plain
data, and a ``mistake`` argument (a key of the check's mistakes table) asks for the answer that
mistake gives.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import regex
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader

from . import trusted, worker
from .gpt2 import GPT2_PATTERN, gpt2


def _unknown(mistake: str | None) -> ValueError:
    return ValueError(f"no oracle for the mistake {mistake!r}")


# -- tokens -------------------------------------------------------------------------------------


_PIECES_MISTAKES = {
    "space-apart": r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+",
    "contractions": GPT2_PATTERN.replace(r"'(?:[sdmt]|ll|ve|re)|", ""),
    "trailing-space": GPT2_PATTERN.replace(r"|\s+(?!\S)", ""),
}


def split_pieces(text: str, mistake: str | None = None) -> list[str]:
    """GPT-2's pieces of ``text``, or those a classic mistake gives."""
    if mistake is None:
        return regex.findall(GPT2_PATTERN, text)
    if mistake == "lost-text":
        return text.split()
    if mistake == "ignore-case":
        return regex.findall(GPT2_PATTERN, text, flags=regex.IGNORECASE)
    if mistake not in _PIECES_MISTAKES:
        raise _unknown(mistake)
    return regex.findall(_PIECES_MISTAKES[mistake], text)


def _bpe_tiktoken(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's own byte-pair merge of one piece, with any table holding the piece's bytes.

    tiktoken returns a piece that is itself in the table as one token without merging; the
    contract merges step by step. So the piece gets a sentinel byte that no merge involves,
    which tiktoken then merges like any piece, and the sentinel's rank is dropped again.
    """
    import tiktoken

    in_merges = {b for key in ranks if len(key) > 1 for b in key}
    sentinel = next(bytes([b]) for b in range(256) if b not in in_merges)
    table = dict(ranks)
    table.setdefault(sentinel, max(table.values(), default=-1) + 1)
    encoding = tiktoken.Encoding(
        name="toy", pat_str=r"[\s\S]+", mergeable_ranks=table, special_tokens={}
    )
    return list(encoding._encode_single_piece(piece + sentinel))[:-1]


def _merge_first_pair(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: merge the leftmost mergeable pair each round (not the lowest rank)."""
    parts = [bytes([b]) for b in piece]
    while True:
        for i in range(len(parts) - 1):
            if parts[i] + parts[i + 1] in ranks:
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
                break
        else:
            return [ranks[p] for p in parts]


def _merge_one_pass(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: one left-to-right sweep of merges, never looking again."""
    parts = [bytes([b]) for b in piece]
    i = 0
    while i < len(parts) - 1:
        if parts[i] + parts[i + 1] in ranks:
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        i += 1
    return [ranks[p] for p in parts]


def _merge_rightmost_tie(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The mistake: among equal ranks, merge the rightmost pair."""
    parts = [bytes([b]) for b in piece]
    while True:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank <= best[0]):
                best = (rank, i)
        if best is None:
            return [ranks[p] for p in parts]
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


_MERGES = {
    None: _bpe_tiktoken,
    "first-pair": _merge_first_pair,
    "one-pass": _merge_one_pass,
    "rightmost-tie": _merge_rightmost_tie,
}


def bpe_merge(piece: bytes, ranks: dict[bytes, int], mistake: str | None = None) -> list[int]:
    if mistake not in _MERGES:
        raise _unknown(mistake)
    return _MERGES[mistake](piece, ranks)


def bpe_merges(
    pieces: list[bytes], ranks: dict[bytes, int], mistake: str | None = None
) -> list[list[int]]:
    return [bpe_merge(piece, ranks, mistake) for piece in pieces]


def encode(text: str, mistake: str | None = None) -> list[int]:
    """tiktoken's GPT-2 ids; "no-split" merges the whole text as one piece."""
    if mistake is None:
        return gpt2().encode_ordinary(text)
    if mistake == "no-split":
        return list(gpt2()._encode_single_piece(text.encode("utf-8"))) if text else []
    raise _unknown(mistake)


def decode(ids: list[int], mistake: str | None = None) -> str:
    """tiktoken's decoding; "per-token" decodes every token on its own."""
    if mistake is None:
        return gpt2().decode(ids)
    if mistake == "per-token":
        return "".join(gpt2().decode([i]) for i in ids)
    raise _unknown(mistake)


# -- embeddings ---------------------------------------------------------------------------------


def lookup(table: Tensor, ids: Tensor, mistake: str | None = None) -> Tensor:
    if mistake is None:
        return F.embedding(ids, table)
    if mistake == "off-by-one":
        return table[ids - 1]
    if mistake == "flattened":
        return F.embedding(ids, table).reshape(-1, table.shape[-1])
    raise _unknown(mistake)


def lookup_grad(table: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
    """The gradient that reaches the table when ``(lookup(table, ids) * weights).sum()`` is
    differentiated: each looked-up row collects the weights of every place it went to."""
    grad = torch.zeros_like(table)
    return grad.index_add_(0, ids.reshape(-1), weights.reshape(-1, table.shape[-1]))


def add_positions_grads(pos_table: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """The gradients that reach (vectors, pos_table) when ``(add_positions(...) * weights).sum()``
    is differentiated: the weights themselves, and for row t of the table the sum over the
    batch of position t's weights (rows past T get none)."""
    T = weights.shape[1]
    grad_pos = torch.zeros_like(pos_table)
    grad_pos[:T] = weights.sum(dim=0)
    return weights.clone(), grad_pos


def add_positions(vectors: Tensor, pos_table: Tensor, mistake: str | None = None) -> Tensor:
    T = vectors.shape[1]
    if mistake is None:
        return vectors + pos_table[:T]
    if mistake == "wrong-rows":
        return vectors + pos_table[-T:]
    raise _unknown(mistake)


def nearest(
    table: Tensor, index: int, k: int, mistake: str | None = None
) -> list[tuple[int, float]]:
    """The contract's answer, or that of a mistake ("includes-self", "dot-product",
    "ascending")."""
    if mistake not in (None, "includes-self", "dot-product", "ascending"):
        raise _unknown(mistake)
    if mistake == "dot-product":
        sims = table @ table[index]
    else:
        sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
    order = sorted(range(len(table)), key=lambda r: float(sims[r]), reverse=mistake != "ascending")
    rows = [r for r in order if not (mistake != "includes-self" and r == index)][:k]
    return [(r, float(sims[r])) for r in rows]


# -- windows ------------------------------------------------------------------------------------


def shift(ids: Tensor) -> tuple[Tensor, Tensor]:
    return trusted.shift(ids)


def shift_mistakes(ids: Tensor, mistake: str) -> list[tuple[Tensor, Tensor]]:
    """The answers a mistake gives (some mistakes have several forms)."""
    answers = {
        "not-shifted": [(ids, ids), (ids[..., :-1], ids[..., :-1]), (ids[..., 1:], ids[..., 1:])],
        "swapped": [(ids[..., 1:], ids[..., :-1])],
        "first-dim": [(ids[:-1], ids[1:])],
        "by-two": [(ids[..., :-2], ids[..., 2:])],
    }
    if mistake not in answers:
        raise _unknown(mistake)
    return answers[mistake]


def window_starts(
    n_tokens: int, context_length: int, stride: int, mistake: str | None = None
) -> list[int]:
    n, c, s = n_tokens, context_length, stride
    if mistake is None:
        return trusted.window_starts(n, c, s)
    if mistake == "no-target-room":
        return list(range(0, max(n - c + 1, 0), s))
    if mistake == "misses-last":
        return list(range(0, max(n - c - 1, 0), s))
    if mistake == "ignores-stride":
        return list(range(0, max(n - c, 0), c))
    raise _unknown(mistake)


def token_windows(ids: Any, context_length: int, stride: int) -> dict:
    """What the token_windows scenario gives with the trusted TokenWindows."""
    return worker.scenario_token_windows(trusted.TokenWindows, ids, context_length, stride)


def _make_loader(
    ids: Any,
    batch_size: int,
    context_length: int,
    stride: int,
    shuffle: bool = True,
    drop_last: bool = True,
    seed: int | None = None,
) -> DataLoader:
    """PyTorch's DataLoader over the trusted windows."""
    seeded = {} if seed is None else {"generator": torch.Generator().manual_seed(seed)}
    windows = trusted.TokenWindows(ids, context_length, stride)
    return DataLoader(
        windows, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, **seeded
    )


def make_loader(
    ids: Any, batch_size: int, context_length: int, stride: int, epochs: int = 1, **options: Any
) -> list:
    """The batches of each epoch the make_loader scenario gives with the oracle's loader."""
    return worker.scenario_make_loader(
        _make_loader, ids, batch_size, context_length, stride, epochs=epochs, **options
    )["epochs"]


# -- attention ----------------------------------------------------------------------------------


def causal_mask(T: int, mistake: str | None = None) -> Tensor:
    ones = torch.ones(T, T, dtype=torch.bool)
    answers = {
        None: lambda: torch.tril(ones),
        "inverted": lambda: ~torch.tril(ones),
        "no-diagonal": lambda: torch.tril(ones, -1),
        "upper": lambda: torch.triu(ones),
    }
    if mistake not in answers:
        raise _unknown(mistake)
    return answers[mistake]()


def _naive(q, k, v, mask=None, *, scale=None, fill=-math.inf, dim=-1, invert=False, after=False):
    """Attention written out, with the knobs of the classic mistakes."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and after:
        weights = weights * mask
    return weights @ v


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, mistake: str | None = None
) -> Tensor:
    """F.scaled_dot_product_attention, or a mistake's answer."""
    if mistake is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    D = q.shape[-1]
    knobs: dict[str, dict[str, Any]] = {
        "no-scale": {"scale": 1.0},
        "scale-by-d": {"scale": 1 / D},
        "softmax-dim": {"dim": -2},
        "mask-inverted": {"invert": True},
        "mask-zero": {"fill": 0.0},
        "mask-after-softmax": {"after": True},
    }
    if mistake == "mask-ignored":
        return _naive(q, k, v)
    if mistake not in knobs:
        raise _unknown(mistake)
    return _naive(q, k, v, mask, **knobs[mistake])


# -- objective ----------------------------------------------------------------------------------


def cross_entropy(
    logits: Tensor, targets: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    expected = F.cross_entropy(logits, targets, ignore_index=ignore_index)
    if mistake is None:
        return expected
    per_row = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="none")
    if mistake == "mean-over-all":
        return per_row.sum() / len(targets)
    if mistake == "sum":
        return per_row.sum()
    if mistake == "negated":
        return -expected
    if mistake == "no-max-back":  # log(sum(exp(z - m))) without adding m back
        keep = targets != ignore_index
        z = logits[keep]
        shifted = z - z.max(dim=-1, keepdim=True).values
        picked = z.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
        return (shifted.exp().sum(dim=-1).log() - picked).mean()
    raise _unknown(mistake)


def lm_loss(
    logits: Tensor, ids: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    V = logits.shape[-1]
    if mistake == "not-shifted":
        return F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1), ignore_index=ignore_index)
    if mistake == "shifted-backwards":
        return F.cross_entropy(
            logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1), ignore_index=ignore_index
        )
    if mistake is not None:
        raise _unknown(mistake)
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), ignore_index=ignore_index
    )


def perplexity(loss: float | Tensor, mistake: str | None = None) -> float:
    if mistake is None:
        return math.exp(float(loss))
    if mistake == "base-two":
        return 2 ** float(loss)
    raise _unknown(mistake)


def pad_targets(
    targets: Tensor, pad_id: int, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    if mistake is None:
        return torch.where(targets == pad_id, ignore_index, targets)
    if mistake == "zero-not-pad":
        return torch.where(targets == 0, ignore_index, targets)
    raise _unknown(mistake)


# -- packing ------------------------------------------------------------------------------------

_PACK_MISTAKES = {
    "no-eos": {"with_eos": False},
    "eos-first": {"eos_first": True},
    "padded-last-row": {"pad": True},
    "row-per-doc": {"per_doc": True},
    "eos-next-doc": {"eos_next": True},
}


def pack(
    docs: list[list[int]], seq_len: int, eos: int, mistake: str | None = None
) -> tuple[Tensor, Tensor]:
    """Rows of the packed stream and its doc ids (plain Python), or a mistake's."""
    if mistake is not None and mistake not in _PACK_MISTAKES:
        raise _unknown(mistake)
    flags = _PACK_MISTAKES.get(mistake, {})
    eos_first = flags.get("eos_first", False)
    with_eos = flags.get("with_eos", True)
    pad = flags.get("pad", False)
    per_doc = flags.get("per_doc", False)
    eos_next = flags.get("eos_next", False)
    stream, owner = [], []
    for i, doc in enumerate(docs):
        tokens = ([eos] + doc if eos_first else doc + [eos]) if with_eos else list(doc)
        owners = [i] * len(tokens)
        if eos_next and with_eos and not eos_first:
            owners[-1] = i + 1
        if per_doc:  # one row per document, cut or padded
            tokens = (tokens + [eos] * seq_len)[:seq_len]
            owners = (owners + [i] * seq_len)[:seq_len]
        stream += tokens
        owner += owners
    n = len(stream) // seq_len
    if pad and len(stream) % seq_len:
        extra = seq_len - len(stream) % seq_len
        stream, owner, n = stream + [eos] * extra, owner + [owner[-1]] * extra, n + 1
    ids = torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    doc_ids = torch.tensor(owner[: n * seq_len], dtype=torch.long).reshape(n, seq_len)
    return ids, doc_ids


def document_mask(doc_ids: Tensor, mistake: str | None = None) -> Tensor:
    B, T = doc_ids.shape
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(i + 1):
                mask[b, i, j] = bool(doc_ids[b, i] == doc_ids[b, j])
    if mistake is None:
        return mask
    if mistake == "causal-only":
        return torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)
    if mistake == "not-causal":
        return doc_ids[:, :, None] == doc_ids[:, None, :]
    if mistake == "inverted":
        return ~mask
    raise _unknown(mistake)


def position_ids(doc_ids: Tensor, mistake: str | None = None) -> Tensor:
    knobs: dict[str | None, dict[str, Any]] = {
        None: {},
        "not-reset": {"reset": False},
        "row-continues": {"rows": False},
        "starts-at-one": {"start": 1},
    }
    if mistake not in knobs:
        raise _unknown(mistake)
    reset = knobs[mistake].get("reset", True)
    rows = knobs[mistake].get("rows", True)
    start = knobs[mistake].get("start", 0)
    out = torch.zeros_like(doc_ids)
    count, previous = start - 1, None
    for b in range(doc_ids.shape[0]):
        for t in range(doc_ids.shape[1]):
            doc = int(doc_ids[b, t])
            new_run = (rows and t == 0) or (reset and doc != previous)
            count = start if new_run else count + 1
            out[b, t] = count
            previous = doc
    return out


def packed_targets(
    input_ids: Tensor, doc_ids: Tensor, ignore_index: int = -100, mistake: str | None = None
) -> Tensor:
    knobs = {
        None: {},
        "crosses-documents": {"check_docs": False},
        "not-shifted": {"shift": False},
        "wraps": {"wrap": True},
    }
    if mistake not in knobs:
        raise _unknown(mistake)
    check_docs = knobs[mistake].get("check_docs", True)
    shift_by_one = knobs[mistake].get("shift", True)
    wrap = knobs[mistake].get("wrap", False)
    B, T = input_ids.shape
    out = torch.full_like(input_ids, ignore_index)
    for b in range(B):
        for t in range(T):
            nxt = t + 1 if shift_by_one else t
            if nxt == T:
                if not wrap:
                    continue
                nxt = 0
            if not check_docs or doc_ids[b, nxt] == doc_ids[b, t]:
                out[b, t] = input_ids[b, nxt]
    return out


# -- training -----------------------------------------------------------------------------------

_LR_MISTAKES = {
    "starts-at-zero": "zero_start",
    "ignores-min": "to_zero",
    "no-warmup-offset": "no_offset",
    "keeps-cycling": "cycle",
}


def _lr(
    step: int,
    *,
    max_lr: float,
    min_lr: float,
    warmup_steps: int,
    max_steps: int,
    zero_start: bool = False,
    to_zero: bool = False,
    no_offset: bool = False,
    cycle: bool = False,
) -> float:
    """The contract's schedule, written out; the flags give classic mistakes."""
    floor = 0.0 if to_zero else min_lr
    if step < warmup_steps:
        return max_lr * (step if zero_start else step + 1) / warmup_steps
    if step > max_steps and not cycle:
        return min_lr
    progress = step / max_steps if no_offset else (step - warmup_steps) / (max_steps - warmup_steps)
    return floor + 0.5 * (max_lr - floor) * (1 + math.cos(math.pi * progress))


def lr_at(steps: list[int], mistake: str | None = None, **schedule: Any) -> list[float]:
    """The learning rate at each of ``steps``."""
    if mistake is not None and mistake not in _LR_MISTAKES:
        raise _unknown(mistake)
    flags = {_LR_MISTAKES[mistake]: True} if mistake else {}
    return [_lr(step, **schedule, **flags) for step in steps]


def _zero_each_batch(model, micro_batches, optimizer, max_grad_norm=1.0):
    """The mistake: zeroing the gradients inside the loop keeps only the last micro-batch."""
    model.train()
    for x, y in micro_batches:
        optimizer.zero_grad()
        (trusted.next_token_loss(model, x, y) / len(micro_batches)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return 0.0


def _no_step(model, micro_batches, optimizer, max_grad_norm=1.0):
    return 0.0


def _token_weighted(model, micro_batches, optimizer, max_grad_norm=1.0):
    """The mistake: each micro-batch weighted by its share of the counted targets."""
    model.train()
    counts = [int((y != -100).sum()) for _, y in micro_batches]
    for (x, y), n in zip(micro_batches, counts, strict=True):
        (trusted.next_token_loss(model, x, y) * n / sum(counts)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return 0.0


_STEPS = {
    None: trusted.train_step,
    "token-weighted": _token_weighted,
    "unscaled": functools.partial(trusted.train_step, scale=False),
    "no-clip": functools.partial(trusted.train_step, clip=False),
    "last-batch-only": _zero_each_batch,
    "no-step": _no_step,
}


def train_step_params(config: dict, mistake: str | None = None) -> list[list[Tensor]]:
    """The parameters after each step of the train_step scenario."""
    if mistake not in _STEPS:
        raise _unknown(mistake)
    return worker.scenario_train_step(_STEPS[mistake], **config)["params"]


def micro_losses(config: dict) -> list[float]:
    """The loss of each micro-batch of the scenario's first step, before the step."""
    model = worker.ToyLM(**config["model"])
    with torch.no_grad():
        return [
            trusted.next_token_loss(model, x, y).item()
            for x, y in config["steps"][0]["micro_batches"]
        ]


def evaluate(config: dict, mistake: str | None = None) -> float:
    """The loss the evaluate scenario returns; "token-weighted" weighs batches by tokens."""
    if mistake is None:
        return worker.scenario_evaluate(trusted.evaluate, **config)["loss"]
    if mistake != "token-weighted":
        raise _unknown(mistake)
    model = worker.ToyLM(**config["model"])
    with torch.no_grad():
        logits = [model(x).flatten(0, 1) for x, _ in config["batches"]]
        targets = [y.flatten() for _, y in config["batches"]]
        return F.cross_entropy(torch.cat(logits), torch.cat(targets)).item()


_FIT_MISTAKES = {
    "restarts-each-step": {"restart": True},
    "ignores-accum": {"one_batch": True},
    "lr-after-step": {"lr_after": True},
    "lr-not-set": {"lr_never": True},
    "eval-off-by-one": {"eval_from_zero": True},
    "no-final-eval": {"final_eval": False},
    "cycle-replays": {"replay": True},
    "first-group-only": {"first_group": True},
}


def _fit(
    model,
    optimizer,
    train_batches,
    *,
    steps,
    grad_accum,
    lr_schedule,
    eval_batches=None,
    eval_every=None,
    restart: bool = False,
    lr_after: bool = False,
    lr_never: bool = False,
    eval_from_zero: bool = False,
    final_eval: bool = True,
    replay: bool = False,
    one_batch: bool = False,
    first_group: bool = False,
) -> list[dict]:
    """The loop as the contract says; the flags give classic mistakes."""

    def forever():
        if replay:
            yield from itertools.cycle(train_batches)
        while True:
            empty = True
            for b in train_batches:  # a fresh iter() per pass
                empty = False
                yield b
            if empty:
                return

    def set_lr(lr):
        for group in optimizer.param_groups[:1] if first_group else optimizer.param_groups:
            group["lr"] = lr

    batches = forever()
    history = []
    for step in range(steps):
        lr = lr_schedule(step)
        if not (lr_after or lr_never):
            set_lr(lr)
        if restart:
            batches = forever()
        micro = [next(batches) for _ in range(1 if one_batch else grad_accum)]
        record = {"step": step, "lr": lr, "loss": trusted.train_step(model, micro, optimizer)}
        if lr_after:
            set_lr(lr)
        if eval_every is None:
            due = False
        elif eval_from_zero:
            due = step % eval_every == 0
        else:
            due = (step + 1) % eval_every == 0
        if eval_batches is not None and (due or (final_eval and step == steps - 1)):
            record["eval_loss"] = trusted.evaluate(model, eval_batches)
        history.append(record)
    return history


def fit(config: dict, mistake: str | None = None) -> dict:
    """The fit scenario's result (history, step_lrs, params) with the oracle's loop."""
    if mistake is not None and mistake not in _FIT_MISTAKES:
        raise _unknown(mistake)
    flags = _FIT_MISTAKES.get(mistake, {})
    return worker.scenario_fit(functools.partial(_fit, **flags), **config)


# -- generation ---------------------------------------------------------------------------------


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
        raise _unknown(mistake)
    result = worker.scenario_sample(trusted.sample_next, logits, temperature, top_k, seed, draws)
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
        raise _unknown(mistake)
    flags = {_GENERATE_MISTAKES[mistake]: True} if mistake else {}
    return worker.scenario_generate(functools.partial(_generate, **flags), **config)["ids"]


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
    if tie and "lm_head.weight" not in ours:
        ours["lm_head.weight"] = ours.get("transformer.wte.weight", ours.get("wte.weight"))
    return ours


def load_gpt2_state_dict(hf: dict[str, Tensor], mistake: str | None = None) -> dict[str, Tensor]:
    if mistake is not None and mistake not in _LOAD_MISTAKES:
        raise _unknown(mistake)
    return _ours_from_gpt2(hf, **_LOAD_MISTAKES.get(mistake, {}))


def load_gpt2_keys(hf: dict[str, Tensor], mistake: str | None = None) -> list[str]:
    """The sorted keys of :func:`load_gpt2_state_dict`'s answer ("prefixes-lm-head": with
    ``transformer.lm_head.weight`` for ``lm_head.weight``)."""
    if mistake == "prefixes-lm-head":
        keys = load_gpt2_state_dict(hf)
        return sorted(k if k != "lm_head.weight" else "transformer.lm_head.weight" for k in keys)
    return sorted(load_gpt2_state_dict(hf, mistake))
