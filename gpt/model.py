"""A GPT-2-style language model in plain PyTorch.

    ids [B, T] -> token vectors + position vectors -> n_layer x Block -> LayerNorm -> logits

Each Block is pre-LayerNorm: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)). Parameter names
follow GPT-2 (``transformer.wte``, ``transformer.h.0.attn.c_attn``, ``lm_head``) so that the
published weights load with ``generation.load_gpt2_state_dict``. The lesson functions of
the ``lessons`` it is given (``gpt.lessons``: the reference or the student's) are called where
they apply (embedding lookup, position vectors, masks, position ids), so a student's package
runs in the same model. Three parts have a fast library version and a lesson version:
attention (``attention="fused"``: ``F.scaled_dot_product_attention``; ``"lesson"``: the
lessons' ``attention.attention``), the training loss (``loss="fused"``: the chunked
``fused_loss``; ``"lesson"``: full logits and the lessons' ``objective.lm_loss``) and the
blocks (``block="fused"``: the ``nn`` modules below; ``"lesson"``: the lessons'
``block.transformer_block`` and ``block.layer_norm`` on this model's own weights, and
``block.gpt_logits`` for the whole forward pass where it applies). The lesson block has no
dropout, so ``block="lesson"`` trains without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fused_loss import linear_cross_entropy
from .lessons import Lessons, load

AttentionFn = Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 50257
    block_size: int = 256  # the longest context: rows of the position table
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")

    def to_dict(self) -> dict:
        return asdict(self)


PRESETS: dict[str, GPTConfig] = {
    # For tests and smoke runs: seconds per hundred steps, learns little.
    "micro": GPTConfig(block_size=64, n_layer=2, n_head=2, n_embd=32),
    # CPU-friendly: trains on a laptop in minutes (the benchmark's "course-tiny").
    "tiny": GPTConfig(block_size=256, n_layer=4, n_head=4, n_embd=128),
    "small": GPTConfig(block_size=512, n_layer=6, n_head=6, n_embd=384),
    # OpenAI's published sizes.
    "gpt2": GPTConfig(block_size=1024, n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": GPTConfig(block_size=1024, n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": GPTConfig(block_size=1024, n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": GPTConfig(block_size=1024, n_layer=48, n_head=25, n_embd=1600),
}


def preset(name: str) -> GPTConfig:
    """The named configuration; ``ValueError`` listing the names for an unknown one."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}"
        ) from None


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention; each position sees itself and earlier positions only."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, attention_fn: AttentionFn | None = None
    ) -> Tensor:
        """x: [B, T, C]; mask: bool [B, 1, T, T] or [T, T] (True = may attend), None for causal.

        ``attention_fn`` (a lesson's attention) is always given a mask.
        """
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # [B, T, C] -> [B, n_head, T, head_dim]
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if attention_fn is not None:
            y = attention_fn(q, k, v, mask)
        else:
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=mask is None
            )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: C -> 4C -> GELU -> C."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """One pre-LayerNorm transformer block."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, attention_fn: AttentionFn | None = None
    ) -> Tensor:
        x = x + self.attn(self.ln_1(x), mask, attention_fn)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.ModuleDict):
    """``GPT.transformer``: the modules under nanoGPT's (and GPT-2's checkpoint) names.

    A ``ModuleDict`` whose entries are declared, so that ``transformer.wte`` has a type.
    """

    wte: nn.Embedding
    wpe: nn.Embedding
    drop: nn.Dropout
    h: nn.ModuleList
    ln_f: nn.LayerNorm


