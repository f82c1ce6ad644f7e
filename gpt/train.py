"""Train a GPT from the command line: ``python -m gpt.train --help``.

The loop calls the lesson functions (``lr_at``, ``train_step``, ``evaluate``, ``generate``)
of ``--lessons`` (the reference ``solutions``, or ``exercises``: your own) and adds what a
real run needs: AdamW with decay groups, bf16 autocast where the device supports it, periodic
evaluation and samples, atomic checkpoints with exact resume, progress with tokens/s (a bar
on a terminal, a plain line every few seconds in a log: ``gpt.progress``),
metrics as JSON lines, a loss-curve PNG and a closing report.

Five parts have a library version (the default: fast) and a lesson version: ``--attention``,
``--loss``, ``--block`` (layer norm, the MLP, the heads, the residual blocks and the whole
forward pass), ``--optimizer`` (``gpt.optim.LessonAdamW`` around the lessons' ``adamw_step``)
and ``--tokenizer`` (merges learned on the corpus by the lessons' ``train_bpe``, saved as
OUT/vocab.tiktoken). ``--all-lessons`` sets all five to ``lesson``: every computation with
learned weights, the optimizer and the merges are then the lessons' own, and the run says
which parts are still library code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from core.atomic import atomic_write
from core.cli import Parser

from . import checkpoint, compiled, data, distributed
from .corpus import CorpusError, load_corpus
from .lessons import Lessons, LessonsError, load
from .model import GPT, PRESETS, preset
from .optim import LessonAdamW
from .progress import Progress
from .tokenizer import VOCAB_FILE, Encoding, VocabularyError, lesson_tokenizer
from .vocab import VocabularyNotFound, gpt2_encoding

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.jsonl"


class UsageError(ValueError):
    """A bad option or input, reported as one line."""


class Interrupted(Exception):
    """Ctrl-C stopped the run after a whole step, whose checkpoint is written."""

    def __init__(self, step: int) -> None:
        super().__init__(f"interrupted at step {step}; run the same command to resume")
        self.step = step


@contextlib.contextmanager
def interruptible() -> Iterator[Callable[[], bool]]:
    """Turn the first Ctrl-C (SIGINT) into a request, read by the returned function.

    The loop then finishes the step it is in and checkpoints it, so the resumed run is exact
    (stopping in the middle of a step would lose it and leave the random state past it). A
    second Ctrl-C raises KeyboardInterrupt at once, for a step that takes too long.
    """
    asked: list[bool] = []

    def request(signum: int, frame: object) -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(True)

    if threading.current_thread() is not threading.main_thread():  # signals: main thread only
        yield lambda: False
        return
    previous = signal.signal(signal.SIGINT, request)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "tiny"
    corpus: str = "course"
    steps: int = 400
    batch_size: int = 8
    context_length: int = 128
    stride: int = 64
    grad_accum: int = 1
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 40
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    dropout: float = 0.1
    val_fraction: float = 0.1
    eval_every: int = 100
    eval_batches: int = 8
    checkpoint_every: int = 100
    seed: int = 1337
    device: str = "auto"
    dtype: str = "auto"
    compile: str = "auto"  # or "on", "off": torch.compile the model (gpt/compiled.py)
    lessons: str = "solutions"  # or "exercises" (yours), or the folder of a lesson package
    attention: str = "fused"  # or "lesson": the lessons' own attention.attention
    loss: str = "fused"  # or "lesson": full logits and the lessons' objective.lm_loss
    block: str = "fused"  # or "lesson": the lessons' block module (needs --attention lesson)
    optimizer: str = "torch"  # or "lesson": gpt.optim.LessonAdamW, the lessons' adamw_step
    tokenizer: str = "gpt2"  # or "lesson": merges trained on the corpus with train_bpe
    vocab_size: int = 1024  # ranks --tokenizer lesson trains (the 256 bytes included)
    prompt: str = "A language model"
    sample_tokens: int = 60
    temperature: float = 0.8
    top_k: int = 40
    out: str = "runs/default"

    # Settings that may change between a run and its resumption without changing its result.
    RESUMABLE_CHANGES = (
        "steps",
        "eval_every",
        "checkpoint_every",
        "out",
        "device",
        "compile",
        "prompt",
        "sample_tokens",
        "temperature",
        "top_k",
        "lessons",
    )


OPTION_HELP = {
    "preset": f"model size: {', '.join(PRESETS)}",
    "corpus": "'course' (the course's own pages), 'time-machine' (downloaded once) or a text file",
    "steps": "optimizer steps in the whole run (a resumed run continues to this many)",
    "batch_size": "windows per micro-batch (under torchrun: the global batch)",
    "context_length": "tokens per window; at most the preset's positions",
    "stride": "distance between window starts; smaller than the context means overlap",
    "grad_accum": "micro-batches per optimizer step",
    "lr": "peak learning rate, reached after the warmup",
    "min_lr": "learning rate at the end of the cosine decay",
    "warmup_steps": "steps of linear warmup; must be less than --steps",
    "weight_decay": "AdamW decay of the weight matrices (biases and LayerNorm: none)",
    "max_grad_norm": "clip the gradient's total norm to this",
    "dropout": "dropout probability in the model",
    "val_fraction": "tail of the corpus held out for validation",
    "eval_every": "evaluate (and log validation loss) every this many steps",
    "eval_batches": "validation batches per evaluation",
    "checkpoint_every": "write OUT/checkpoint.pt every this many steps",
    "seed": "seed of the initial weights, data order and dropout",
    "device": "auto, cpu, cuda, cuda:N or mps",
    "dtype": "auto (bfloat16 autocast on GPUs that support it), float32 or bfloat16",
    "compile": "auto (compile on a CUDA GPU; on a CPU, a long run tries it and keeps the faster), "
    "on or off",
    "lessons": "whose lesson functions to train with: solutions (the reference), exercises "
    "(yours) or a package folder",
    "attention": "fused (PyTorch's kernel) or lesson (the lessons' own attention function)",
    "loss": "fused (chunked, never builds the full logits) or lesson (the lessons' lm_loss)",
    "block": "fused (torch.nn modules) or lesson (the lessons' layer_norm, mlp, "
    "transformer_block and gpt_logits; no dropout; needs --attention lesson)",
    "optimizer": "torch (torch.optim.AdamW) or lesson (the lessons' adamw_step)",
    "tokenizer": "gpt2 (GPT-2's merges, through tiktoken) or lesson (merges learned on the "
    "corpus by the lessons' train_bpe, saved as OUT/vocab.tiktoken)",
    "vocab_size": "with --tokenizer lesson: the number of ranks train_bpe learns",
    "prompt": "start of the sample generated at the end",
    "sample_tokens": "tokens to generate for the sample",
    "temperature": "sampling temperature of the sample (0: greedy)",
    "top_k": "sample among the k most likely tokens",
    "out": "folder of the run's files; an existing run there is resumed",
}


def parse_args(argv: list[str] | None) -> tuple[TrainConfig, bool]:
    defaults = TrainConfig()
    parser = Parser(
        prog="python -m gpt.train",
        description="Train a GPT-2-style model on a corpus; resumes from OUT/checkpoint.pt.",
    )
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        parser.add_argument(
            flag,
            type=type(default),
            default=default,
            metavar=field.name.upper(),
            help=f"{OPTION_HELP[field.name]} (default: {default})",
        )
    parser.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    parser.add_argument(
        "--all-lessons",
        action="store_true",
        help="the lessons' version of every part: --attention, --loss, --block, --optimizer "
        "and --tokenizer lesson",
    )
    args = vars(parser.parse_args(argv))
    fresh = args.pop("fresh")
    if args.pop("all_lessons"):
        args.update(dict.fromkeys(LESSON_PARTS, "lesson"))
    return TrainConfig(**args), fresh


# The parts with a library and a lesson version, and what the library version is.
LESSON_PARTS = {
    "tokenizer": "the tokenizer's merges (GPT-2's, through tiktoken)",
    "block": "layer norm, GELU, the heads and the linear layers (torch.nn modules)",
    "attention": "attention (F.scaled_dot_product_attention)",
    "loss": "the output layer and the loss (the chunked fused cross-entropy)",
    "optimizer": "the optimizer (torch.optim.AdamW)",
}


def library_parts(cfg: TrainConfig) -> list[str]:
    """The parts of a run that are library code rather than the lessons'.

    With ``--block lesson`` the output layer is the lessons' (``gpt_logits``) whenever the
    loss is too; with the fused loss it is part of the library's chunked loss.
    """
    return [what for part, what in LESSON_PARTS.items() if getattr(cfg, part) != "lesson"]


def validate(cfg: TrainConfig) -> None:
    try:
        block = preset(cfg.preset).block_size
    except ValueError as error:
        raise UsageError(str(error)) from None
    if cfg.context_length > block:
        raise UsageError(
            f"--context-length {cfg.context_length} is longer than the {cfg.preset!r} preset's "
            f"{block} positions; use --context-length {block} or less, or a larger preset"
        )
    positive = (
        "steps",
        "batch_size",
        "context_length",
        "stride",
        "grad_accum",
        "eval_every",
        "eval_batches",
        "checkpoint_every",
    )
    for name in positive:
        if getattr(cfg, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    bounded = {  # option -> (holds, what it must be)
        "lr": (cfg.lr > 0, "greater than 0"),
        "min_lr": (0 <= cfg.min_lr <= cfg.lr, f"at least 0 and at most --lr {cfg.lr}"),
        "weight_decay": (cfg.weight_decay >= 0, "at least 0"),
        "max_grad_norm": (cfg.max_grad_norm > 0, "greater than 0"),
        "dropout": (0 <= cfg.dropout < 1, "at least 0 and less than 1"),
        "val_fraction": (0 < cfg.val_fraction < 1, "greater than 0 and less than 1"),
        "sample_tokens": (cfg.sample_tokens >= 0, "at least 0"),
        "temperature": (cfg.temperature >= 0, "at least 0 (0: greedy)"),
        "top_k": (cfg.top_k >= 0, "at least 0"),
    }
    for name, (holds, requirement) in bounded.items():
        if not holds:
            flag = f"--{name.replace('_', '-')}"
            raise UsageError(f"{flag} {getattr(cfg, name)} must be {requirement}")
    if not 0 <= cfg.warmup_steps < cfg.steps:
        raise UsageError(
            f"--warmup-steps {cfg.warmup_steps} must be at least 0 and less than --steps "
            f"{cfg.steps}; for a short run pass a smaller --warmup-steps (0 is fine)"
        )
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder; pass a folder for the run's files")
    if cfg.attention not in ("fused", "lesson"):
        raise UsageError("--attention must be fused (PyTorch's kernel) or lesson (yours)")
    if cfg.loss not in ("fused", "lesson"):
        raise UsageError("--loss must be fused (chunked) or lesson (the lessons' lm_loss)")
    if cfg.block not in ("fused", "lesson"):
        raise UsageError("--block must be fused (torch.nn modules) or lesson (yours)")
    if cfg.block == "lesson" and cfg.attention != "lesson":
        raise UsageError(
            "--block lesson runs your self_attention, which calls your attention: pass "
            "--attention lesson too (or --all-lessons)"
        )
    if cfg.optimizer not in ("torch", "lesson"):
        raise UsageError("--optimizer must be torch (torch.optim.AdamW) or lesson (yours)")
    if cfg.tokenizer not in ("gpt2", "lesson"):
        raise UsageError("--tokenizer must be gpt2 (GPT-2's merges) or lesson (train_bpe's)")
    if cfg.tokenizer == "lesson" and cfg.vocab_size < 256:
        raise UsageError(
            f"--vocab-size {cfg.vocab_size} cannot hold the 256 single bytes; use 256 or more"
        )
    if cfg.dtype not in ("auto", "float32", "bfloat16"):
        raise UsageError("--dtype must be auto, float32 or bfloat16")
    if cfg.compile not in compiled.CHOICES:
        raise UsageError("--compile must be auto (where it pays), on or off")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError):
        raise UsageError(
            f"--device {name} is not available here; choose auto, cpu, cuda, cuda:N or mps"
        ) from None
    return device


def autocast_dtype(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """bf16 on GPUs that support it (no loss scaling needed: bf16 has float32's range)."""
    if cfg.dtype == "float32":
        return None
    if cfg.dtype == "bfloat16":
        return torch.bfloat16
    cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    return torch.bfloat16 if cuda_bf16 else None


def make_optimizer(
    model: nn.Module, cfg: TrainConfig, fused: bool, lessons: Lessons | None = None
) -> torch.optim.Optimizer:
    """AdamW; matrices decay, biases and LayerNorm gains don't (decay would pull them to 0).
    ``cfg.optimizer == "lesson"``: the same groups, stepped by the lessons' ``adamw_step``."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if cfg.optimizer == "lesson":
        return LessonAdamW(groups, load(lessons).training.adamw_step, lr=cfg.lr, betas=(0.9, 0.95))
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), fused=fused or None)


def make_tokenizer(
    cfg: TrainConfig, text: str, lessons: Lessons, reuse: bool, save: bool, quiet: bool
) -> Encoding:
    """GPT-2's tokenizer, or (``--tokenizer lesson``) merges learned on ``text`` by the
    lessons' ``train_bpe``: read from OUT/vocab.tiktoken when ``reuse`` (a resumed run), else
    trained now and saved there when ``save`` (the main process)."""
    if cfg.tokenizer != "lesson":
        return gpt2_encoding()
    if not quiet and not (reuse and (Path(cfg.out) / VOCAB_FILE).exists()):
        print(
            f"learning {cfg.vocab_size - 256} merges on {len(text):,} characters with "
            f"train_bpe of {lessons.package} (once: saved as {Path(cfg.out) / VOCAB_FILE})",
            flush=True,
        )
    try:
        return lesson_tokenizer(text, cfg.vocab_size, lessons.tokens, Path(cfg.out), reuse, save)
    except VocabularyError as error:
        raise UsageError(str(error)) from None


def read_metrics(path: Path, before_step: int) -> list[dict]:
    """Metrics already logged for steps before ``before_step`` (a torn last line is dropped)."""
    if not path.exists():
        return []
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("step", math.inf) < before_step:
            kept.append(record)
    return kept


def plot_losses(records: list[dict], path: Path, baseline: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["step"] for r in records if "loss" in r]
    ax.plot(steps, [r["loss"] for r in records if "loss" in r], label="train", lw=1)
    evals = [r for r in records if "eval_loss" in r]
    if evals:
        ax.plot(
            [r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", label="validation"
        )
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.grid(alpha=0.3)
    if baseline is not None:
        ax.axhline(baseline, color="grey", ls=":", label="unigram baseline")
    ax.legend()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"))
    plt.close(fig)


def sample_text(model: GPT, cfg: TrainConfig, device: torch.device, enc: Encoding) -> str:
    ids = torch.tensor([enc.encode_ordinary(cfg.prompt)], device=device)
    rng = torch.Generator(device=device).manual_seed(cfg.seed)
    with compiled.eager():  # each new length would compile again
        out = model.lessons.generation.generate(
            model, ids, cfg.sample_tokens, cfg.context_length, cfg.temperature, cfg.top_k, rng
        )
    return enc.decode(out[0].tolist())


def run(
    cfg: TrainConfig,
    fresh: bool = False,
    quiet: bool = False,
    lessons: Lessons | None = None,
    *,
    show_progress: bool | None = None,
    label: str = "training",
) -> dict:
    """Train (or resume) a run; returns the closing report as a dict.

    ``lessons`` overrides ``cfg.lessons`` with lessons already loaded (``gpt.compare``).
    ``quiet`` prints nothing; ``show_progress`` (default: not ``quiet``) shows the progress,
    as ``label: step 3/40, ...`` where the output is not a terminal (``gpt.progress``).

    Under ``torchrun --nproc_per_node N`` every process runs this (see ``distributed``): each
    trains on its shard of every global batch of ``batch_size`` windows; rank 0 alone
    evaluates, writes the files and returns the report, the other ranks return ``{}``.
    """
    validate(cfg)
    lessons = load(cfg.lessons) if lessons is None else lessons
    world = distributed.World.from_env()
    if cfg.batch_size % world.size:
        raise UsageError(
            f"--batch-size {cfg.batch_size} does not split evenly over {world.size} processes; "
            f"use a multiple of {world.size} (it is the global batch, shared by all processes)"
        )
    device = distributed.rank_device(world, pick_device(cfg.device))
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise UsageError(
            f"process {world.rank} has no GPU of its own (LOCAL_RANK {world.local_rank}, "
            f"{torch.cuda.device_count()} GPUs here); start fewer processes per node"
        )
    shown = not quiet if show_progress is None else show_progress
    with distributed.process_group(world, device):
        return _train(cfg, fresh, quiet, world, device, lessons, shown, label)


def _train(
    cfg: TrainConfig,
    fresh: bool,
    quiet: bool,
    world: distributed.World,
    device: torch.device,
    lessons: Lessons,
    show_progress: bool,
    label: str,
) -> dict:
    training = lessons.training
    out = Path(cfg.out)
    ckpt_path = out / CHECKPOINT
    torch.manual_seed(cfg.seed)

    text = load_corpus(cfg.corpus)
    resuming = ckpt_path.exists() and not fresh
    tokenizer = make_tokenizer(cfg, text, lessons, resuming, world.is_main, quiet)
    ids = data.tokenize(text, tokenizer)
    try:  # a corpus too small for the batch shape: the data module's message names the fix
        train_ids, val_ids = data.split(ids, cfg.val_fraction)
        stream = data.BatchStream(
            train_ids, cfg.batch_size, cfg.context_length, cfg.stride, cfg.seed, lessons
        )
        val_batches = data.eval_batches(
            val_ids, cfg.batch_size, cfg.context_length, cfg.eval_batches, lessons
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    val_batches = [(x.to(device), y.to(device)) for x, y in val_batches]

    model_config = dataclasses.replace(
        preset(cfg.preset), dropout=cfg.dropout, vocab_size=tokenizer.n_vocab
    )
    model = GPT(model_config, lessons, attention=cfg.attention, loss=cfg.loss, block=cfg.block).to(
        device
    )
    # PyTorch's fused AdamW: one pass over each parameter instead of a dozen (on this course's
    # CPU shapes a quarter of the time of the per-tensor loop; the same update within rounding).
    fused = device.type in ("cuda", "cpu")
    optimizer = make_optimizer(model, cfg, fused=fused, lessons=lessons)
    start = 0
    compile_note = compiled.compile_model(model, cfg.compile, device)
    if world.is_main and not quiet:
        print(describe_parts(cfg, lessons), flush=True)
        if compile_note:
            print(compile_note, flush=True)
    if world.rank:  # the same initial weights everywhere, but each rank its own dropout masks
        torch.manual_seed(cfg.seed + world.rank)
    if resuming:
        state = checkpoint.load(ckpt_path)
        check_resumable(state["train_config"], cfg, ckpt_path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng(state, world)
        start = state["step"]
        if start >= cfg.steps:
            raise UsageError(
                f"{out} already holds a finished run of {start} steps; pass a larger --steps "
                "to continue it, --fresh to start over, or another --out"
            )
    # What train_step trains: the model, or its DistributedDataParallel.
    step_model: nn.Module = model
    if world.size > 1:
        step_model = distributed.SyncOnLastMicroBatch(model, device)
    records = read_metrics(out / METRICS, start) if start and world.is_main else []
    if world.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")
        atomic_write(
            out / METRICS,
            lambda f: f.write("".join(json.dumps(r) + "\n" for r in records).encode()),
        )

    amp = autocast_dtype(cfg, device)
    # --compile auto on a CPU: the run's own step times decide (one process: every rank would
    # have to decide alike).
    trial = None
    if cfg.compile == "auto" and device.type == "cpu" and world.size == 1:
        trial = compiled.AutoTrial(model, device, cfg.steps - start)
    batches = stream.batches_from(start * cfg.grad_accum)
    step_tokens = cfg.batch_size * cfg.context_length * cfg.grad_accum
    schedule = dict(
        max_lr=cfg.lr, min_lr=cfg.min_lr, warmup_steps=cfg.warmup_steps, max_steps=cfg.steps
    )
    timed_tokens, timed_seconds = 0, 0.0
    progress = Progress(
        label, cfg.steps, unit="step", completed=start, enabled=show_progress and world.is_main
    )
    if start and world.is_main and not quiet:
        print(f"resuming from step {start} ({ckpt_path})", flush=True)
    with (
        interruptible() as asked_to_stop,
        progress,
        open(out / METRICS if world.is_main else os.devnull, "a") as metrics,
    ):
        for step in range(start, cfg.steps):
            began = time.perf_counter()
            lr = training.lr_at(step, **schedule)
            for group in optimizer.param_groups:
                group["lr"] = lr
            micro = [
                (x.to(device), y.to(device))
                for x, y in (world.shard(next(batches)) for _ in range(cfg.grad_accum))
            ]
            with autocast(device, amp), distributed.micro_batches(step_model, len(micro)):
                loss = step_or_eager(
                    functools.partial(
                        training.train_step, step_model, micro, optimizer, cfg.max_grad_norm
                    ),
                    model,
                    optimizer,
                    quiet=quiet or not world.is_main,
                )
            loss = distributed.mean(loss, world, device)  # the global batch's loss
            seconds = time.perf_counter() - began
            decided = trial.after_step(seconds) if trial is not None else None
            if decided and not quiet:
                print(decided, flush=True)
            timed_tokens, timed_seconds = timed_tokens + step_tokens, timed_seconds + seconds
            record = {"step": step, "lr": lr, "loss": loss, "tokens_per_s": step_tokens / seconds}
            last = step == cfg.steps - 1
            if world.is_main and ((step + 1) % cfg.eval_every == 0 or last):
                with autocast(device, amp), compiled.eager():
                    record["eval_loss"] = training.evaluate(model, val_batches)
                record["eval_perplexity"] = lessons.objective.perplexity(record["eval_loss"])
            records.append(record)
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            # Every rank stops after the same step, or the others would wait for it forever.
            stop = distributed.any_rank(asked_to_stop(), world, device) and not last
            if (step + 1) % cfg.checkpoint_every == 0 or last or stop:
                rngs = distributed.gather(torch.get_rng_state(), world)
                if world.is_main:
                    per_rank = rngs if world.size > 1 else None
                    save_checkpoint(ckpt_path, model, optimizer, cfg, step + 1, per_rank)
            progress.update(note=f"loss {loss:.3f}, {timed_tokens / timed_seconds:,.0f} tok/s")
            if stop:
                raise Interrupted(step + 1)

    if not world.is_main:
        return {}
    unigram = data.unigram_entropy(train_ids)
    plot_losses(records, out / "loss.png", baseline=unigram)
    evals = [r for r in records if "eval_loss" in r]
    train_tail = [r["loss"] for r in records[-10:]]
    return {
        "steps": cfg.steps,
        "train_loss": sum(train_tail) / len(train_tail),
        "train_loss_steps": len(train_tail),
        "val_loss": evals[-1]["eval_loss"],
        "val_perplexity": evals[-1]["eval_perplexity"],
        "unigram_entropy": unigram,
        "tokens_per_s": timed_tokens / timed_seconds if timed_seconds else float("nan"),
        "parameters": model.num_parameters(),
        "corpus_tokens": len(ids),
        "out": str(out),
        "sample": sample_text(model, cfg, device, tokenizer),
        "compiled": compiled.is_compiled(model),
        "library_parts": library_parts(cfg),
        "files": [CHECKPOINT, METRICS, "loss.png", "config.json"]
        + ([VOCAB_FILE] if cfg.tokenizer == "lesson" else []),
    }


def step_or_eager(
    step: Callable[[], float], model: nn.Module, optimizer: torch.optim.Optimizer, quiet: bool
) -> float:
    """``step()``; if the compiler fails on it, go eager, say so in one line and run it again.

    A compile failure stops a step before its optimizer update (the forward and backward graphs
    are compiled on the first forward), so the step is redone from its random state with the
    gradients cleared: the run is the eager run, step for step."""
    if not compiled.is_compiled(model):
        return step()
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        return step()
    except Exception as error:
        if not compiled.compile_failure(error):
            raise
        compiled.decompile(model)
        optimizer.zero_grad(set_to_none=True)
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        if not quiet:
            cause = (str(error).strip().splitlines() or [type(error).__name__])[0]
            print(f"training eager: torch.compile failed ({cause[:160]})", flush=True)
        return step()


def describe_parts(cfg: TrainConfig, lessons: Lessons) -> str:
    """One line: whose code the run trains with, and what is still library code."""
    library = library_parts(cfg)
    whose = f"lessons: {lessons.package}"
    if not library:
        return (
            f"{whose}; every part with learned weights, the optimizer and the merges are the "
            "lessons' own (autograd, gradient clipping and the batches' shuffling are PyTorch's)"
        )
    return f"{whose}; still library code: " + "; ".join(library)


def check_resumable(saved: dict, cfg: TrainConfig, path: Path) -> None:
    current = dataclasses.asdict(cfg)
    changed = [
        k
        for k, v in saved.items()
        if k not in TrainConfig.RESUMABLE_CHANGES and current.get(k) != v
    ]
    if changed:
        raise UsageError(
            f"{path} was trained with different settings ({', '.join(changed)}); "
            "pass the same settings to resume, another --out, or --fresh to start over"
        )


def save_checkpoint(
    path: Path,
    model: GPT,
    optimizer,
    cfg: TrainConfig,
    step: int,
    rng_per_rank: list[torch.Tensor] | None = None,
) -> None:
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "model_config": model.config.to_dict(),
        "train_config": dataclasses.asdict(cfg),
        "step": step,
        "rng": torch.get_rng_state(),
    }
    if torch.cuda.is_available():  # dropout on a GPU draws from the CUDA generator
        state["cuda_rng"] = torch.cuda.get_rng_state()
    if rng_per_rank is not None:  # a distributed run: every rank's dropout stream
        state["rng_per_rank"] = rng_per_rank
    checkpoint.save(path, state)


def restore_rng(state: dict, world: distributed.World) -> None:
    """Continue the random stream (dropout) where the checkpoint left it.

    A distributed checkpoint holds one state per rank; resumed with another number of
    processes, rank 0 takes the saved main state and the others keep their fresh seeds.
    """
    per_rank = state.get("rng_per_rank")
    if world.size > 1 and per_rank is not None and len(per_rank) == world.size:
        torch.set_rng_state(per_rank[world.rank])
    elif world.is_main:
        torch.set_rng_state(state["rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda_rng"])


def autocast(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def print_report(report: dict) -> None:
    print(
        "\n".join(
            [
                "",
                f"Trained {report['parameters'] / 1e6:.1f}M parameters for {report['steps']} steps "
                f"on {report['corpus_tokens']:,} tokens.",
                f"  train loss       {report['train_loss']:.3f} "
                f"(mean of the last {report['train_loss_steps']} steps)",
                f"  validation loss  {report['val_loss']:.3f}  "
                f"(perplexity {report['val_perplexity']:.1f})",
                f"  unigram baseline {report['unigram_entropy']:.3f}  "
                "(entropy of the corpus's token frequencies: a model that ignores context)",
                f"  throughput       {report['tokens_per_s']:,.0f} tokens/s",
                "  library code     "
                + ("; ".join(report["library_parts"]) or "none with learned weights"),
                f"  files            {report['out']}/ ({', '.join(report['files'])})",
                "Sample:",
                "  " + report["sample"].replace("\n", "\n  "),
            ]
        )
    )


def main(argv: list[str] | None = None) -> int:
    cfg, fresh = parse_args(argv)
    try:
        report = run(cfg, fresh=fresh)
    except Interrupted as stopped:
        print(stopped, file=sys.stderr)
        return 130  # the shell's code for a program stopped by Ctrl-C
    except KeyboardInterrupt:  # a second Ctrl-C, in the middle of a step
        print(
            "interrupted in the middle of a step; run the same command to resume from the "
            "last checkpoint",
            file=sys.stderr,
        )
        return 130
    except (
        UsageError,
        CorpusError,
        VocabularyNotFound,
        VocabularyError,
        LessonsError,
        checkpoint.CheckpointError,
    ) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NotImplementedError as error:
        print(
            f"error: {error}. Implement it, or train with the reference lessons "
            "(--lessons solutions)",
            file=sys.stderr,
        )
        return 2
    if report:  # under torchrun, rank 0 reports
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
