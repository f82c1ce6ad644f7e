"""Train with your code: your functions in the course's GPT, beside the reference.

    python -m gpt.compare [--target exercises] [--steps 40] [--out runs/compare]

Both runs are the same command (``gpt.train``) with the same seed, data and settings; one
takes the reference lessons (``solutions``), the other yours, where every function you have
not implemented yet (its body only raises NotImplementedError) falls back to the reference's
and is listed as such. With correct code the two loss curves coincide; the first step where
they part says where to look.

Only what ran can agree: your functions are counted while your run trains, whatever import
reached them, and the report says of each whether it took part. Those that run only within
evaluation and sampling (``training.evaluate``, ``objective.perplexity``,
``generation.generate`` and what they call) cannot change the training curve: the report shows
both runs' evaluation loss, perplexity and sample beside the curves for them. Agreement covers
only the inputs training gave your functions, not the edge cases the graders try, so the report
also says what your last grading (``--report``) found of them: a failed check, every check
passed (only for a lesson graded with its files as they are now: the report's fingerprints), or
graded before the last change. When the curves part, each of your functions that shapes them
is run alone among the reference's, and those whose run parts too are named. Each run's
config.json says whose lessons it used, function by function.

Training normally uses library kernels for attention and the loss; when your
``attention.attention`` is implemented both runs use the lesson attention, and when your
``objective.cross_entropy`` or ``objective.lm_loss`` is, both compute the loss from full logits
with the lessons' ``lm_loss`` (which calls ``cross_entropy``), so your versions are what your
run trains with. In the same way your ``training.adamw_step`` makes both runs step with the
lessons' AdamW (``--optimizer lesson``), your ``tokens.train_bpe`` makes both learn their merges
on the corpus (``--tokenizer lesson``: wrong merges give other token ids, so the curves part at
step 0), and any function of your ``block`` lesson makes both run the lessons' block
(``--block lesson``, with the lessons' attention). ``--tokenizer lesson`` makes both runs learn
their merges with the lessons' ``train_bpe`` (yours, else the reference's) even when yours is not
written: a vocabulary of 512 ranks, where GPT-2's 50,257-way output layer is most of a small
model's time.

This runs your code in this process: it is a learning tool, not a grader.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from core.atomic import atomic_write_bytes
from core.cli import Parser
from core.fingerprint import fingerprint
from core.manifest import DEFAULT_REPORT, load_manifest
from gpt.lessons import replace

ROOT = Path(__file__).resolve().parents[1]
# Relative difference between the two losses above which the runs count as diverged.
TOLERANCE = 1e-4
LESSON_LOSS = ("objective.cross_entropy", "objective.lm_loss")
BPE_VOCAB = 512  # ranks the runs learn with your train_bpe: a few seconds on the course corpus
# What gpt.train calls to evaluate and to sample, never to train: the functions that run only
# within these change the evaluation loss, its perplexity and the sample, never the curve.
EVALUATION = ("training.evaluate", "objective.perplexity", "generation.generate")
SAMPLE_TOKENS = 20


class Usage:
    """Calls of each counted function: while training, where they shape the loss curve, and
    within evaluation and sampling (``EVALUATION``), where they change only the evaluation
    loss, its perplexity and the sample."""

    def __init__(self) -> None:
        self.training: Counter = Counter()
        self.evaluation: Counter = Counter()
        self.depth = 0  # evaluation calls in progress

    def count(self, name: str, evaluation: bool) -> None:
        (self.evaluation if evaluation or self.depth else self.training)[name] += 1


def count_calls(lessons: Any, names: list[str]) -> Usage:
    """Wrap each named function (or class) of ``lessons`` so that using it is counted, and
    the ``EVALUATION`` functions so that what they call counts as evaluation.

    The wrappers take the functions' place wherever the lesson modules hold them (``replace``),
    so a call counts whatever import reached it: through the module (the provided code's
    ``lessons.training.train_step``) or a name another lesson imported (block.py's
    ``from .attention import attention``).
    """
    usage = Usage()
    for qualified in [*names, *(name for name in EVALUATION if name not in names)]:
        module_name, _, name = qualified.partition(".")
        original = getattr(getattr(lessons, module_name), name)
        counted, evaluation = qualified in names, qualified in EVALUATION
        wrapper: object
        if isinstance(original, type):  # a class (TokenWindows): count its instances

            def __init__(self, *args, _key=qualified, _base=original, **kwargs):  # noqa: N807
                usage.count(_key, False)
                _base.__init__(self, *args, **kwargs)

            subclass = type(name, (original,), {"__init__": __init__})
            subclass.__qualname__, subclass.__module__ = original.__qualname__, original.__module__
            wrapper = subclass
        else:

            def call(
                *args, _key=qualified, _original=original, _counted=counted, _eval=evaluation, **kw
            ):
                if _counted:
                    usage.count(_key, _eval)
                usage.depth += _eval
                try:
                    return _original(*args, **kw)
                finally:
                    usage.depth -= _eval

            wrapper = functools.wraps(original)(call)
        replace(lessons, original, wrapper)
    return usage


def first_divergence(reference: list[float], yours: list[float]) -> int | None:
    for step, (a, b) in enumerate(zip(reference, yours, strict=False)):
        if not math.isfinite(b) or abs(a - b) > TOLERANCE * max(abs(a), 1e-8):
            return step
    return None


def losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def last_grading(report_path: Path, target: Path, names: list[str]) -> dict[str, list[str]] | None:
    """What the grading report of ``target`` says of each of ``names``, by verdict: ``failed``
    (``name (check ids)``), ``passed`` (every check of it passed, graded with its lesson's
    files as they are now: the report's fingerprint), ``older`` (graded before its lesson's
    files last changed) and ``ungraded``; None when the report is missing or grades another
    package."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        if (ROOT / report["target"]).resolve() != target:
            return None
        hidden = bool(report["hidden"])
        graded = {entry["slug"]: entry for entry in report["lessons"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    lessons = {lesson.module: lesson for lesson in load_manifest().lessons}
    verdicts: dict[str, list[str]] = {"failed": [], "passed": [], "older": [], "ungraded": []}
    for name in names:
        module, _, function = name.partition(".")
        lesson = lessons[module]
        entry = graded.get(lesson.slug)
        if not isinstance(entry, dict):
            verdicts["ungraded"].append(name)
            continue
        if entry.get("fingerprint") != fingerprint(target, module):
            verdicts["older"].append(name)
            continue
        rows = [row for row in entry.get("checks", []) if row.get("function") == function]
        failed = [str(row.get("id")) for row in rows if not row.get("passed")]
        wanted = {c.id for c in lesson.selected_checks(hidden) if c.function == function}
        if failed:
            verdicts["failed"].append(f"{name} ({', '.join(failed)})")
        elif wanted and wanted <= {row.get("id") for row in rows}:
            verdicts["passed"].append(name)
        else:
            verdicts["ungraded"].append(name)
    return verdicts


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


def note_whose(out: Path, lessons: str, yours: list[str], reference: list[str]) -> None:
    """Record in the run's config.json whose lessons it used: ``lessons`` (the package) and,
    function by function, which are yours and which the reference's."""
    path = out / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the run stopped before writing it
    config.update(lessons=lessons, functions={"yours": yours, "reference": reference})
    atomic_write_bytes(path, (json.dumps(config, indent=2) + "\n").encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m gpt.compare", description=__doc__)
    parser.add_argument("--target", default="exercises", help="your package (default: exercises)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--preset", default="micro")
    parser.add_argument("--out", default="runs/compare")
    parser.add_argument("--corpus", default="course", help="as for gpt.train")
    parser.add_argument(
        "--tokenizer",
        choices=("auto", "lesson"),
        default="auto",
        help="auto: the lessons' merges if your train_bpe is written, else GPT-2's; "
        "lesson: the lessons' merges always (a small vocabulary, faster)",
    )
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
    from gpt.lessons import REFERENCE, LessonsError, fill_in, load

    try:
        reference, lessons = load(), load(target)
    except LessonsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    yours, fallbacks = fill_in(lessons, reference)
    everything = yours + fallbacks
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
        eval_batches=2,
        checkpoint_every=args.steps,
        sample_tokens=SAMPLE_TOKENS,
        dropout=0.0,
        # The same path in both runs, through your functions wherever you have them.
        attention="lesson" if "attention.attention" in yours or block else "fused",
        loss="lesson" if any(name in yours for name in LESSON_LOSS) else "fused",
        block="lesson" if block else "fused",
        optimizer="lesson" if "training.adamw_step" in yours else "torch",
        tokenizer="lesson" if args.tokenizer == "lesson" or "tokens.train_bpe" in yours else "gpt2",
        vocab_size=BPE_VOCAB,
    )
    print(f"Your functions ({len(yours)}): {', '.join(yours) or 'none yet'}")
    print(f"Reference fallbacks ({len(fallbacks)}): {', '.join(fallbacks) or 'none'}")
    print(
        f"Attention: {base['attention']}; loss: {base['loss']}; block: {base['block']}; "
        f"optimizer: {base['optimizer']}; tokenizer: {base['tokenizer']} (the same in both runs)",
        flush=True,
    )

    def run(where: Path, package: str, using: Any, label: str) -> dict | None:
        """One training run; None when your code stopped it (said in one line)."""
        try:
            return train.run(
                train.TrainConfig(**base, lessons=package, out=str(where)),
                fresh=True,
                quiet=True,
                lessons=using,
                show_progress=True,
                label=label,
            )
        except Exception as error:  # noqa: BLE001 - the student's code failed: say where, not a traceback
            print(f"{label} stopped with {type(error).__name__}: {error}", flush=True)
            return None

    first = run(out / "reference", REFERENCE, reference, "reference run")
    note_whose(out / "reference", REFERENCE, [], everything)
    if first is None:
        return 2
    usage = count_calls(lessons, yours)
    second = run(out / "yours", args.target, lessons, "your run")
    note_whose(out / "yours", args.target, yours, fallbacks)
    ref = losses(out / "reference")
    mine = losses(out / "yours") if (out / "yours" / "metrics.jsonl").exists() else []
    print(f"\n{'step':>5} {'reference':>10} {'yours':>10} {'difference':>11}")
    for step, a in enumerate(ref):
        b = mine[step] if step < len(mine) else float("nan")
        print(f"{step:>5} {a:>10.4f} {b:>10.4f} {b - a:>+11.2e}")
    plot(ref, mine, out / "compare.png")
    shaping = [name for name in yours if usage.training[name]]
    evaluating = [name for name in yours if usage.evaluation[name] and not usage.training[name]]
    unused = [name for name in yours if name not in shaping and name not in evaluating]
    if yours:
        print("\nYour functions in your run:")
        width = max(map(len, yours))
        for name in yours:
            calls = usage.training[name] + usage.evaluation[name]
            counted = f"({calls} call{'s' if calls != 1 else ''})"
            if usage.training[name]:
                took = f"took part {counted}"
            elif usage.evaluation[name]:
                took = f"evaluation and sample only {counted}"
            else:
                took = "did not run"
            print(f"  {name:<{width}} {took}")
    show_evaluation(first, second)
    diverged = first_divergence(ref, mine) if len(mine) == len(ref) else len(mine)
    if diverged is not None:
        print(f"\nThe curves first differ at step {diverged}.")
        print(
            f"Each of your {len(shaping)} function(s) that shape them, run alone among the "
            "reference's, to find where they part:"
        )
        parting = []
        for name in shaping:
            module_name, _, function = name.partition(".")
            original = getattr(getattr(reference, module_name), function)
            mine_alone = getattr(getattr(lessons, module_name), function)
            alone = out / "alone" / name
            replace(reference, original, mine_alone)
            try:
                run(alone, REFERENCE, reference, f"{name} alone")
            finally:
                replace(reference, mine_alone, original)
            note_whose(alone, REFERENCE, [name], [n for n in everything if n != name])
            curve = losses(alone) if (alone / "metrics.jsonl").exists() else []
            parts_at = first_divergence(ref, curve) if len(curve) == len(ref) else len(curve)
            if parts_at is not None:
                parting.append(f"{name} (at step {parts_at})")
        if parting:
            print(f"  they part with: {', '.join(parting)}; start with the earliest.")
        else:
            print("  none parts alone: look at how they work together, starting with that step.")
    elif shaping:
        print(
            f"\nThe curves agree at every step (within {TOLERANCE:.0e} relative) with your "
            f"{len(shaping)} function(s) that shape them: {', '.join(shaping)}. That measures "
            "them on the inputs this run gave them only, not on the edge cases the graders try."
        )
    else:
        print(
            f"\nThe curves agree at every step (within {TOLERANCE:.0e} relative), but none of "
            "your functions shapes them: this says nothing about your code yet."
        )
    if evaluating:
        judge_evaluation(evaluating, first, second, diverged is None)
    if diverged is None and (shaping or evaluating):
        tell_grading(args.report, target, shaping + evaluating)
    if unused:
        print(
            f"Not measured here (neither training nor its evaluation and sample call them): "
            f"{', '.join(unused)}; `nox -s grade` checks them."
        )
    print(f"Plot: {out / 'compare.png'}")
    return 0


def close(a: float, b: float) -> bool:
    return math.isfinite(b) and abs(a - b) <= TOLERANCE * max(abs(a), 1e-8)


def show_evaluation(first: dict, second: dict | None) -> None:
    """The evaluation after the last step and the sample, of both runs."""
    print(f"\nAfter step {first['steps'] - 1}:")
    print(f"  {'':<10} {'evaluation loss':>15} {'perplexity':>11}  sample ({SAMPLE_TOKENS} tokens)")
    for who, report in (("reference", first), ("yours", second)):
        if report is None:
            print(f"  {who:<10} {'-':>15} {'-':>11}  (your run stopped)")
            continue
        sample = json.dumps(report["sample"], ensure_ascii=False)
        print(
            f"  {who:<10} {report['val_loss']:>15.4f} {report['val_perplexity']:>11.2f}  {sample}"
        )


def judge_evaluation(names: list[str], first: dict, second: dict | None, agree: bool) -> None:
    """What can be said of your functions that change only the evaluation and the sample."""
    listed = ", ".join(names)
    verb = "changes" if len(names) == 1 else "change"
    if not agree or second is None:
        print(
            f"Your {listed} {verb} only the evaluation and the sample, which differ anyway "
            "while the curves do: fix what parts the curves first."
        )
        return
    differ = [
        what
        for what, same in (
            ("the evaluation loss", close(first["val_loss"], second["val_loss"])),
            ("the perplexity", close(first["val_perplexity"], second["val_perplexity"])),
            ("the sample", first["sample"] == second["sample"]),
        )
        if not same
    ]
    if differ:
        print(
            f"Your {listed} {verb} only the evaluation and the sample, not the curves: "
            f"{' and '.join(differ)} {'differs' if len(differ) == 1 else 'differ'} from the "
            "reference's; look there."
        )
    else:
        print(
            f"Your {listed} {verb} only the evaluation and the sample, not the curves: the "
            f"evaluation loss and its perplexity agree (within {TOLERANCE:.0e} relative) and "
            "the sample is the same."
        )


def tell_grading(report_path: Path | None, target: Path, names: list[str]) -> None:
    """What the last grading of ``target`` says of ``names``: a check failed, every check
    passed with the code as it is now, graded before the last change, or not graded."""
    verdicts = last_grading(report_path or DEFAULT_REPORT, target, names)
    if verdicts is None:
        print("No grading report of this package: `nox -s grade` tries the edge cases.")
        return
    if verdicts["failed"]:
        print(
            f"Yet your last grading failed checks of: {'; '.join(verdicts['failed'])}. "
            "`nox -s grade` says why."
        )
    if verdicts["passed"]:
        print(
            "Your last grading, of the code as it is now, passed every check of: "
            f"{', '.join(verdicts['passed'])}."
        )
    if verdicts["older"]:
        print(
            f"Graded before their lesson's files last changed: {', '.join(verdicts['older'])}; "
            "`nox -s grade` grades them as they are now."
        )
    if verdicts["ungraded"]:
        print(
            f"Not graded yet: {', '.join(verdicts['ungraded'])}; `nox -s grade` tries the "
            "edge cases."
        )


if __name__ == "__main__":
    sys.exit(main())
