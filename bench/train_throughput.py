"""Training throughput of the reference GPT: tokens/s, ms/step, peak memory, page faults.

    python bench/train_throughput.py                      # every config, random tokens
    python bench/train_throughput.py --corpus ../shared/data/time-machine.txt
    python bench/train_throughput.py --configs course-tiny course-tiny-plain --steps 10
    python bench/train_throughput.py --configs course-tiny course-tiny-all-lessons

Each config runs in its own process, so peak memory and page faults are its own.
"course-tiny-plain" is the same model trained the plain way (full [B, T, V] logits, then
F.cross_entropy): the baseline that the chunked output-layer loss is measured against.
"course-tiny-all-lessons" is the path of ``--all-lessons`` with GPT-2's vocabulary: the lessons'
attention, loss, block (layer norm, GELU, heads, the whole forward pass) and AdamW (through
gpt.optim.LessonAdamW), all from solutions/; the "course-tiny-lesson-*" configs swap one part
at a time, to show where the difference goes. "course-tiny-all-lessons-v1024" is what
``--all-lessons`` really trains: the same, with a vocabulary of 1,024 merges of its own (the
output layer is then 50 times smaller, so its tokens/s are not the same work as the others').
Nothing else differs: same parameters, same data, same optimizer settings, float32.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TINY = dict(n_layer=4, n_head=4, n_embd=128, block_size=256)
LESSON_BLOCK = {"attention": "lesson", "block": "lesson"}
ALL_LESSONS = {"attention": "lesson", "loss": "lesson", "block": "lesson", "optimizer": "lesson"}
CONFIGS = {
    # name: (model dims, batch size, options: plain loss, the lesson parts, vocabulary size)
    "course-tiny": (TINY, 8, {}),
    "course-tiny-plain": (TINY, 8, {"plain": True}),
    "course-tiny-lesson-attention": (TINY, 8, {"attention": "lesson"}),
    "course-tiny-lesson-loss": (TINY, 8, {"loss": "lesson"}),
    "course-tiny-lesson-block": (TINY, 8, LESSON_BLOCK),
    "course-tiny-lesson-optimizer": (TINY, 8, {"optimizer": "lesson"}),
    "course-tiny-all-lessons": (TINY, 8, ALL_LESSONS),
    "course-tiny-all-lessons-v1024": (TINY, 8, {**ALL_LESSONS, "vocab_size": 1024}),
    "default-run": (dict(TINY, block_size=128), 16, {}),
}


def measure(name: str, steps: int, corpus: str | None) -> dict:
    sys.path.insert(0, str(ROOT))
    import torch

    from gpt.data import tokenize
    from gpt.model import GPT, GPTConfig
    from gpt.optim import LessonAdamW
    from solutions import training  # the reference lessons

    dims, batch_size, options = CONFIGS[name]
    V = options.get("vocab_size", 50257)
    parts = {key: options[key] for key in ("attention", "loss", "block") if key in options}
    torch.manual_seed(0)
    model = GPT(GPTConfig(**dims, vocab_size=V), **parts)
    # plain: train_step computes F.cross_entropy(model(x), y) from the full logits
    model.fused_loss = not options.get("plain", False)
    if options.get("optimizer") == "lesson":
        optimizer = LessonAdamW(model.parameters(), training.adamw_step, lr=1e-4)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    T = dims["block_size"]
    if corpus:
        ids = tokenize(Path(corpus).read_text(encoding="utf-8")).clamp(max=V - 1)
        starts = torch.randint(0, len(ids) - T - 1, (steps + 2, batch_size))
        batches = [
            (
                torch.stack([ids[s : s + T] for s in row]),
                torch.stack([ids[s + 1 : s + T + 1] for s in row]),
            )
            for row in starts
        ]
    else:
        batches = [
            (torch.randint(0, V, (batch_size, T)), torch.randint(0, V, (batch_size, T)))
            for _ in range(steps + 2)
        ]
    for batch in batches[:2]:  # warm-up: allocator, thread pool, first-touch of weights
        training.train_step(model, [batch], optimizer)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    began = time.perf_counter()
    for batch in batches[2:]:
        training.train_step(model, [batch], optimizer)
    seconds = time.perf_counter() - began
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {
        "config": name,
        "threads": torch.get_num_threads(),
        "tokens_per_s": steps * batch_size * T / seconds,
        "ms_per_step": 1000 * seconds / steps,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "page_faults_per_step": faults / steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--corpus", help="a UTF-8 text file to take the batches from")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.steps, args.corpus)))
        return
    print(f"{'config':<32}{'tokens/s':>10}{'ms/step':>10}{'peak MB':>10}{'faults/step':>13}")
    for name in args.configs:
        cmd = [sys.executable, __file__, "--child", name, "--steps", str(args.steps)]
        if args.corpus:
            cmd += ["--corpus", args.corpus]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"{name:<32}{r['tokens_per_s']:>10,.0f}{r['ms_per_step']:>10,.0f}"
            f"{r['peak_rss_mb']:>10,.0f}{r['page_faults_per_step']:>13,.0f}"
        )


if __name__ == "__main__":
    main()