class GPT(nn.Module):
    """GPT-2: token and learned position embeddings, pre-LN blocks, tied output layer."""

    fused_loss = True  # forward(ids, targets=y) returns the loss itself (see training.py)

    def __init__(
        self,
        config: GPTConfig,
        lessons: Lessons | str | None = None,
        *,
        attention: str = "fused",
        loss: str = "fused",
        block: str = "fused",
    ) -> None:
        """``lessons``: whose lesson functions the model calls (default: the reference);
        ``attention``, ``loss`` and ``block``: "fused" (library kernels and modules) or
        "lesson" (the lessons'). The lesson block calls the lessons' attention itself, so it
        needs ``attention="lesson"``."""
        super().__init__()
        if any(part not in ("fused", "lesson") for part in (attention, loss, block)):
            raise ValueError("attention, loss and block must each be 'fused' or 'lesson'")
        if block == "lesson" and attention != "lesson":
            raise ValueError(
                "block='lesson' runs the lessons' self_attention, which calls the lessons' "
                "attention: pass attention='lesson' too"
            )
        self.config = config
        self.lessons = load(lessons)
        self.loss = loss
        self.block = block
        # None: PyTorch's fused attention. A plain attribute, so a test may swap it.
        self.attention_fn = self.lessons.attention.attention if attention == "lesson" else None
        self.transformer = Transformer(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Weight tying: reading a token's vector and scoring it as the next token share one
        # table; saves V x C parameters (38M of GPT-2's 124M).
        self.lm_head.weight = self.transformer.wte.weight
        self.apply(self._init_weights)
        # Residual projections add into the stream once per block and twice per layer; scale
        # their init by 1/sqrt(2 n_layer) so the stream's variance does not grow with depth.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self, exclude_positions: bool = False) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if exclude_positions else n

    def forward(
        self, ids: Tensor, targets: Tensor | None = None, doc_ids: Tensor | None = None
    ) -> Tensor:
        """Logits [B, T, V] for ids [B, T]; or, given targets [B, T], the mean loss.

        doc_ids [B, T] (from ``packing.pack``) restricts attention to each token's own
        document and restarts positions at every document start. With targets, the loss is
        cross-entropy with -100 ignored, computed in chunks (``fused_loss``) so the [B, T, V]
        logits are never materialised, or with ``loss="lesson"`` by the lessons' ``lm_loss``.
        """
        whole = targets is None or self.loss == "lesson"  # the head's logits are needed
        if self.block == "lesson" and doc_ids is None and whole:
            # The whole model is the lessons' own: embeddings, blocks, final norm and head.
            params = dict(self.named_parameters())  # the tied head is listed once, as wte
            logits = self.lessons.block.gpt_logits(ids, params, self.config.n_head)
            return logits if targets is None else self.lesson_loss(logits, ids, targets)
        embeddings, packing = self.lessons.embeddings, self.lessons.packing
        wte, wpe = self.transformer.wte.weight, self.transformer.wpe.weight
        x = embeddings.lookup(wte, ids)
        mask = None
        if doc_ids is None:
            x = embeddings.add_positions(x, wpe)
        else:
            x = x + embeddings.lookup(wpe, packing.position_ids(doc_ids))
            mask = packing.document_mask(doc_ids).unsqueeze(1)  # [B, 1, T, T]: every head
        if mask is None and self.attention_fn is not None:  # the lesson's attention wants one
            mask = self.lessons.attention.causal_mask(ids.shape[1]).to(ids.device)
        if self.block == "lesson":
            x = self.lesson_blocks(x, mask)
        else:
            x = self.transformer.drop(x)
            for block in self.transformer.h:
                x = block(x, mask, self.attention_fn)
            x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x)
        if self.loss == "fused":
            return linear_cross_entropy(x.flatten(0, 1), self.lm_head.weight, targets.flatten())
        return self.lesson_loss(self.lm_head(x), ids, targets)

    def lesson_blocks(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """The lessons' ``transformer_block`` for every block, then their ``layer_norm`` with
        ``ln_f``: x [B, T, C] -> [B, T, C], on this model's weights (``mask`` as for the
        lessons' attention)."""
        block = self.lessons.block
        for layer in self.transformer.h:
            params = dict(layer.named_parameters())  # ln_1.weight, attn.c_attn.weight, ...
            x = block.transformer_block(x, params, self.config.n_head, mask)
        ln_f = self.transformer.ln_f
        return block.layer_norm(x, ln_f.weight, ln_f.bias)

    def lesson_loss(self, logits: Tensor, ids: Tensor, targets: Tensor) -> Tensor:
        """The lessons' ``lm_loss`` of logits [B, T, V] against targets [B, T] (already shifted).

        lm_loss scores position t against token t + 1 of the row it is given and drops the
        last position. So it gets the row ``[ids[:, 0], targets...]`` (T + 1 tokens) and the
        logits with one more position at the end (zeros), which it drops: it then scores
        exactly logits[:, t] against targets[:, t], -100 ignored.
        """
        row = torch.cat([ids[:, :1], targets], dim=1)
        padded = torch.cat([logits, logits.new_zeros(logits[:, :1].shape)], dim=1)
        return self.lessons.objective.lm_loss(padded.float(), row)
