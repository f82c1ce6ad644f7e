"""Implementations for testing the graders: plausible wrong ones, correct-but-different ones.

Each ``Variant`` replaces one function (or class, or method) of a copy of solutions/ with its
``source``. A wrong variant must lose points on its function, with a failed check whose hint
contains ``hint`` (the text that names its mistake); a right one must keep every point.
``build_target`` writes such a copy; ``rounds`` groups variants so that one grading run
checks many of them at once (at most one variant per function and round; the graders plug
trusted versions of a function's own lesson dependencies in, so variants of different
functions never disturb each other).
"""

from __future__ import annotations

import ast
import functools
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Variant:
    module: str  # the lesson module, e.g. "windows"
    name: str  # the function or class, or "Class.method"
    label: str  # a short name for the test id
    source: str  # the replacement definition
    hint: str | None = None  # for a wrong variant: text the hint of a failed check must contain
    hidden: bool = False  # only a hidden check catches it
    not_hint: str | None = None  # text no failed check's hint may contain (a mistake not made)

    @property
    def function(self) -> str:
        return self.name.split(".")[0]

    @property
    def id(self) -> str:
        return f"{self.module}.{self.name}:{self.label}"


def replace_definition(source: str, name: str, new: str) -> str:
    """``source`` with the definition of ``name`` ("f", "C" or "C.method") replaced by ``new``."""
    tree = ast.parse(source)
    scope: list[ast.stmt] = tree.body
    *outer, last = name.split(".")
    for part in outer:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == part).body
    node = next(
        n
        for n in scope
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef) and n.name == last
    )
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines(keepends=True)
    body = textwrap.indent(textwrap.dedent(new).strip("\n") + "\n", " " * node.col_offset)
    return "".join(lines[: first - 1]) + body + "".join(lines[node.end_lineno :])


def build_target(directory: Path, variants: list[Variant] | tuple[Variant, ...] = ()) -> Path:
    """A copy of solutions/ in ``directory``/submission with ``variants`` applied."""
    target = directory / "submission"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    for variant in variants:
        path = target / f"{variant.module}.py"
        path.write_text(replace_definition(path.read_text(), variant.name, variant.source))
    return target


@functools.cache
def lessons_used(module: str) -> frozenset[str]:
    """The other lesson modules that ``module`` of solutions/ imports (``from .attention import
    attention``): the graders plug in no trusted version of those, so a variant of one of them
    changes what ``module``'s functions compute."""
    tree = ast.parse((ROOT / "solutions" / f"{module}.py").read_text())
    return frozenset(
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    )


def apart(a: Variant, b: Variant) -> bool:
    """Whether ``a`` and ``b`` may share a round: different functions, neither of them in a
    lesson that the other's lesson imports."""
    if (a.module, a.function) == (b.module, b.function):
        return False
    return a.module not in lessons_used(b.module) and b.module not in lessons_used(a.module)


def rounds(variants: list[Variant]) -> list[list[Variant]]:
    """Variants grouped so that no two in a group touch the same function or a lesson the
    other builds on (and that hidden checks are run only for the groups that need them)."""
    groups: list[list[Variant]] = []
    for variant in variants:
        for group in groups:
            if group[0].hidden == variant.hidden and all(apart(v, variant) for v in group):
                group.append(variant)
                break
        else:
            groups.append([variant])
    return groups


def assert_hints_name_the_mistake(variant: Variant, failed: list[dict]) -> None:
    """A wrong variant's failed checks: one names its mistake (``hint``), none names a mistake
    it did not make (``not_hint``)."""
    hints = [c["hint"] or "" for c in failed]
    shown = "; ".join(f"{c['id']}: {c['hint']} [{c['detail']}]" for c in failed)
    if variant.hint is not None:
        assert any(variant.hint in hint for hint in hints), (
            f"{variant.id}: no failed check names the mistake ({variant.hint!r}); {shown}"
        )
    if variant.not_hint is not None:  # a hint names only a mistake the student made
        assert not any(variant.not_hint in hint for hint in hints), (
            f"{variant.id}: a hint names a mistake it did not make ({variant.not_hint!r}); {shown}"
        )


def V(  # noqa: N802
    module: str,
    name: str,
    label: str,
    hint: str | None,
    source: str,
    hidden: bool = False,
    not_hint: str | None = None,
) -> Variant:
    return Variant(module, name, label, source, hint, hidden, not_hint)


# A plain train_bpe, every piece read on every round; the wrong variants below change one line.
TRAIN_BPE = """
    def train_bpe(text, vocab_size):
        if vocab_size < 256:
            raise ValueError("vocab_size must be at least 256")
        ranks = {bytes([b]): b for b in range(256)}
        words = [[bytes([b]) for b in piece.encode("utf-8")] for piece in split_pieces(text)]
        while len(ranks) < vocab_size:
            counts = {}
            for word in words:
                for pair in zip(word, word[1:]):
                    counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                break
            best = max(counts, key=counts.get)
            joined = best[0] + best[1]
            ranks.setdefault(joined, len(ranks))
            new_words = []
            for word in words:
                out, i = [], 0
                while i < len(word):
                    if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                        out.append(joined)
                        i += 2
                    else:
                        out.append(word[i])
                        i += 1
                new_words.append(out)
            words = new_words
        return ranks
"""

# adamw_step written out; the wrong variants below change one line.
ADAMW = """
    def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        t = state.get("step", 0) + 1
        ms = state.get("exp_avg", [torch.zeros_like(p) for p in params])
        vs = state.get("exp_avg_sq", [torch.zeros_like(p) for p in params])
        out, new_m, new_v = [], [], []
        for p, g, m, v in zip(params, grads, ms, vs):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            m_hat = m / (1 - b1**t)
            v_hat = v / (1 - b2**t)
            p = p * (1 - lr * weight_decay)
            out.append(p - lr * m_hat / (v_hat.sqrt() + eps))
            new_m.append(m)
            new_v.append(v)
        return out, {"step": t, "exp_avg": new_m, "exp_avg_sq": new_v}
"""


def changed(source: str, old: str, new: str) -> str:
    """``source`` with its one line ``old`` replaced by ``new`` (a planted mistake)."""
    assert source.count(old) == 1, old
    return source.replace(old, new)


# The harness's own hints (graders/hints.py) for failures any check can see.
IN_PLACE = "changed its input in place"
NOT_PLAIN = "return plain data"
BY_HAND = "cross_entropy must compute log-sum-exp by hand"

