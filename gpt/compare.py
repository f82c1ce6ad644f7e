"""Train with your code: your functions in the course's GPT, beside the reference.

    python -m gpt.compare [--target exercises] [--steps 40] [--out runs/compare]

Both runs are the same command (``gpt.train``) with the same seed, data and settings; one
takes the reference lessons (``solutions``), the other yours, where every function you have
not implemented yet (its body only raises NotImplementedError) falls back to the reference's
and is listed as such. With correct code the two loss curves coincide; the first step where
they part says where to look.

Only what ran can agree: your functions are counted while your run trains, and the report
says of each whether it took part. Agreement covers only the inputs training gave them, not the
edge cases the graders try, so the report also names those of them whose checks failed in your
last grading (``--report``). When the curves part, each of your functions that took part is
run alone among the reference's, and those whose run parts too are named.

Training normally uses library kernels for attention and the loss; when your
``attention.attention`` is implemented both runs use the lesson attention, and when your
``objective.cross_entropy`` or ``objective.lm_loss`` is, both compute the loss from full logits
with the lessons' ``lm_loss`` (which calls ``cross_entropy``), so your versions are what your
run trains with. In the same way your ``training.adamw_step`` makes both runs step with the
lessons' AdamW (``--optimizer lesson``), your ``tokens.train_bpe`` makes both learn their merges
on the corpus (``--tokenizer lesson``: wrong merges give other token ids, so the curves part at
step 0), and any function of your ``block`` lesson makes both run the lessons' block
(``--block lesson``, with the lessons' attention).

This runs your code in this process: it is a learning tool, not a grader.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.cli import Parser
from core.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
# Relative difference between the two losses above which the runs count as diverged.
TOLERANCE = 1e-4
LESSON_LOSS = ("objective.cross_entropy", "objective.lm_loss")
BPE_VOCAB = 512  # ranks the runs learn with your train_bpe: a few seconds on the course corpus


def is_stub(obj: Callable[..., Any]) -> bool:
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


def plug_in(lessons: Any, reference: Any) -> tuple[list[str], list[str]]:
    """Fill the stubs of ``lessons`` with the reference's; returns (yours, fallbacks)."""
    yours, fallbacks = [], []
    for lesson in load_manifest().lessons:
        student = getattr(lessons, lesson.module)
        for name in lesson.functions:
            if is_stub(getattr(student, name)):
                setattr(student, name, getattr(getattr(reference, lesson.module), name))
                fallbacks.append(f"{lesson.module}.{name}")
            else:
                yours.append(f"{lesson.module}.{name}")
    return yours, fallbacks


def count_calls(lessons: Any, names: list[str]) -> Counter:
    """Wrap each named function (or class) of ``lessons`` so that using it is counted.

    The wrappers replace the module attributes, so calls through the module (the provided
    code's ``lessons.training.train_step``, a lesson calling another of its module) count.
    """
    counts: Counter = Counter()
    for qualified in names:
        module_name, _, name = qualified.partition(".")
        module = getattr(lessons, module_name)
        original = getattr(module, name)
        counted: object
        if isinstance(original, type):  # a class (TokenWindows): count its instances

            def __init__(self, *args, _key=qualified, _base=original, **kwargs):  # noqa: N807
                counts[_key] += 1
                _base.__init__(self, *args, **kwargs)

            subclass = type(name, (original,), {"__init__": __init__})
            subclass.__qualname__, subclass.__module__ = original.__qualname__, original.__module__
            counted = subclass
        else:

            def call(*args, _key=qualified, _original=original, **kwargs):
                counts[_key] += 1
                return _original(*args, **kwargs)

            counted = functools.wraps(original)(call)
        setattr(module, name, counted)
    return counts


def first_divergence(reference: list[float], yours: list[float]) -> int | None:
    for step, (a, b) in enumerate(zip(reference, yours, strict=False)):
        if not math.isfinite(b) or abs(a - b) > TOLERANCE * max(abs(a), 1e-8):
            return step
    return None


def losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def failed_checks(report_path: Path, target: Path, names: list[str]) -> dict[str, list[str]] | None:
    """Of ``names``, those with failed checks in the grading report of ``target`` (function ->
    check ids); None when the report is missing or grades another package."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        if (ROOT / report["target"]).resolve() != target:
            return None
        graded = report["lessons"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    modules = {lesson.slug: lesson.module for lesson in load_manifest().lessons}
    failed: dict[str, list[str]] = {}
    for lesson in graded:
        for check in lesson.get("checks", []):
            name = f"{modules.get(lesson.get('slug'))}.{check.get('function')}"
            if name in names and not check.get("passed"):
                failed.setdefault(name, []).append(str(check.get("id")))
    return failed


def plot(reference: list[float], yours: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from core.atomic import atomic_write

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
    parser = Parser(prog="python -m gpt.compare", description=__doc__)
    parser.add_argument("--target", default="exercises", help="your package (default: exercises)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--preset", default="micro")
    parser.add_argument("--out", default="runs/compare")
    parser.add_argument("--corpus", default="course", help="as for gpt.train")
    parser.add_argument(
        "--report", type=Path, default=None, help="your last grading report (nox -s grade's)"
    )
    args = parser.parse_args(argv)
    target = Path(args.target).resolve()
    if not (target / "training.py").is_file():
        print(
            f"error: {target} holds no exercise modules (training.py is missing); "
            "pass --target DIR, the folder of your package",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(ROOT))
    from gpt import train
    from gpt.lessons import LessonsError, load

    try:
        reference, lessons = load(), load(target)
    except LessonsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    yours, fallbacks = plug_in(lessons, reference)
    block = any(name.startswith("block.") for name in yours)
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
        eval_batches=2,  # only the training losses are compared
        checkpoint_every=args.steps,
        sample_tokens=5,
        dropout=0.0,
        # The same path in both runs, through your functions wherever you have them.
        attention="lesson" if "attention.attention" in yours or block else "fused",
        loss="lesson" if any(name in yours for name in LESSON_LOSS) else "fused",
        block="lesson" if block else "fused",
        optimizer="lesson" if "training.adamw_step" in yours else "torch",
        tokenizer="lesson" if "tokens.train_bpe" in yours else "gpt2",
        vocab_size=BPE_VOCAB,
    )
    print(f"Your functions ({len(yours)}): {', '.join(yours) or 'none yet'}")
    print(f"Reference fallbacks ({len(fallbacks)}): {', '.join(fallbacks) or 'none'}")
    print(
        f"Attention: {base['attention']}; loss: {base['loss']}; block: {base['block']}; "
        f"optimizer: {base['optimizer']}; tokenizer: {base['tokenizer']} (the same in both runs)"
    )
    train.run(
        train.TrainConfig(**base, out=str(out / "reference")),
        fresh=True,
        quiet=True,
        lessons=reference,
    )
    counts = count_calls(lessons, yours)
    try:
        train.run(
            train.TrainConfig(**base, out=str(out / "yours")),
            fresh=True,
            quiet=True,
            lessons=lessons,
        )
    except Exception as error:  # noqa: BLE001 - the student's code failed: say where, not a traceback
        print(f"Your run stopped with {type(error).__name__}: {error}")
    ref = losses(out / "reference")
    mine = losses(out / "yours") if (out / "yours" / "metrics.jsonl").exists() else []
    print(f"\n{'step':>5} {'reference':>10} {'yours':>10} {'difference':>11}")
    for step, a in enumerate(ref):
        b = mine[step] if step < len(mine) else float("nan")
        print(f"{step:>5} {a:>10.4f} {b:>10.4f} {b - a:>+11.2e}")
    plot(ref, mine, out / "compare.png")
    used = [name for name in yours if counts[name]]
    unused = [name for name in yours if not counts[name]]
    if yours:
        print("\nYour functions in your run:")
        for name in yours:
            took = f"took part ({counts[name]} calls)" if counts[name] else "did not run"
            print(f"  {name:<28} {took}")
    diverged = first_divergence(ref, mine) if len(mine) == len(ref) else len(mine)
    if diverged is not None:
        print(f"\nThe curves first differ at step {diverged}.")
        print(
            f"Each of your {len(used)} function(s) that took part, run alone among the "
            "reference's, to find where they part:"
        )
        parting = []
        for name in used:
            module_name, _, function = name.partition(".")
            module = getattr(reference, module_name)
            original = getattr(module, function)
            setattr(module, function, getattr(getattr(lessons, module_name), function))
            alone = out / "alone" / name
            try:
                train.run(
                    train.TrainConfig(**base, out=str(alone)),
                    fresh=True,
                    quiet=True,
                    lessons=reference,
                )
            except Exception:  # noqa: BLE001 - your code failed: that run parts at its last step
                pass
            finally:
                setattr(module, function, original)
            run = losses(alone) if (alone / "metrics.jsonl").exists() else []
            parts_at = first_divergence(ref, run) if len(run) == len(ref) else len(run)
            if parts_at is not None:
                parting.append(f"{name} (at step {parts_at})")
        if parting:
            print(f"  they part with: {', '.join(parting)}; start with the earliest.")
        else:
            print("  none parts alone: look at how they work together, starting with that step.")
    elif used:
        print(
            f"\nThe curves agree at every step (within {TOLERANCE:.0e} relative) with your "
            f"{len(used)} function(s) that took part: {', '.join(used)}. That measures them on "
            "the inputs this run gave them only, not on the edge cases the graders try."
        )
        from graders.runner import DEFAULT_REPORT

        failed = failed_checks(args.report or DEFAULT_REPORT, target, used)
        if failed is None:
            print("No grading report of this package: `nox -s grade` tries the edge cases.")
        elif failed:
            listed = "; ".join(f"{name} ({', '.join(ids)})" for name, ids in failed.items())
            print(f"Yet your last grading failed checks of: {listed}. `nox -s grade` says why.")
        else:
            print("Your last grading passed every check of them.")
    else:
        print(
            f"\nThe curves agree at every step (within {TOLERANCE:.0e} relative), but none of "
            "your functions took part: this says nothing about your code yet."
        )
    if unused:
        print(
            f"Not measured here (training never calls them): {', '.join(unused)}; "
            "`nox -s grade` checks them."
        )
    print(f"Plot: {out / 'compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
