"""Training throughput of the reference GPT: tokens/s, ms/step, peak memory, page faults.

    python bench/train_throughput.py                      # every config, random tokens
    python bench/train_throughput.py --corpus ../shared/data/time-machine.txt
    python bench/train_throughput.py --configs course-tiny course-tiny-plain --steps 10
    python bench/train_throughput.py --configs course-tiny course-tiny-all-lessons
    python bench/train_throughput.py --configs course-tiny --compile --nanogpt PATH/model.py
    python bench/train_throughput.py --device cuda       # GPT-2 small on the GPU, then DDP

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

MFU (model FLOPs utilisation) is the model's FLOPs per second (6 per parameter per token, the
tied output layer counted once, plus attention's 12 x layers x width x context) over the peak
this machine reaches, measured in the same run: a 2,048-square ``torch.mm`` in float32 on the
threads in use, before and after the configs, the higher kept (absolute tokens/s move
between machines; the ratio to the measured peak is the measure). ``--compile`` adds a row
per config trained through ``torch.compile``; ``--nanogpt PATH`` adds nanoGPT's ``model.py`` (a
path on disk, never downloaded) built on course-tiny's shape and trained on the same batches.

``--device cuda`` runs GPT-2 small's shape (12 layers, 768 wide, context 1,024) in bfloat16
autocast, compiled, with fused AdamW and PyTorch's fused attention, against the GPU's dense
bfloat16 peak (looked up for the GPUs in PEAK_BF16, measured otherwise), then the same under
``torchrun`` with DistributedDataParallel on every visible GPU. Where no GPU is visible it says
so and runs the same code on the CPU at the micro shape, so the path is exercised anywhere.
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
    # what `nox -s train` trains: gpt.train's defaults (context 128, batch 8, dropout 0.1)
    "default-run": (dict(TINY, block_size=128, dropout=0.1), 8, {}),
}


TINY_DENSE_PEAK_SIDE = 2048  # the matrix side of the CPU peak's torch.mm
GPU_SHAPE = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024)
CPU_FALLBACK_SHAPE = dict(n_layer=2, n_head=2, n_embd=32, block_size=64)
# Dense bfloat16 tensor-core peaks from the makers' data sheets, TFLOP/s (no sparsity).
PEAK_BF16 = {
    "H100": 989.0,
    "H200": 989.0,
    "GH200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
}


def model_flops_per_token(model, n_layer: int, n_embd: int, context: int) -> float:
    """6 FLOPs per parameter per token (forward and backward; the tied output layer is counted
    once, since it is one matrix multiply), plus attention's scores and weighted sum."""
    return 6 * model.num_parameters(exclude_positions=True) + 12 * n_layer * n_embd * context


