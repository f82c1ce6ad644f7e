"""Generate text from the command line: ``python -m gpt.generate "PROMPT"``.

The model is GPT-2 from the Hugging Face Hub (``--model gpt2``, the default, or
``gpt2-medium``, ``gpt2-large``, ``gpt2-xl``, or any ``owner/name`` repository), a local
folder in the Hub's layout (config.json + model.safetensors), or a course run written by
``python -m gpt.train`` (``--model runs/default``: its ``checkpoint.pt``). The text is
encoded with GPT-2's tokenizer, or with the run's own merges where it trained with
``--tokenizer lesson`` (its ``vocab.tiktoken``), extended with the lessons'
``generation.generate`` (the reference's, or yours with ``--lessons exercises``) and printed.
With your lessons, every function you have not implemented yet falls back to the reference's,
as in ``gpt.compare``, and a line on standard error says which. Where standard error is not a
terminal, a plain line says every few seconds how many tokens are done (``gpt.progress``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from core.cli import Parser

from . import checkpoint, hub
from .lessons import Lessons, LessonsError, fill_in, load
from .model import GPT, GPTConfig
from .progress import Progress
from .tokenizer import VOCAB_FILE, Encoding, LessonTokenizer, VocabularyError, load_ranks
from .vocab import EOT_ID, VOCAB_SIZE, VocabularyNotFound, gpt2_encoding

CHECKPOINT = "checkpoint.pt"  # what gpt.train writes into its --out folder


class UsageError(ValueError):
    """A bad option or input, reported as one line."""


def load_model(
    spec: str, device: torch.device | str = "cpu", lessons: Lessons | str | None = None
) -> GPT:
    """The model a ``--model`` value names, in eval mode with dropout off.

    A folder holding ``checkpoint.pt``, or a ``.pt`` file, is a course run; anything else
    goes to ``hub.from_pretrained`` (a GPT-2 name, a Hub repository, a Hub-layout folder).
    """
    path = Path(spec).expanduser()
    if path.is_dir() and (path / CHECKPOINT).is_file():
        path = path / CHECKPOINT
    if path.is_file() and path.suffix == ".pt":
        state = checkpoint.load(path)
        try:
            config = GPTConfig(**{**state["model_config"], "dropout": 0.0})
            model = GPT(config, lessons)
            model.load_state_dict(state["model"])
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise checkpoint.CheckpointError(
                f"checkpoint {path} does not hold a model of its model_config "
                f"({type(error).__name__}: {first[:160]})"
            ) from None
        return model.to(device).eval()
    return hub.from_pretrained(spec, device=device, lessons=lessons)


def run_encoding(spec: str, lessons: Lessons | str | None = None) -> Encoding | None:
    """The merges a training run learned (``--tokenizer lesson``: ``vocab.tiktoken`` beside
    its checkpoint), encoded with the lessons' ``split_pieces`` and ``bpe_merge``; None for
    a model with GPT-2's vocabulary."""
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".pt":  # a run's checkpoint.pt
        path = path.parent
    if not (path.is_dir() and (path / VOCAB_FILE).is_file()):
        return None
    folder = path
    return LessonTokenizer(load_ranks(folder / VOCAB_FILE), load(lessons).tokens)


def generate_text(
    model: GPT,
    prompt: str,
    *,
    max_new_tokens: int = 50,
    temperature: float = 0.8,
    top_k: int | None = 40,
    seed: int | None = 1337,
    encoding: Encoding | None = None,
    progress: bool = False,
) -> str:
    """The prompt and its continuation, as text (an empty prompt starts at <|endoftext|>).
    ``encoding``: the model's own tokenizer (``run_encoding``), else GPT-2's. ``progress``:
    show the tokens done on standard error (one model call a token)."""
    if encoding is None:
        encoding = gpt2_encoding()
        if model.config.vocab_size < VOCAB_SIZE:
            raise UsageError(
                f"the model has a vocabulary of {model.config.vocab_size} tokens, not GPT-2's "
                f"{VOCAB_SIZE}; its token ids cannot be GPT-2's"
            )
    elif not prompt:
        raise UsageError("a model with merges of its own has no <|endoftext|>: give a prompt")
    device = next(model.parameters()).device
    ids = encoding.encode_ordinary(prompt) or [EOT_ID]
    rng = torch.Generator(device=device)
    if seed is None:
        rng.seed()
    else:
        rng.manual_seed(seed)
    with Progress(
        "generating", max_new_tokens, unit="token", enabled=progress, stream=sys.stderr
    ) as shown:
        hook = model.register_forward_hook(lambda *_: shown.update())
        try:
            out = model.lessons.generation.generate(
                model,
                torch.tensor([ids], device=device),
                max_new_tokens,
                model.config.block_size,
                temperature,
                top_k,
                rng,
            )
        finally:
            hook.remove()
    new = out[0, len(ids) :].tolist()
    return prompt + encoding.decode(new)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        prog="python -m gpt.generate",
        description="Continue a prompt with GPT-2 (from the Hugging Face Hub or a local copy) "
        "or with a model trained by gpt.train.",
    )
    parser.add_argument("prompt", nargs="?", default="", help="the text to continue")
    parser.add_argument(
        "--model",
        default="gpt2",
        help="gpt2, gpt2-medium, gpt2-large, gpt2-xl, a Hub repository owner/name, a folder "
        "with config.json + model.safetensors, or a training run's folder such as "
        "runs/default (default: gpt2)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=50, help="(default: 50)")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 is greedy (default: 0.8)")
    parser.add_argument("--top-k", type=int, default=40, help="0 keeps every token (default: 40)")
    parser.add_argument("--seed", type=int, default=1337, help="(default: 1337)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default: cpu)")
    parser.add_argument(
        "--lessons",
        default="solutions",
        help="whose lessons to use: solutions (default), exercises (yours: the reference stands "
        "in for what is not done yet) or a folder",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.max_new_tokens < 0:
            raise UsageError("--max-new-tokens must be at least 0")
        if args.temperature < 0:
            raise UsageError("--temperature must be at least 0 (0 is greedy)")
        if args.top_k < 0:
            raise UsageError("--top-k must be at least 0 (0 keeps every token)")
        try:
            device = torch.device(args.device)
            torch.empty(0, device=device)
        except (RuntimeError, AssertionError) as error:
            raise UsageError(f"--device {args.device} is not available here ({error})") from None
        lessons = load(args.lessons)
        _, fallbacks = fill_in(lessons)
        if fallbacks:
            print(
                f"note: {args.lessons} does not implement {len(fallbacks)} function(s) yet; "
                f"the reference's stand in for them: {', '.join(fallbacks)}",
                file=sys.stderr,
                flush=True,
            )
        model = load_model(args.model, device, lessons)
        text = generate_text(
            model,
            args.prompt,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k or None,
            seed=args.seed,
            encoding=run_encoding(args.model, lessons),
            progress=True,
        )
    except (
        UsageError,
        hub.HubError,
        checkpoint.CheckpointError,
        VocabularyNotFound,
        VocabularyError,
        LessonsError,
    ) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NotImplementedError as error:
        print(
            f"error: {error}. Implement it, or generate with the reference lessons "
            "(--lessons solutions)",
            file=sys.stderr,
        )
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
