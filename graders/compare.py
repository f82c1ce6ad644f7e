"""Train with your code: your functions in the reference model, beside the reference.

    python -m graders.compare [--target exercises] [--steps 40] [--out runs/compare]

Every lesson function you have implemented replaces the reference's inside the model, the
data pipeline and the training loop; a function that is still a stub (its body only raises
NotImplementedError) falls back to the reference's and is listed as such. Both runs use the
same seed, data and settings, so with correct code the two loss curves coincide; the first
step where they part says where to look.

This runs your code in this process: it is a learning tool, not a grader.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import math
import sys
import textwrap
from pathlib import Path

from .manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
# Relative difference between the two losses above which the runs count as diverged.
TOLERANCE = 1e-4


def is_stub(obj: object) -> bool:
    """True when every function body of ``obj`` is just ``raise NotImplementedError(...)``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    bodies = [node.body for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]

    def raises_only(body: list[ast.stmt]) -> bool:
        code = [
            s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        return (
            len(code) == 1
            and isinstance(code[0], ast.Raise)
            and "NotImplementedError" in ast.unparse(code[0])
        )

    return bool(bodies) and all(raises_only(body) for body in bodies)


def plug_in(package: str) -> tuple[list[str], list[str]]:
    """Fill the stubs of ``package`` with the reference's; returns (yours, fallbacks)."""
    yours, fallbacks = [], []
    for lesson in load_manifest().lessons:
        module = lesson.module
        student = importlib.import_module(f"{package}.{module}")
        reference = importlib.import_module(f"solutions.{module}")
        for name in lesson.functions:
            if is_stub(getattr(student, name)):
                setattr(student, name, getattr(reference, name))
                fallbacks.append(f"{module}.{name}")
            else:
                yours.append(f"{module}.{name}")
    return yours, fallbacks


def first_divergence(reference: list[float], yours: list[float]) -> int | None:
    for step, (a, b) in enumerate(zip(reference, yours, strict=False)):
        if not math.isfinite(b) or abs(a - b) > TOLERANCE * max(abs(a), 1e-8):
            return step
    return None


def losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def plot(reference: list[float], yours: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solutions.checkpoint import atomic_write

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(reference, label="reference", lw=2, alpha=0.6)
    ax.plot(yours, "--", label="your code", lw=1.5)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats)")
    ax.grid(alpha=0.3)
    ax.legend()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"))
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.compare", description=__doc__)
    parser.add_argument("--target", default="exercises", help="your package (default: exercises)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--preset", default="micro")
    parser.add_argument("--out", default="runs/compare")
    parser.add_argument("--corpus", default="course", help="as for solutions.train")
    args = parser.parse_args(argv)
    target = Path(args.target).resolve()
    if not (target / "training.py").is_file():
        print(
            f"error: {target} holds no exercise modules (training.py is missing); "
            "pass --target DIR, the folder of your package",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(target.parent))
    sys.path.insert(0, str(ROOT))
    yours, fallbacks = plug_in(target.name)
    student_train = importlib.import_module(f"{target.name}.train")
    from solutions import train as reference_train

    out = Path(args.out)
    base = dict(
        preset=args.preset,
        corpus=args.corpus,
        steps=args.steps,
        warmup_steps=max(1, args.steps // 10),
        context_length=64,
        stride=64,
        batch_size=8,
        eval_every=args.steps,
        checkpoint_every=args.steps,
        sample_tokens=20,
        dropout=0.0,
    )
    print(f"Your functions ({len(yours)}): {', '.join(yours) or 'none yet'}")
    print(f"Reference fallbacks ({len(fallbacks)}): {', '.join(fallbacks) or 'none'}")
    reference_train.run(
        reference_train.TrainConfig(**base, out=str(out / "reference")), fresh=True, quiet=True
    )
    attention = "lesson" if "attention.attention" in yours else "fused"
    config = student_train.TrainConfig(**base, attention=attention, out=str(out / "yours"))
    try:
        student_train.run(config, fresh=True, quiet=True)
    except Exception as error:  # the student's code failed: say where, not a traceback
        print(f"Your run stopped with {type(error).__name__}: {error}")
    ref = losses(out / "reference")
    mine = losses(out / "yours") if (out / "yours" / "metrics.jsonl").exists() else []
    print(f"\n{'step':>5} {'reference':>10} {'yours':>10} {'difference':>11}")
    for step, a in enumerate(ref):
        b = mine[step] if step < len(mine) else float("nan")
        print(f"{step:>5} {a:>10.4f} {b:>10.4f} {b - a:>+11.2e}")
    plot(ref, mine, out / "compare.png")
    diverged = first_divergence(ref, mine) if len(mine) == len(ref) else len(mine)
    if diverged is None:
        print(f"\nThe curves agree at every step (within {TOLERANCE:.0e} relative).")
    else:
        print(
            f"\nThe curves first differ at step {diverged}: check the functions above that "
            "are yours, starting with those that step uses."
        )
    print(f"Plot: {out / 'compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