WRONG: list[Variant] = [
    # -- tokens -----------------------------------------------------------------------------------
    V(
        "tokens",
        "split_pieces",
        "str-split",
        "join back to the text",
        """
        def split_pieces(text):
            return text.split()
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "space-apart",
        "keeps the space before a word",
        r"""
        def split_pieces(text):
            return regex.findall(r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+", text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "no-contractions",
        "contractions",
        r"""
        def split_pieces(text):
            return regex.findall(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", text)
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "re-module",
        "regex package",
        """
        def split_pieces(text):
            import re
            return re.findall(GPT2_PATTERN, text)
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "first-pair",
        "not the first mergeable pair",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            merged = True
            while merged:
                merged = False
                for i in range(len(parts) - 1):
                    if parts[i] + parts[i + 1] in ranks:
                        parts[i : i + 2] = [parts[i] + parts[i + 1]]
                        merged = True
                        break
            return [ranks[p] for p in parts]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "rightmost-tie",
        "merge the leftmost one",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                best_rank, best_at = None, -1
                for i in range(len(parts) - 1):
                    rank = ranks.get(parts[i] + parts[i + 1])
                    if rank is not None and (best_rank is None or rank <= best_rank):
                        best_rank, best_at = rank, i
                if best_rank is None:
                    break
                parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
            return [ranks[part] for part in parts]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "returns-parts",
        "return the ranks",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                pairs = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:]))
                         if a + b in ranks]
                if not pairs:
                    break
                _, i = min(pairs)
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            return parts
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "one-pass",
        "look at all the pairs again",
        """
        def bpe_merge(piece, ranks):
            parts = [piece[i : i + 1] for i in range(len(piece))]
            i = 0
            while i < len(parts) - 1:
                if parts[i] + parts[i + 1] in ranks:
                    parts[i : i + 2] = [parts[i] + parts[i + 1]]
                i += 1
            return [ranks[p] for p in parts]
    """,
    ),
    V(
        "tokens",
        "encode",
        "no-split",
        "split the text into pieces first",
        """
        def encode(text):
            return list(bpe_merge(text.encode("utf-8"), bpe_ranks())) if text else []
    """,
    ),
    V(
        "tokens",
        "encode",
        "special-token",
        "plain text here",
        """
        def encode(text):
            ids = []
            for n, part in enumerate(text.split("<|endoftext|>")):
                if n:
                    ids.append(EOT_ID)
                for piece in split_pieces(part):
                    ids.extend(_encode_piece(piece))
            return ids
    """,
    ),
    V(
        "tokens",
        "encode",
        "latin-1",
        "UTF-8 bytes",
        """
        def encode(text):
            ids = []
            for piece in split_pieces(text):
                ids.extend(bpe_merge(piece.encode("latin-1", errors="replace"), bpe_ranks()))
            return ids
    """,
    ),
    V(
        "tokens",
        "decode",
        "strict",
        "errors='replace'",
        """
        def decode(ids):
            return b"".join(id_to_bytes()[i] for i in ids).decode("utf-8")
    """,
    ),
    V(
        "tokens",
        "decode",
        "per-token",
        "decode once",
        """
        def decode(ids):
            table = id_to_bytes()
            return "".join(table[i].decode("utf-8", errors="replace") for i in ids)
    """,
    ),
    V(
        "tokens",
        "decode",
        "no-endoftext",
        "id 50256 is <|endoftext|>",
        """
        def decode(ids):
            table = {rank: token for token, rank in bpe_ranks().items()}
            return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    """,
    ),
    V(
        "tokens",
        "train_bpe",
        "across-pieces",
        "inside each piece",
        changed(TRAIN_BPE, "for piece in split_pieces(text)]", "for piece in [text]]"),
    ),
    V(
        "tokens",
        "train_bpe",
        "tie-last",
        "not the last one",
        changed(
            TRAIN_BPE,
            "best = max(counts, key=counts.get)",
            "best = max(reversed(list(counts)), key=counts.get)",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "tie-greatest",
        "lexicographically greatest",
        changed(
            TRAIN_BPE,
            "best = max(counts, key=counts.get)",
            "best = max(counts, key=lambda pair: (counts[pair], pair))",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "first-only",
        "not only at its first occurrence",
        changed(
            TRAIN_BPE,
            "if i + 1 < len(word) and (word[i], word[i + 1]) == best:",
            "if joined not in out and i + 1 < len(word) and (word[i], word[i + 1]) == best:",
        ),
    ),
    V(
        "tokens",
        "train_bpe",
        "one-too-many",
        "one merge too many",
        changed(TRAIN_BPE, "while len(ranks) < vocab_size:", "while len(ranks) <= vocab_size:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "one-too-few",
        "one merge early",
        changed(TRAIN_BPE, "while len(ranks) < vocab_size:", "while len(ranks) < vocab_size - 1:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "no-validation",
        "raise ValueError",
        changed(TRAIN_BPE, "if vocab_size < 256:", "if vocab_size < 0:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "runs-out",
        "nothing to merge",
        changed(TRAIN_BPE, "if not counts:", "if False:"),
    ),
    V(
        "tokens",
        "train_bpe",
        "characters",
        "not from its characters",
        changed(
            TRAIN_BPE,
            '[bytes([b]) for b in piece.encode("utf-8")]',
            '[c.encode("utf-8") for c in piece]',
        ),
    ),
    # -- embeddings -------------------------------------------------------------------------------
    V(
        "embeddings",
        "lookup",
        "off-by-one",
        "ids are 0-based",
        """
        def lookup(table, ids):
            return table[ids - 1]
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "flattened",
        "keep the shape of ids",
        """
        def lookup(table, ids):
            return table.index_select(0, ids.flatten())
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "no-num-classes",
        "num_classes",
        """
        def one_hot_lookup(table, ids):
            return F.one_hot(ids).to(table.dtype) @ table
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "float32",
        "to the table's dtype",
        """
        def one_hot_lookup(table, ids):
            return F.one_hot(ids, num_classes=table.shape[0]).float() @ table
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "whole-table",
        "slice the first T rows",
        """
        def add_positions(vectors, pos_table):
            if vectors.shape[1] > pos_table.shape[0]:
                raise ValueError(f"T={vectors.shape[1]} > L={pos_table.shape[0]}")
            return vectors + pos_table
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "raises-at-equal",
        "T == L fits",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            if T >= L:
                raise ValueError(f"T={T} L={L}")
            return vectors + pos_table[:T]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "no-numbers",
        "contain both T and L",
        """
        def add_positions(vectors, pos_table):
            if vectors.shape[1] > pos_table.shape[0]:
                raise ValueError("the sequence is too long")
            return vectors + pos_table[: vectors.shape[1]]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "index-error",
        "raise ValueError yourself",
        """
        def add_positions(vectors, pos_table):
            T = vectors.shape[1]
            return vectors + pos_table[torch.arange(T)]
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "in-place",
        IN_PLACE,
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            if T > L:
                raise ValueError(f"T={T} > L={L}")
            vectors += pos_table[:T]
            return vectors
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "dot-product",
        "divide by the vectors' lengths",
        """
        def nearest(table, index, k):
            sims = table @ table[index]
            sims[index] = -float("inf")
            values, rows = torch.topk(sims, k)
            return [(int(r), float(v)) for r, v in zip(rows, values)]
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "includes-self",
        "leave row index itself out",
        """
        def nearest(table, index, k):
            sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            values, rows = torch.topk(sims, k)
            return [(int(r), float(v)) for r, v in zip(rows, values)]
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "tensors",
        "Python int and a Python float",
        """
        def nearest(table, index, k):
            sims = F.cosine_similarity(table[index].unsqueeze(0), table, dim=-1)
            sims[index] = -float("inf")
            values, rows = torch.topk(sims, k)
            return list(zip(rows, values))
    """,
    ),
    # -- windows ----------------------------------------------------------------------------------
    V(
        "windows",
        "shift",
        "swapped",
        "swapped",
        """
        def shift(ids):
            return ids[..., 1:], ids[..., :-1]
    """,
    ),
    V(
        "windows",
        "shift",
        "first-dim",
        "last dimension",
        """
        def shift(ids):
            return ids[:-1], ids[1:]
    """,
    ),
    V(
        "windows",
        "shift",
        "not-shifted",
        "targets are not shifted",
        """
        def shift(ids):
            return ids[..., :-1], ids[..., :-1]
    """,
    ),
    V(
        "windows",
        "window_starts",
        "no-target-room",
        "one more token for its last target",
        """
        def window_starts(n_tokens, context_length, stride):
            return list(range(0, n_tokens - context_length + 1, stride))
    """,
    ),
    V(
        "windows",
        "window_starts",
        "misses-last",
        "ends exactly at the last token",
        """
        def window_starts(n_tokens, context_length, stride):
            return list(range(0, n_tokens - context_length - 1, stride))
    """,
    ),
    V(
        "windows",
        "window_starts",
        "range-object",
        NOT_PLAIN,
        """
        def window_starts(n_tokens, context_length, stride):
            return range(0, max(n_tokens - context_length, 0), stride)
    """,
    ),
    V(
        "windows",
        "TokenWindows.__getitem__",
        "y-equals-x",
        "targets are not shifted",
        """
        def __getitem__(self, i):
            start = self.starts[i]
            window = self.ids[start : start + self.context_length]
            return window, window
    """,
    ),
    V(
        "windows",
        "TokenWindows.__len__",
        "len-plus-one",
        "number of window starts",
        """
        def __len__(self):
            return len(self.ids) - self.context_length
    """,
    ),
    V(
        "windows",
        "TokenWindows.__init__",
        "list-kept",
        "convert a list of ids to a tensor",
        """
        def __init__(self, ids, context_length, stride):
            self.ids = ids
            self.context_length = context_length
            self.starts = window_starts(len(ids), context_length, stride)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "global-seed",
        "a torch.Generator of its own",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            if seed is not None:
                torch.manual_seed(seed)
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=drop_last)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "drop-last-ignored",
        "pass drop_last on",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=True, generator=generator)
    """,
    ),
    V(
        "windows",
        "make_loader",
        "shuffle-ignored",
        "pass shuffle on",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=True, drop_last=drop_last, generator=generator)
    """,
    ),
    # -- attention --------------------------------------------------------------------------------
    V(
        "attention",
        "causal_mask",
        "inverted",
        "mask is inverted",
        """
        def causal_mask(T):
            return torch.ones(T, T, dtype=torch.bool).triu(1)
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "no-diagonal",
        "attend to itself",
        """
        def causal_mask(T):
            return torch.ones(T, T, dtype=torch.bool).tril(-1)
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "float",
        "bool tensor",
        """
        def causal_mask(T):
            return torch.ones(T, T).tril()
    """,
    ),
    V(
        "attention",
        "attention",
        "no-sqrt-d",
        "missing √D",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-inverted",
        "mask inverted",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "mask-ignored",
        "mask not applied",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            return torch.softmax(scores, dim=-1) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "overflow",
        "softmax overflow",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            weights = scores.exp()
            if mask is not None:
                weights = weights * mask
            return weights / weights.sum(dim=-1, keepdim=True) @ v
    """,
    ),
    V(
        "attention",
        "attention",
        "softmax-dim",
        "softmax over the keys",
        """
        def attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, dim=-2) @ v
    """,
    ),
    # -- objective --------------------------------------------------------------------------------
    V(
        "objective",
        "cross_entropy",
        "mean-over-all",
        "mean over ignored positions",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            kept = logits[keep]
            peak = kept.max(dim=-1, keepdim=True).values
            log_norm = peak.squeeze(-1) + (kept - peak).exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).sum() / len(targets)
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "overflow",
        "overflow on logits of 1e4",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            kept = logits[keep]
            log_norm = kept.exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "not-ignored",
        "ignore_index must be left out",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            peak = logits.max(dim=-1, keepdim=True).values
            log_probs = logits - peak - (logits - peak).exp().sum(dim=-1, keepdim=True).log()
            return -log_probs[torch.arange(len(targets)), targets].mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "hard-coded-ignore",
        "use the ignore_index argument",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != -100
            kept = logits[keep]
            peak = kept.max(dim=-1, keepdim=True).values
            log_norm = peak.squeeze(-1) + (kept - peak).exp().sum(dim=-1).log()
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (log_norm - picked).mean()
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "library-cross-entropy",
        BY_HAND,
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            import torch.nn.functional as F
            return F.cross_entropy(logits, targets, ignore_index=ignore_index)
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "torch-logsumexp",
        BY_HAND,
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            import torch
            keep = targets != ignore_index
            kept = logits[keep]
            picked = kept.gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
            return (torch.logsumexp(kept, dim=-1) - picked).mean()
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "not-shifted",
        "targets are not shifted",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits.reshape(-1, V), input_ids.reshape(-1), ignore_index)
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "backwards",
        "shift the other way",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits[:, 1:].reshape(-1, V), input_ids[:, :-1].reshape(-1),
                                 ignore_index)
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "ignore-index-dropped",
        "pass ignore_index on",
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            V = logits.shape[-1]
            return cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1))
    """,
    ),
    V(
        "objective",
        "perplexity",
        "base-two",
        "use e, not 2",
        """
        def perplexity(loss):
            return 2.0 ** float(loss)
    """,
    ),
    V(
        "objective",
        "perplexity",
        "tensor",
        "Python float",
        """
        def perplexity(loss):
            import torch
            return torch.exp(torch.as_tensor(loss))
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "in-place",
        IN_PLACE,
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            targets[targets == pad_id] = ignore_index
            return targets
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "hard-coded-ignore",
        "use the ignore_index argument",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            return targets.masked_fill(targets == pad_id, -100)
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "zero-not-pad",
        "compare with pad_id",
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            return targets.masked_fill(targets == 0, ignore_index)
    """,
    ),
    # -- packing ----------------------------------------------------------------------------------
    V(
        "packing",
        "pack",
        "no-eos",
        "end every document with eos_id",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc]
            owners = [i for i, doc in enumerate(docs) for _ in doc]
            n = len(stream) // seq_len
            return (torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "pack",
        "padded",
        "drop the incomplete last row",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc + [eos_id]]
            owners = [i for i, doc in enumerate(docs) for _ in doc + [eos_id]]
            while len(stream) % seq_len:
                stream.append(eos_id)
                owners.append(owners[-1])
            n = len(stream) // seq_len
            return (torch.tensor(stream, dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners, dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "pack",
        "eos-next-doc",
        "belongs to the document it ends",
        """
        def pack(docs, seq_len, eos_id):
            stream = [t for doc in docs for t in doc + [eos_id]]
            owners = [i + (j == len(d)) for i, d in enumerate(docs) for j in range(len(d) + 1)]
            n = len(stream) // seq_len
            return (torch.tensor(stream[: n * seq_len], dtype=torch.long).reshape(n, seq_len),
                    torch.tensor(owners[: n * seq_len], dtype=torch.long).reshape(n, seq_len))
    """,
    ),
    V(
        "packing",
        "document_mask",
        "causal-only",
        "block-diagonal",
        """
        def document_mask(doc_ids):
            B, T = doc_ids.shape
            return torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T).clone()
    """,
    ),
    V(
        "packing",
        "document_mask",
        "not-causal",
        "causal too",
        """
        def document_mask(doc_ids):
            return doc_ids.unsqueeze(-1) == doc_ids.unsqueeze(-2)
    """,
    ),
    V(
        "packing",
        "position_ids",
        "not-reset",
        "not reset per document",
        """
        def position_ids(doc_ids):
            return torch.arange(doc_ids.shape[1]).expand_as(doc_ids).clone()
    """,
    ),
    V(
        "packing",
        "position_ids",
        "row-continues",
        "a row's first token starts a run",
        """
        def position_ids(doc_ids):
            flat = doc_ids.flatten().tolist()
            out, count = [], 0
            for t, doc in enumerate(flat):
                count = count + 1 if t and doc == flat[t - 1] else 0
                out.append(count)
            return torch.tensor(out).reshape(doc_ids.shape)
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "crosses",
        "cross a document boundary",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            targets = torch.full_like(input_ids, ignore_index)
            targets[:, :-1] = input_ids[:, 1:]
            return targets
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "wraps",
        "the last position has no next token",
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            same = torch.roll(doc_ids, -1, dims=1) == doc_ids
            return torch.roll(input_ids, -1, dims=1).masked_fill(~same, ignore_index)
    """,
    ),
    # -- training ---------------------------------------------------------------------------------
    V(
        "training",
        "adamw_step",
        "no-bias-correction",
        "correct the moments' bias",
        changed(
            changed(ADAMW, "m_hat = m / (1 - b1**t)", "m_hat = m"),
            "v_hat = v / (1 - b2**t)",
            "v_hat = v",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "l2-decay",
        "Adam with an L2 penalty",
        changed(
            changed(ADAMW, "p = p * (1 - lr * weight_decay)", "p = p"),
            "m = b1 * m + (1 - b1) * g",
            "g = g + weight_decay * p\n            m = b1 * m + (1 - b1) * g",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "decay-without-lr",
        "not by weight_decay alone",
        changed(ADAMW, "p = p * (1 - lr * weight_decay)", "p = p * (1 - weight_decay)"),
    ),
    V(
        "training",
        "adamw_step",
        "eps-inside",
        "not inside it",
        changed(
            ADAMW,
            "out.append(p - lr * m_hat / (v_hat.sqrt() + eps))",
            "out.append(p - lr * m_hat / (v_hat + eps).sqrt())",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "step-off-by-one",
        "this used one more",
        changed(
            changed(ADAMW, "m_hat = m / (1 - b1**t)", "m_hat = m / (1 - b1 ** (t + 1))"),
            "v_hat = v / (1 - b2**t)",
            "v_hat = v / (1 - b2 ** (t + 1))",
        ),
    ),
    V(
        "training",
        "adamw_step",
        "step-count",
        "counts the steps taken",
        changed(ADAMW, '{"step": t, "exp_avg"', '{"step": t - 1, "exp_avg"'),
    ),
    V(
        "training",
        "adamw_step",
        "shared-state",
        "moments of its own",
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            t = state.get("step", 0) + 1
            m = state["exp_avg"][0] if state else torch.zeros_like(params[0])
            v = state["exp_avg_sq"][0] if state else torch.zeros_like(params[0])
            out = []
            for p, g in zip(params, grads):
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                step = lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + eps)
                out.append(p * (1 - lr * weight_decay) - step)
            n = len(params)
            return out, {"step": t, "exp_avg": [m] * n, "exp_avg_sq": [v] * n}
    """,
    ),
    V(
        "training",
        "adamw_step",
        "in-place",
        IN_PLACE,
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            state.setdefault("step", 0)
            state.setdefault("exp_avg", [torch.zeros_like(p) for p in params])
            state.setdefault("exp_avg_sq", [torch.zeros_like(p) for p in params])
            state["step"] += 1
            t = state["step"]
            for p, g, m, v in zip(params, grads, state["exp_avg"], state["exp_avg_sq"]):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.mul_(1 - lr * weight_decay)
                denom = (v / (1 - b2**t)).sqrt() + eps
                p.addcdiv_(m / (1 - b1**t), denom, value=-lr)
            return params, state
    """,
    ),
    V(
        "training",
        "lr_at",
        "zero-start",
        "starting at 0",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * step / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "to-zero",
        "not down to 0",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return 0.5 * max_lr * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "keeps-cycling",
        "stay at min_lr",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if not 0 <= warmup_steps < max_steps:
                raise ValueError("bad schedule")
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            progress = (step - warmup_steps) / (max_steps - warmup_steps)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "lr_at",
        "no-validation",
        "raise ValueError when warmup_steps",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if step < warmup_steps:
                return max_lr * (step + 1) / warmup_steps
            if step > max_steps:
                return min_lr
            progress = (step - warmup_steps) / max(max_steps - warmup_steps, 1)
            return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    """,
    ),
    V(
        "training",
        "train_step",
        "unscaled",
        "without loss scaling",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "not-zeroed",
        "not zeroing grads",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "no-clip",
        "clip",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "no-train-mode",
        "train mode first",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "returns-sum",
        "not their sum",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            total = 0.0
            for x, y in micro_batches:
                loss = next_token_loss(model, x, y)
                (loss / len(micro_batches)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total
    """,
    ),
    V(
        "training",
        "evaluate",
        "left-eval",
        "not restoring train mode",
        """
        def evaluate(model, batches):
            model.eval()
            with torch.no_grad():
                losses = [next_token_loss(model, x, y).item() for x, y in batches]
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "forced-train",
        "must stay in eval mode",
        """
        def evaluate(model, batches):
            model.eval()
            with torch.no_grad():
                losses = [next_token_loss(model, x, y).item() for x, y in batches]
            model.train()
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "with-grad",
        "without gradients",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            losses = [next_token_loss(model, x, y).item() for x, y in batches]
            model.train(was)
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "token-weighted",
        "each batch counts once",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            total, count = 0.0, 0
            with torch.no_grad():
                for x, y in batches:
                    n = int((y != -100).sum())
                    total += next_token_loss(model, x, y).item() * n
                    count += n
            model.train(was)
            return total / count
    """,
    ),
    V(
        "training",
        "evaluate",
        "len-of-batches",
        "even a one-shot generator",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            with torch.no_grad():
                total = sum(next_token_loss(model, x, y).item() for x, y in batches)
            model.train(was)
            return total / len(batches)
    """,
        hidden=True,
    ),
    V(
        "training",
        "fit",
        "lr-after-step",
        "before the step, not after",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            batches = _cycle(train_batches)
            history = []
            for step in range(steps):
                micro = [next(batches) for _ in range(grad_accum)]
                loss = train_step(model, micro, optimizer)
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                record = {"step": step, "lr": lr, "loss": loss}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "eval-from-zero",
        "eval_every-th step",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            batches = _cycle(train_batches)
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                micro = [next(batches) for _ in range(grad_accum)]
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and step % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "no-cycle",
        "start a fresh pass",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            batches = iter(train_batches)
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                micro = [next(batches) for _ in range(grad_accum)]
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "itertools-cycle",
        "itertools.cycle replays",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            import itertools
            batches = itertools.cycle(train_batches)
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                micro = [next(batches) for _ in range(grad_accum)]
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
        hidden=True,
    ),
    # -- generation -------------------------------------------------------------------------------
    V(
        "generation",
        "sample_next",
        "top-k-not-capped",
        "top_k not capped at V",
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
        "temperature 0 means greedy",
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
        "draw with the generator you are given",
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
        "ties included",
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
        hidden=True,
    ),
    V(
        "generation",
        "sample_next",
        "unsqueezed",
        "return shape [B]",
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
        "generate",
        "not-cropped",
        "not cropping context",
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
        "last position",
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
        "the last context_length tokens",
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
        "without gradients",
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
        "load_gpt2_state_dict",
        "drops-c-attn-bias",
        "c_attn.bias",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(("attn.bias", "attn.masked_bias")):
                    continue
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
        "no-transpose",
        "transpose the four Conv1D",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS):
                    continue
                if key != "lm_head.weight" and not key.startswith("transformer."):
                    key = "transformer." + key
                ours[key] = value
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "transposes-all",
        "transpose only the four",
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
        "add the transformer. prefix",
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
        "weight tying",
        """
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
            return ours
    """,
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "pops-input",
        IN_PLACE,
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
]

# Mistakes the graders missed once (issue 9), and more of the same kind: gradient flow, the
# caller's generator, inputs left untouched, unequal batch sizes, case and edge inputs. The last
# ones also check that a hint names only a mistake the student made (``not_hint``).
WRONG += [
    V(
        "tokens",
        "split_pieces",
        "ignore-case",
        "case-sensitive",
        """
        def split_pieces(text):
            return regex.compile(GPT2_PATTERN, regex.IGNORECASE).findall(text)
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "detached",
        "detached from the table",
        """
        def lookup(table, ids):
            return table[ids].detach()
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "through-python",
        "detached from the table",
        """
        def lookup(table, ids):
            return torch.tensor(table.tolist(), dtype=table.dtype)[ids]
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "detached",
        "detached from the table",
        """
        def one_hot_lookup(table, ids):
            one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)
            return (one_hot @ table).detach()
    """,
    ),
    V(
        "windows",
        "make_loader",
        "generator-only-when-shuffling",
        "shuffling or not",
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            generator = None
            if shuffle and seed is not None:
                generator = torch.Generator().manual_seed(seed)
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size=batch_size,
                              shuffle=shuffle, drop_last=drop_last, generator=generator)
    """,
    ),
    V(
        "training",
        "train_step",
        "token-weighted",
        "weighted by their token count",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            counts = [int((y != -100).sum()) for _, y in micro_batches]
            total = 0.0
            for (x, y), n in zip(micro_batches, counts):
                loss = next_token_loss(model, x, y)
                (loss * n / sum(counts)).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / len(micro_batches)
    """,
    ),
    V(
        "training",
        "train_step",
        "empties-list",
        "changed the caller's list of micro-batches",
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            count, total = len(micro_batches), 0.0
            while micro_batches:
                x, y = micro_batches.pop(0)
                loss = next_token_loss(model, x, y)
                (loss / count).backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            return total / count
    """,
    ),
    V(
        "training",
        "evaluate",
        "empties-list",
        "evaluate changed the caller's batches",
        """
        def evaluate(model, batches):
            was = model.training
            model.eval()
            losses = []
            with torch.no_grad():
                while batches:
                    x, y = batches.pop()
                    losses.append(next_token_loss(model, x, y).item())
            model.train(was)
            return sum(losses) / len(losses)
    """,
    ),
    V(
        "training",
        "fit",
        "first-group-only",
        "first param group only",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            batches = _cycle(train_batches)
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                optimizer.param_groups[0]["lr"] = lr
                micro = [next(batches) for _ in range(grad_accum)]
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "training",
        "fit",
        "rotates-list",
        "fit changed the caller's list of batches",
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            history = []
            for step in range(steps):
                lr = lr_schedule(step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                micro = []
                for _ in range(grad_accum):  # the list itself is the queue: take, put back
                    micro.append(train_batches.pop(0))
                    train_batches.append(micro[-1])
                record = {"step": step, "lr": lr, "loss": train_step(model, micro, optimizer)}
                due = eval_every is not None and (step + 1) % eval_every == 0
                if eval_batches is not None and (due or step == steps - 1):
                    record["eval_loss"] = evaluate(model, eval_batches)
                history.append(record)
            return history
    """,
    ),
    V(
        "generation",
        "sample_next",
        "squeezes-all",
        "squeeze only the last dimension",
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
        "embeddings",
        "add_positions",
        "detached",
        "no gradient reaches the position table",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[-2], pos_table.shape[0]
            if T > L:
                raise ValueError(f"sequence length T={T} exceeds the position table's L={L} rows")
            return vectors + pos_table[:T].detach()
    """,
    ),
    V(
        "generation",
        "sample_next",
        "argmax-top-1",
        "top_k = 1 is still a draw",
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
        "draw with the generator you are given",
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
        "generate",
        "rolls-prompt",
        "changed the caller's prompt",
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
        "objective",
        "cross_entropy",
        "no-max-back",
        "add m back",
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            logits, targets = logits[keep], targets[keep]
            shifted = logits - logits.max(dim=-1, keepdim=True).values
            picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return (shifted.exp().sum(dim=-1).log() - picked).sum() / keep.sum()
    """,
        not_hint="hard-coded -100",
    ),
    V(
        "objective",
        "lm_loss",
        "summed",
        None,
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            import torch.nn.functional as F
            V = logits.shape[-1]
            return F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1),
                                   ignore_index=ignore_index, reduction="sum")
    """,
        not_hint="pass ignore_index on",
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "not-transposed-hidden",
        "transpose the four Conv1D",
        """
        def load_gpt2_state_dict(hf_state):
            ours = {}
            for key, value in hf_state.items():
                if key.endswith(MASK_BUFFERS):
                    continue
                if key != "lm_head.weight" and not key.startswith("transformer."):
                    key = "transformer." + key
                ours[key] = value
            ours.setdefault("lm_head.weight", ours["transformer.wte.weight"])
            return ours
    """,
        hidden=True,
        not_hint="when lm_head.weight is present keep it",
    ),
    V(
        "generation",
        "load_gpt2_state_dict",
        "replaces-lm-head",
        "when lm_head.weight is present keep it",
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
        hidden=True,
    ),
]

RIGHT: list[Variant] = [
    V(
        "tokens",
        "train_bpe",
        "every-piece-every-round",
        None,
        TRAIN_BPE,
    ),
    V(
        "tokens",
        "train_bpe",
        "regex-and-counter",
        None,
        r"""
        def train_bpe(text, vocab_size):
            if vocab_size < 256:
                raise ValueError(f"vocab_size={vocab_size} is below 256")
            ranks = {bytes([b]): b for b in range(256)}
            pieces = regex.findall(_PIECES, text)
            words = [list(map(lambda b: bytes([b]), w.encode())) for w in pieces]
            while len(ranks) < vocab_size:
                counts = collections.Counter(p for w in words for p in zip(w, w[1:]))
                if not counts:
                    return ranks
                (a, b), _ = counts.most_common(1)[0]
                ranks.setdefault(a + b, len(ranks))
                for w in words:
                    i = 0
                    while i < len(w) - 1:
                        if w[i] == a and w[i + 1] == b:
                            w[i : i + 2] = [a + b]
                        i += 1
            return ranks
    """,
    ),
    V(
        "training",
        "adamw_step",
        "torch-formulation",
        None,
        """
        def adamw_step(params, grads, state, *, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
            b1, b2 = betas
            step = state.get("step", 0) + 1
            new = {"step": step, "exp_avg": [], "exp_avg_sq": []}
            out = []
            for i, (p, g) in enumerate(zip(params, grads)):
                m = state["exp_avg"][i].clone() if state else torch.zeros_like(p)
                v = state["exp_avg_sq"][i].clone() if state else torch.zeros_like(p)
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / math.sqrt(1 - b2**step)).add_(eps)
                q = p.clone().mul_(1 - lr * weight_decay)
                q.addcdiv_(m, denom, value=-lr / (1 - b1**step))
                out.append(q)
                new["exp_avg"].append(m)
                new["exp_avg_sq"].append(v)
            return out, new
    """,
    ),
    V(
        "tokens",
        "split_pieces",
        "finditer",
        None,
        """
        def split_pieces(text):
            return [m.group(0) for m in _PIECES.finditer(text)]
    """,
    ),
    V(
        "tokens",
        "bpe_merge",
        "min-with-key",
        None,
        """
        def bpe_merge(piece, ranks):
            parts = [bytes([b]) for b in piece]
            while True:
                candidates = [i for i in range(len(parts) - 1) if parts[i] + parts[i + 1] in ranks]
                if not candidates:
                    return [ranks[p] for p in parts]
                i = min(candidates, key=lambda j: (ranks[parts[j] + parts[j + 1]], j))
                parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2 :]
    """,
    ),
    V(
        "tokens",
        "encode",
        "comprehension",
        None,
        """
        def encode(text):
            ranks = bpe_ranks()
            return [i for piece in split_pieces(text) for i in bpe_merge(piece.encode(), ranks)]
    """,
    ),
    V(
        "tokens",
        "decode",
        "bytearray",
        None,
        """
        def decode(ids):
            out = bytearray()
            for i in ids:
                out += id_to_bytes()[i]
            return out.decode(errors="replace")
    """,
    ),
    V(
        "embeddings",
        "lookup",
        "f-embedding",
        None,
        """
        def lookup(table, ids):
            return F.embedding(ids, table)
    """,
    ),
    V(
        "embeddings",
        "one_hot_lookup",
        "eye",
        None,
        """
        def one_hot_lookup(table, ids):
            return torch.eye(table.shape[0], dtype=table.dtype)[ids] @ table
    """,
    ),
    V(
        "embeddings",
        "add_positions",
        "torch-add",
        None,
        """
        def add_positions(vectors, pos_table):
            B, T, C = vectors.shape
            L = pos_table.shape[0]
            if T > L:
                raise ValueError(f"{T} positions, but the table has {L}")
            return torch.add(vectors, pos_table.narrow(0, 0, T).unsqueeze(0))
    """,
    ),
    V(
        "embeddings",
        "nearest",
        "normalised-matmul",
        None,
        """
        def nearest(table, index, k):
            unit = table / table.norm(dim=-1, keepdim=True)
            sims = (unit @ unit[index]).tolist()
            order = sorted((r for r in range(len(sims)) if r != index), key=lambda r: -sims[r])
            return [(r, sims[r]) for r in order[:k]]
    """,
    ),
    V(
        "windows",
        "shift",
        "narrow",
        None,
        """
        def shift(ids):
            T = ids.shape[-1]
            return ids.narrow(-1, 0, T - 1), ids.narrow(-1, 1, T - 1)
    """,
    ),
    V(
        "windows",
        "window_starts",
        "while-loop",
        None,
        """
        def window_starts(n_tokens, context_length, stride):
            starts, s = [], 0
            while s + context_length + 1 <= n_tokens:
                starts.append(s)
                s += stride
            return starts
    """,
    ),
    V(
        "windows",
        "TokenWindows",
        "lazy",
        None,
        """
        class TokenWindows(Dataset):
            def __init__(self, ids, context_length, stride):
                self.ids = torch.tensor(list(ids), dtype=torch.long)
                self.c, self.s = context_length, stride

            def __len__(self):
                n = len(self.ids) - self.c - 1
                return 0 if n < 0 else n // self.s + 1

            def __getitem__(self, i):
                window = self.ids[i * self.s : i * self.s + self.c + 1]
                return window[:-1].clone(), window[1:].clone()
    """,
    ),
    V(
        "windows",
        "make_loader",
        "options-dict",
        None,
        """
        def make_loader(ids, batch_size, context_length, stride, shuffle=True, drop_last=True,
                        seed=None):
            options = {"shuffle": shuffle, "drop_last": drop_last}
            if seed is not None:
                generator = torch.Generator()
                generator.manual_seed(seed)
                options["generator"] = generator
            return DataLoader(TokenWindows(ids, context_length, stride), batch_size, **options)
    """,
    ),
    V(
        "attention",
        "causal_mask",
        "compare-aranges",
        None,
        """
        def causal_mask(T):
            positions = torch.arange(T)
            return positions.unsqueeze(0) <= positions.unsqueeze(1)
    """,
    ),
    V(
        "attention",
        "attention",
        "manual-softmax",
        None,
        """
        def attention(q, k, v, mask=None):
            scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
            if mask is not None:
                scores = torch.where(mask, scores, torch.tensor(float("-inf")))
            scores = scores - scores.amax(dim=-1, keepdim=True)
            weights = scores.exp()
            return (weights / weights.sum(dim=-1, keepdim=True)) @ v
    """,
    ),
    V(
        "objective",
        "cross_entropy",
        "masked-by-hand",
        None,
        """
        def cross_entropy(logits, targets, ignore_index=-100):
            keep = targets != ignore_index
            safe = targets.clamp(min=0) * keep
            peak = logits.amax(dim=-1, keepdim=True).detach()
            log_norm = peak.squeeze(-1) + (logits - peak).exp().sum(dim=-1).log()
            losses = log_norm - logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
            return (losses * keep).sum() / keep.sum()
    """,
    ),
    V(
        "objective",
        "lm_loss",
        "class-dimension",
        None,
        """
        def lm_loss(logits, input_ids, ignore_index=-100):
            import torch.nn.functional as F
            return F.cross_entropy(logits[:, :-1].transpose(1, 2), input_ids[:, 1:],
                                   ignore_index=ignore_index)
    """,
    ),
    V(
        "objective",
        "perplexity",
        "float32-exp",
        None,
        """
        def perplexity(loss):
            import torch
            return float(torch.tensor(loss).exp())
    """,
    ),
    V(
        "objective",
        "perplexity",
        "e-power",
        None,
        """
        def perplexity(loss):
            return math.e ** float(loss)
    """,
    ),
    V(
        "objective",
        "pad_targets",
        "where",
        None,
        """
        def pad_targets(targets, pad_id, ignore_index=-100):
            import torch
            return torch.where(targets == pad_id, torch.full_like(targets, ignore_index), targets)
    """,
    ),
    V(
        "packing",
        "pack",
        "flat-then-view",
        None,
        """
        def pack(docs, seq_len, eos_id):
            import itertools
            stream = list(itertools.chain.from_iterable(d + [eos_id] for d in docs))
            owner = list(itertools.chain.from_iterable([i] * (len(d) + 1)
                                                       for i, d in enumerate(docs)))
            n = len(stream) // seq_len
            ids = torch.tensor(stream, dtype=torch.long)[: n * seq_len].view(n, seq_len)
            doc_ids = torch.tensor(owner, dtype=torch.long)[: n * seq_len].view(n, seq_len)
            return ids, doc_ids
    """,
    ),
    V(
        "packing",
        "document_mask",
        "loops",
        None,
        """
        def document_mask(doc_ids):
            B, T = doc_ids.shape
            mask = torch.zeros(B, T, T, dtype=torch.bool)
            for b in range(B):
                for i in range(T):
                    for j in range(i + 1):
                        mask[b, i, j] = bool(doc_ids[b, i] == doc_ids[b, j])
            return mask
    """,
    ),
    V(
        "packing",
        "position_ids",
        "loops",
        None,
        """
        def position_ids(doc_ids):
            out = torch.zeros_like(doc_ids)
            for b in range(doc_ids.shape[0]):
                for t in range(1, doc_ids.shape[1]):
                    if doc_ids[b, t] == doc_ids[b, t - 1]:
                        out[b, t] = out[b, t - 1] + 1
            return out
    """,
    ),
    V(
        "packing",
        "packed_targets",
        "where",
        None,
        """
        def packed_targets(input_ids, doc_ids, ignore_index=-100):
            nxt = torch.cat([input_ids[:, 1:], input_ids[:, :1]], dim=1)
            same = torch.cat([doc_ids[:, 1:] == doc_ids[:, :-1],
                              torch.zeros_like(doc_ids[:, :1], dtype=torch.bool)], dim=1)
            return torch.where(same, nxt, torch.full_like(nxt, ignore_index))
    """,
    ),
    V(
        "training",
        "lr_at",
        "rewritten",
        None,
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            if warmup_steps < 0 or warmup_steps >= max_steps:
                raise ValueError(f"warmup_steps={warmup_steps}, max_steps={max_steps}")
            if step >= warmup_steps:
                t = min(step - warmup_steps, max_steps - warmup_steps)
                cosine = (math.cos(math.pi * t / (max_steps - warmup_steps)) + 1) / 2
                return min_lr + (max_lr - min_lr) * cosine
            return (step + 1) * max_lr / warmup_steps
    """,
    ),
    V(
        "training",
        "train_step",
        "one-backward",
        None,
        """
        def train_step(model, micro_batches, optimizer, max_grad_norm=1.0):
            model.train()
            losses = [next_token_loss(model, x, y) for x, y in micro_batches]
            (torch.stack(losses).sum() / len(losses)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            return sum(loss.item() for loss in losses) / len(losses)
    """,
    ),
    V(
        "training",
        "evaluate",
        "inference-mode",
        None,
        """
        def evaluate(model, batches):
            was_training = model.training
            model.eval()
            total, count = 0.0, 0
            try:
                with torch.inference_mode():
                    for x, y in batches:
                        total += next_token_loss(model, x, y).item()
                        count += 1
            finally:
                model.train(was_training)
            return total / count
    """,
    ),
    V(
        "training",
        "fit",
        "while-loop",
        None,
        """
        def fit(model, optimizer, train_batches, *, steps, grad_accum, lr_schedule,
                eval_batches=None, eval_every=None):
            it = iter(train_batches)
            history, step = [], 0
            while step < steps:
                for group in optimizer.param_groups:
                    group["lr"] = lr_schedule(step)
                micro = []
                while len(micro) < grad_accum:
                    try:
                        micro.append(next(it))
                    except StopIteration:
                        it = iter(train_batches)
                loss = train_step(model, micro, optimizer)
                history.append({"step": step, "lr": lr_schedule(step), "loss": loss})
                due = step == steps - 1 or (eval_every and (step + 1) % eval_every == 0)
                if eval_batches is not None and due:
                    history[-1]["eval_loss"] = evaluate(model, eval_batches)
                step += 1
            return history
    """,
    ),
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

# -- block (lesson 5) ------------------------------------------------------------------------------
BY_HAND_LN = "layer_norm must normalise by hand"
BY_HAND_GELU = "gelu must compute the tanh formula by hand"
_LN = "def layer_norm(x, weight, bias, eps=1e-5):\n"
_SA = "def self_attention(x, params, n_head, mask=None):\n"
_TB = "def transformer_block(x, params, n_head, mask=None):\n"
_GPT = "def gpt_logits(ids, params, n_head):\n"
_GPT_BODY = """
    x = lookup(params["transformer.wte.weight"], ids)
    x = add_positions(x, params["transformer.wpe.weight"])
    mask = causal_mask(ids.shape[1])
    numbers = sorted({int(k.split(".")[2]) for k in params if k.startswith("transformer.h.")})
    for n in numbers:
        x = transformer_block(x, _under(params, f"transformer.h.{n}."), n_head, mask)
    x = layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
    return F.linear(x, params.get("lm_head.weight", params["transformer.wte.weight"]))
"""


def _block_variant(name: str, label: str, hint: str | None, head: str, body: str) -> Variant:
    return V("block", name, label, hint, head + textwrap.indent(textwrap.dedent(body), "    "))


def _gpt(label: str, hint: str | None, old: str, new: str) -> Variant:
    """A gpt_logits that differs from the reference in one line."""
    assert old in _GPT_BODY
    return _block_variant("gpt_logits", label, hint, _GPT, _GPT_BODY.replace(old, new))


WRONG += [
    _block_variant(
        "layer_norm",
        "unbiased-variance",
        "the variance of layer norm is the biased one",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "eps-outside-sqrt",
        "eps goes inside the square root",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        std = (x - mean).pow(2).mean(-1, keepdim=True).sqrt()
        y = (x - mean) / (std + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "wrong-axis",
        "normalise over the last dimension only",
        _LN,
        """
        mean = x.mean(-2, keepdim=True)
        var = (x - mean).pow(2).mean(-2, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "no-affine",
        "multiply by weight and add bias",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
        """,
    ),
    _block_variant(
        "layer_norm",
        "std-not-var",
        "not by the variance itself",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / ((x - mean).pow(2).mean(-1, keepdim=True) + eps) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "bias-always-added",
        "bias may be None",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "no-eps",
        "without eps",
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True)) * weight
        return y if bias is None else y + bias
        """,
    ),
    _block_variant(
        "layer_norm",
        "library",
        BY_HAND_LN,
        _LN,
        """
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
        """,
    ),
    _block_variant(
        "layer_norm",
        "library-module",
        BY_HAND_LN,
        _LN,
        """
        norm = torch.nn.LayerNorm(x.shape[-1], eps=eps, bias=bias is not None)
        with torch.no_grad():
            norm.weight.copy_(weight)
            if bias is not None:
                norm.bias.copy_(bias)
        return norm(x).detach()
        """,
    ),
    _block_variant(
        "layer_norm",
        "name-built-at-run-time",
        BY_HAND_LN,
        _LN,
        """
        kernel = getattr(F, "_".join(["layer", "norm"]))
        return kernel(x, x.shape[-1:], weight, bias, eps)
        """,
    ),
    V(
        "block",
        "gelu",
        "erf",
        "that is the exact (erf) GELU",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        """,
    ),
    V(
        "block",
        "gelu",
        "relu",
        "that is ReLU",
        """
        def gelu(x):
            return torch.relu(x)
        """,
    ),
    V(
        "block",
        "gelu",
        "square-not-cube",
        "has x³ in it",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x)))
        """,
    ),
    V(
        "block",
        "gelu",
        "two-over-pi",
        "check the constants",
        """
        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(2.0 / math.pi * (x + 0.044715 * x**3)))
        """,
    ),
    V(
        "block",
        "gelu",
        "library",
        BY_HAND_GELU,
        """
        def gelu(x):
            return F.gelu(x, approximate="tanh")
        """,
    ),
    V(
        "block",
        "gelu",
        "library-module",
        BY_HAND_GELU,
        """
        def gelu(x):
            return torch.nn.GELU(approximate="tanh")(x)
        """,
    ),
    V(
        "block",
        "split_heads",
        "interleaved",
        "heads are interleaved",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, T, C // n_head, n_head).permute(0, 3, 1, 2)
        """,
    ),
    V(
        "block",
        "split_heads",
        "no-transpose",
        "the head axis must come before the positions",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, T, n_head, C // n_head)
        """,
    ),
    V(
        "block",
        "split_heads",
        "reshape",
        "mixes positions into heads",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            if C % n_head:
                raise ValueError(f"C={C} and n_head={n_head}")
            return x.reshape(B, n_head, T, C // n_head)
        """,
    ),
    V(
        "block",
        "split_heads",
        "no-value-error",
        "raises ValueError naming both",
        """
        def split_heads(x, n_head):
            B, T, C = x.shape
            return x.view(B, T, n_head, C // n_head).transpose(1, 2)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "interleaved",
        "heads are interleaved",
        """
        def merge_heads(y):
            B, H, T, D = y.shape
            return y.permute(0, 2, 3, 1).reshape(B, T, H * D)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "reshape",
        "mixes positions",
        """
        def merge_heads(y):
            B, H, T, D = y.shape
            return y.reshape(B, T, H * D)
        """,
    ),
    _block_variant(
        "self_attention",
        "kqv",
        "q first, k second",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        k, q, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = merge_heads(attention(q, k, v, mask))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "no-causal-mask",
        "with mask None the attention is causal",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        y = merge_heads(attention(q, k, v, mask))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "one-head",
        "attention runs per head",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = qkv.split(C, dim=-1)
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = attention(q, k, v, mask)
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    _block_variant(
        "self_attention",
        "no-output-projection",
        "comes the output projection c_proj",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        return merge_heads(attention(q, k, v, mask))
        """,
    ),
    _block_variant(
        "self_attention",
        "weights-not-transposed",
        "as nn.Linear stores them, [out, in]",
        _SA,
        """
        C = x.shape[-1]
        qkv = x @ params["c_attn.weight"] + params["c_attn.bias"]
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        y = merge_heads(attention(q, k, v, mask))
        return y @ params["c_proj.weight"] + params["c_proj.bias"]
        """,
    ),
    _block_variant(
        "self_attention",
        "no-bias",
        "add the biases of c_attn and c_proj",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"])
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        mask = causal_mask(x.shape[1]) if mask is None else mask
        return F.linear(merge_heads(attention(q, k, v, mask)), params["c_proj.weight"])
        """,
    ),
    _block_variant(
        "self_attention",
        "mask-ignored",
        "a given mask replaces the causal one",
        _SA,
        """
        C = x.shape[-1]
        qkv = F.linear(x, params["c_attn.weight"], params.get("c_attn.bias"))
        q, k, v = (split_heads(t, n_head) for t in qkv.split(C, dim=-1))
        y = merge_heads(attention(q, k, v, causal_mask(x.shape[1])))
        return F.linear(y, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "erf-gelu",
        "not the exact erf GELU",
        """
        def mlp(x, params):
            hidden = F.gelu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "relu",
        "not ReLU",
        """
        def mlp(x, params):
            hidden = torch.relu(F.linear(x, params["c_fc.weight"], params.get("c_fc.bias")))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "no-activation",
        "without it the MLP is one linear map",
        """
        def mlp(x, params):
            hidden = F.linear(x, params["c_fc.weight"], params.get("c_fc.bias"))
            return F.linear(hidden, params["c_proj.weight"], params.get("c_proj.bias"))
        """,
    ),
    V(
        "block",
        "mlp",
        "weights-not-transposed",
        "as nn.Linear stores them, [out, in]",
        """
        def mlp(x, params):
            hidden = gelu(x @ params["c_fc.weight"] + params["c_fc.bias"])
            return hidden @ params["c_proj.weight"] + params["c_proj.bias"]
        """,
    ),
    _block_variant(
        "transformer_block",
        "post-ln",
        "GPT-2 is pre-LN",
        _TB,
        """
        attn = self_attention(x, _under(params, "attn."), n_head, mask)
        x = layer_norm(x + attn, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + mlp(x, _under(params, "mlp."))
        return layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-attention-residual",
        "the attention's output is added to its input",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = self_attention(h, _under(params, "attn."), n_head, mask)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return x + mlp(h, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-mlp-residual",
        "the MLP's output is added to its input",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, _under(params, "attn."), n_head, mask)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return mlp(h, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "parallel",
        "after the attention has written to it",
        _TB,
        """
        h1 = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        h2 = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        attn = self_attention(h1, _under(params, "attn."), n_head, mask)
        return x + attn + mlp(h2, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "ln-1-twice",
        "each with its own weight and bias",
        _TB,
        """
        w, b = params["ln_1.weight"], params.get("ln_1.bias")
        x = x + self_attention(layer_norm(x, w, b), _under(params, "attn."), n_head, mask)
        return x + mlp(layer_norm(x, w, b), _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "no-norm",
        "each part reads a normalised copy",
        _TB,
        """
        x = x + self_attention(x, _under(params, "attn."), n_head, mask)
        return x + mlp(x, _under(params, "mlp."))
        """,
    ),
    _block_variant(
        "transformer_block",
        "mask-dropped",
        "pass the block's mask on",
        _TB,
        """
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, _under(params, "attn."), n_head)
        h = layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias"))
        return x + mlp(h, _under(params, "mlp."))
        """,
    ),
    _gpt(
        "no-positions",
        "add the position vectors",
        '    x = add_positions(x, params["transformer.wpe.weight"])\n',
        "",
    ),
    _gpt(
        "no-final-norm",
        "the final layer norm",
        "    x = layer_norm(x, ",
        "    _ = layer_norm(x, ",
    ),
    _gpt(
        "lm-head-required",
        "GPT-2 ties the head to the token table",
        'params.get("lm_head.weight", params["transformer.wte.weight"])',
        'params["lm_head.weight"]',
    ),
    _gpt(
        "string-order",
        "as numbers",
        '{int(k.split(".")[2]) for',
        '{k.split(".")[2] for',
    ),
    _gpt(
        "head-ignored",
        "the token table is only the fallback",
        'params.get("lm_head.weight", params["transformer.wte.weight"])',
        'params["transformer.wte.weight"]',
    ),
    _gpt(
        "no-causal-mask",
        "every block attends causally",
        "    mask = causal_mask(ids.shape[1])\n",
        "    mask = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool)\n",
    ),
]

RIGHT += [
    _block_variant(
        "layer_norm",
        "var-unbiased-false",
        None,
        _LN,
        """
        mean = x.mean(dim=-1, keepdim=True)
        var = torch.var(x, dim=-1, keepdim=True, unbiased=False)
        out = (x - mean) * torch.rsqrt(var + eps) * weight
        return out + bias if bias is not None else out
        """,
    ),
    _block_variant(
        "layer_norm",
        "mean-of-squares",
        None,
        _LN,
        """
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean
        out = weight * (x - mean) / (var + eps) ** 0.5
        if bias is not None:
            out = out + bias
        return out
        """,
    ),
    V(
        "block",
        "gelu",
        "x-times-x-times-x",
        None,
        """
        def gelu(x):
            c = (2 / math.pi) ** 0.5
            return x * 0.5 * (1 + torch.tanh(c * (x + 0.044715 * x * x * x)))
        """,
    ),
    V(
        "block",
        "gelu",
        "pow",
        None,
        """
        def gelu(x):
            inner = (2.0 / torch.pi) ** 0.5 * (x + 0.044715 * torch.pow(x, 3))
            return 0.5 * x * (1 + inner.tanh())
        """,
    ),
    V(
        "block",
        "split_heads",
        "view-transpose",
        None,
        """
        def split_heads(x, n_head):
            B, T, C = x.size()
            if C % n_head != 0:
                raise ValueError(f"cannot split C={C} into n_head={n_head} heads")
            return x.view(B, T, n_head, C // n_head).transpose(1, 2)
        """,
    ),
    V(
        "block",
        "split_heads",
        "unflatten-permute",
        None,
        """
        def split_heads(x, n_head):
            C = x.shape[-1]
            if C % n_head:
                raise ValueError(f"{C} channels, {n_head} heads: not divisible")
            return x.unflatten(-1, (n_head, C // n_head)).permute(0, 2, 1, 3)
        """,
    ),
    V(
        "block",
        "merge_heads",
        "permute-flatten",
        None,
        """
        def merge_heads(y):
            return y.permute(0, 2, 1, 3).flatten(2)
        """,
    ),
    _block_variant(
        "self_attention",
        "chunk-and-matmul",
        None,
        _SA,
        """
        def linear(h, name):
            out = h @ params[name + ".weight"].T
            return out + params[name + ".bias"] if name + ".bias" in params else out
        q, k, v = linear(x, "c_attn").chunk(3, dim=-1)
        T = x.shape[1]
        m = mask if mask is not None else torch.tril(torch.ones(T, T, dtype=torch.bool))
        heads = attention(split_heads(q, n_head), split_heads(k, n_head), split_heads(v, n_head), m)
        return linear(merge_heads(heads), "c_proj")
        """,
    ),
    V(
        "block",
        "mlp",
        "matmul",
        None,
        """
        def mlp(x, params):
            h = x @ params["c_fc.weight"].t()
            if "c_fc.bias" in params:
                h = h + params["c_fc.bias"]
            h = gelu(h) @ params["c_proj.weight"].t()
            return h + params["c_proj.bias"] if "c_proj.bias" in params else h
        """,
    ),
    _block_variant(
        "transformer_block",
        "own-prefix-split",
        None,
        _TB,
        """
        attn = {k[len("attn."):]: v for k, v in params.items() if k.startswith("attn.")}
        ffn = {k[len("mlp."):]: v for k, v in params.items() if k.startswith("mlp.")}
        h = layer_norm(x, params["ln_1.weight"], params.get("ln_1.bias"))
        x = x + self_attention(h, attn, n_head, mask)
        return x + mlp(layer_norm(x, params["ln_2.weight"], params.get("ln_2.bias")), ffn)
        """,
    ),
    _block_variant(
        "gpt_logits",
        "embedding-and-while",
        None,
        _GPT,
        """
        wte = params["transformer.wte.weight"]
        x = add_positions(F.embedding(ids, wte), params["transformer.wpe.weight"])
        mask = causal_mask(ids.shape[-1]).to(ids.device)
        n = 0
        while f"transformer.h.{n}.ln_1.weight" in params:
            x = transformer_block(x, _under(params, f"transformer.h.{n}."), n_head, mask)
            n += 1
        x = layer_norm(x, params["transformer.ln_f.weight"], params.get("transformer.ln_f.bias"))
        head = params["lm_head.weight"] if "lm_head.weight" in params else wte
        return x @ head.T
        """,
    ),
]