def measured_peak(device: str, dtype, side: int) -> float:
    """FLOP/s of a ``side``-square matrix multiply in ``dtype`` on ``device``, best of 5."""
    import torch

    a = torch.randn(side, side, device=device, dtype=dtype)
    b = torch.randn(side, side, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(6):
        if device == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        torch.mm(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - began)
    return 2 * side**3 / best


def gpu_peak() -> tuple[float, str]:
    import torch

    name = torch.cuda.get_device_name()
    for key, tflops in sorted(PEAK_BF16.items(), key=lambda kv: -len(kv[0])):
        if key in name:
            return tflops * 1e12, f"{name}: data sheet, {tflops:.0f} TFLOP/s bf16"
    peak = measured_peak("cuda", torch.bfloat16, 8192)
    return peak, f"{name}: measured, {peak / 1e12:.0f} TFLOP/s bf16"


def _batches(V: int, batch_size: int, T: int, n: int, corpus: str | None) -> list:
    import torch

    from gpt.data import tokenize

    if not corpus:
        return [
            (torch.randint(0, V, (batch_size, T)), torch.randint(0, V, (batch_size, T)))
            for _ in range(n)
        ]
    ids = tokenize(Path(corpus).read_text(encoding="utf-8")).clamp(max=V - 1)
    starts = torch.randint(0, len(ids) - T - 1, (n, batch_size))
    return [
        (
            torch.stack([ids[s : s + T] for s in row]),
            torch.stack([ids[s + 1 : s + T + 1] for s in row]),
        )
        for row in starts
    ]


def _nanogpt(path: str, dims: dict, V: int):
    """nanoGPT's GPT from its ``model.py`` at ``path``, on the course's shape."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--nanogpt {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.GPTConfig(**dims, vocab_size=V, dropout=0.0, bias=True)
    return module.GPT(config)


def _timed(step, batches: list, device: str) -> float:
    """Seconds for the steps after two warm-up steps (allocator, threads, the compile)."""
    import torch

    for batch in batches[:2]:
        step(batch)
    if device == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    for batch in batches[2:]:
        step(batch)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - began


def measure(name: str, steps: int, corpus: str | None, compile_: bool, nanogpt: str | None) -> dict:
    sys.path.insert(0, str(ROOT))
    import torch

    from gpt.model import GPT, GPTConfig
    from gpt.optim import LessonAdamW
    from solutions import training  # the reference lessons

    dims, batch_size, options = CONFIGS.get(name, (TINY, 8, {}))
    V = options.get("vocab_size", 50257)
    parts = {key: options[key] for key in ("attention", "loss", "block") if key in options}
    torch.manual_seed(0)
    batches = _batches(V, batch_size, dims["block_size"], steps + 2, corpus)
    if name == "nanogpt":
        model = _nanogpt(nanogpt or "", dims, V)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model.num_parameters = lambda exclude_positions=True: model.get_num_params(
            non_embedding=exclude_positions
        )

        def step(batch) -> None:
            _, loss = model(*batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    else:
        model = GPT(GPTConfig(**dims, vocab_size=V), **parts)
        # plain: train_step computes F.cross_entropy(model(x), y) from the full logits
        model.fused_loss = not options.get("plain", False)
        if options.get("optimizer") == "lesson":
            optimizer = LessonAdamW(model.parameters(), training.adamw_step, lr=1e-4)
        else:  # fused, as gpt.train makes it on a CPU too
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

        def step(batch) -> None:
            training.train_step(model, [batch], optimizer)

    if compile_:  # what gpt.train compiles: on a CPU the GPT's blocks, nanoGPT whole
        from gpt import compiled

        compiled.compile_now(model, torch.device("cpu"))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    seconds = _timed(step, batches, "cpu")
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    tokens_per_s = steps * batch_size * dims["block_size"] / seconds
    flops = model_flops_per_token(model, dims["n_layer"], dims["n_embd"], dims["block_size"])
    return {
        "config": name + ("+compile" if compile_ else ""),
        "threads": torch.get_num_threads(),
        "tokens_per_s": tokens_per_s,
        "ms_per_step": 1000 * seconds / steps,
        "model_flops_per_s": tokens_per_s * flops,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "page_faults_per_step": faults / steps,
    }


def measure_gpu(steps: int, batch_size: int, fallback: bool) -> dict:
    """GPT-2 small in bf16 on the GPU (or, as ``fallback``, the micro shape on the CPU); under
    torchrun, each process trains its own batches with DistributedDataParallel."""
    sys.path.insert(0, str(ROOT))
    import torch

    from gpt import compiled, distributed
    from gpt.model import GPT, GPTConfig

    world = distributed.World.from_env()
    device = torch.device("cpu" if fallback else f"cuda:{world.local_rank}")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
    dims = CPU_FALLBACK_SHAPE if fallback else GPU_SHAPE
    with distributed.process_group(world, device):
        torch.manual_seed(world.rank)
        model = GPT(GPTConfig(**dims, vocab_size=50257)).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
        note = compiled.compile_model(model, "auto", device)
        step_model = model
        if world.size > 1:
            step_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
        batches = [
            tuple(t.to(device) for t in batch)
            for batch in _batches(50257, batch_size, dims["block_size"], steps + 2, None)
        ]
        amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

        def step(batch) -> None:
            with amp:
                loss = step_model(batch[0], targets=batch[1])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        seconds = _timed(step, batches, device.type)
        tokens_per_s = world.size * steps * batch_size * dims["block_size"] / seconds
        flops = model_flops_per_token(model, dims["n_layer"], dims["n_embd"], dims["block_size"])
        if device.type == "cuda":
            peak, peak_from = gpu_peak()
        else:
            peak = measured_peak("cpu", torch.float32, 512)
            peak_from = "CPU fallback: measured float32"
        return {
            "processes": world.size,
            "rank": world.rank,
            "device": str(device),
            "compiled": compiled.is_compiled(model),
            "compile_note": note,
            "tokens_per_s": tokens_per_s,
            "ms_per_step": 1000 * seconds / steps,
            "mfu": tokens_per_s * flops / (peak * world.size),
            "peak_from": peak_from,
        }


def _child(args: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=False, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_gpu(steps: int, batch_size: int) -> None:
    import torch

    fallback = not torch.cuda.is_available()
    gpus = 0 if fallback else torch.cuda.device_count()
    if fallback:
        print("no CUDA GPU is visible here: running the GPU benchmark's code on the CPU at the")
        print("micro shape instead (its numbers say nothing about a GPU)")
    common = ["--steps", str(steps), "--batch-size", str(batch_size)]
    flag = ["--cpu-fallback"] if fallback else []
    single = _child(["--child-gpu", *common, *flag])
    print(f"{'run':<28}{'tokens/s':>12}{'ms/step':>10}{'MFU':>7}  peak")
    line = "{:<28}{:>12,.0f}{:>10,.1f}{:>7.2f}  {}"
    one = f"1 process ({single['device']})"
    print(
        line.format(
            one, single["tokens_per_s"], single["ms_per_step"], single["mfu"], single["peak_from"]
        )
    )
    if single["compile_note"]:
        print("  " + single["compile_note"])
    processes = max(gpus, 1)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    torchrun += [f"--nproc_per_node={processes}", __file__, "--child-gpu", *common, *flag]
    done = subprocess.run(torchrun, check=False, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the DDP run failed:\n{done.stderr.strip()[-2000:]}")
    ddp = next(r for r in map(json.loads, done.stdout.strip().splitlines()) if r["rank"] == 0)
    name = f"DDP, {processes} process{'es' if processes > 1 else ''}"
    print(line.format(name, ddp["tokens_per_s"], ddp["ms_per_step"], ddp["mfu"], ddp["peak_from"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--corpus", help="a UTF-8 text file to take the batches from")
    parser.add_argument("--compile", action="store_true", help="add a torch.compile row per config")
    parser.add_argument("--nanogpt", metavar="PATH", help="nanoGPT's model.py, to compare with")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch-size", type=int, default=16, help="with --device cuda")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-gpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpu-fallback", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peak", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1")
    if args.nanogpt and not Path(args.nanogpt).is_file():
        parser.error(
            f"--nanogpt {args.nanogpt}: no such file (give the path of nanoGPT's model.py)"
        )
    if args.child_gpu:
        result = measure_gpu(args.steps, args.batch_size, args.cpu_fallback)
        if result["rank"] == 0:
            print(json.dumps(result))
        return
    if args.peak:
        import torch

        side = TINY_DENSE_PEAK_SIDE
        print(json.dumps({"flops": measured_peak("cpu", torch.float32, side)}))
        return
    if args.child:
        print(json.dumps(measure(args.child, args.steps, args.corpus, args.compile, args.nanogpt)))
        return
    if args.device == "cuda":
        run_gpu(args.steps, args.batch_size)
        return
    runs = [(name, False) for name in args.configs]
    if args.nanogpt:
        runs.append(("nanogpt", False))
    if args.compile:
        runs += [(name, True) for name, _ in list(runs)]
    # The peak is measured before and after the configs and the higher one kept: a busy moment
    # during one measurement lowers it, and a low peak would flatter every MFU below.
    before = _child(["--peak"])["flops"]
    results = []
    for name, compile_ in runs:
        cmd = ["--child", name, "--steps", str(args.steps)]
        cmd += ["--corpus", args.corpus] if args.corpus else []
        cmd += ["--compile"] if compile_ else []
        cmd += ["--nanogpt", args.nanogpt] if args.nanogpt else []
        results.append(_child(cmd))
    after = _child(["--peak"])["flops"]
    peak = max(before, after)
    print(
        f"float32 peak: {peak / 1e9:,.0f} GFLOP/s (a {TINY_DENSE_PEAK_SIDE}-square torch.mm; "
        f"{before / 1e9:,.0f} before the configs, {after / 1e9:,.0f} after)"
    )
    print(
        f"{'config':<40}{'tokens/s':>10}{'ms/step':>10}{'MFU':>6}{'peak MB':>10}{'faults/step':>13}"
    )
    for r in results:
        print(
            f"{r['config']:<40}{r['tokens_per_s']:>10,.0f}{r['ms_per_step']:>10,.0f}"
            f"{r['model_flops_per_s'] / peak:>6.2f}{r['peak_rss_mb']:>10,.0f}"
            f"{r['page_faults_per_step']:>13,.0f}"
        )


if __name__ == "__main__":
    main()
