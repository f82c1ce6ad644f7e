"""Lesson 8, The training loop: public checks.

train_step, evaluate and fit run in the worker on a tiny model
(graders.worker.scenarios.ToyLM) built from a seed; the oracles run the same scenario with
trusted implementations (and with the classic mistakes) to know the right answer and to
recognise wrong ones.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from graders.answers import later, oracle, recorded
from graders.checking import (
    AnyOf,
    CheckFailed,
    as_bool,
    as_float,
    as_list,
    as_tensor,
    describe,
    diagnose,
    difference,
    fail,
    generator,
    same,
    seed_for,
)
from graders.client import StudentError

# -- lr_at --------------------------------------------------------------------------------------


def check_schedule(
    student, steps: list[int], what: str, mistakes: tuple[str, ...] = (), **config: Any
) -> None:
    expected = oracle.lr_at(steps, **config)
    answers = {key: later.lr_at(steps, mistake=key, **config) for key in mistakes}
    got = [as_float(student.call("lr_at", s, **config), f"lr_at({s}, ...)") for s in steps]
    if same(got, expected, rtol=1e-9, atol=1e-12):
        return
    diagnose(
        got,
        answers,
        rtol=1e-9,
        atol=1e-12,
        detail=f"{what}: steps {steps} gave {[round(v, 9) for v in got]}, expected "
        f"{[round(v, 9) for v in expected]}",
    )


SCHEDULE = {"max_lr": 6e-4, "min_lr": 6e-5, "warmup_steps": 10, "max_steps": 100}


@pytest.mark.check("lr-warmup")
def test_lr_warmup(student):
    check_schedule(
        student,
        [0, 1, 4, 9],
        "lr_at(step, max_lr=6e-4, warmup_steps=10, ...)",
        ("starts-at-zero",),
        **SCHEDULE,
    )


@pytest.mark.check("lr-cosine")
def test_lr_cosine(student):
    check_schedule(
        student,
        [10, 25, 55, 80, 100],
        "lr_at(step, min_lr=6e-5, max_steps=100, ...)",
        ("ignores-min", "no-warmup-offset"),
        **SCHEDULE,
    )


@pytest.mark.check("lr-no-warmup")
def test_lr_no_warmup(student):
    check_schedule(
        student,
        [0, 1, 5, 10, 11],
        "lr_at(step, warmup_steps=0, max_steps=10)",
        max_lr=1.0,
        min_lr=0.1,
        warmup_steps=0,
        max_steps=10,
    )


@pytest.mark.check("lr-after-max")
def test_lr_after_max(student):
    check_schedule(
        student, [101, 150, 190], "lr_at(steps past max_steps, ...)", ("keeps-cycling",), **SCHEDULE
    )


@pytest.mark.check("lr-validates")
@pytest.mark.parametrize("warmup,max_steps", [(10, 10), (20, 10), (-1, 10)])
def test_lr_validates(student, warmup, max_steps):
    try:
        error = student.error(
            "lr_at", 0, max_lr=1.0, min_lr=0.1, warmup_steps=warmup, max_steps=max_steps
        )
    except CheckFailed as failure:
        if failure.hint is None and "instead of raising" in failure.detail:
            fail(
                f"lr_at(0, warmup_steps={warmup}, max_steps={max_steps}): {failure.detail}",
                "no-validation",
            )
        raise
    if not error.is_a("ValueError"):
        fail(
            f"lr_at with warmup_steps={warmup}, max_steps={max_steps} raised "
            f"{error.type_name}, expected ValueError"
        )


# -- adamw_step -----------------------------------------------------------------------------------


@recorded
def adamw_case(seed: int, shapes: list, steps: int, grad_scale: float = 1.0) -> dict:
    """Parameters of ``shapes`` and ``steps`` lists of gradients, from one seed."""
    g = generator(seed)
    params = [torch.randn(*shape, generator=g) for shape in shapes]
    grads = [
        [torch.randn(*shape, generator=g) * grad_scale for shape in shapes] for _ in range(steps)
    ]
    return {"params": params, "grads": grads}


def as_state(value: Any, what: str, n: int) -> dict:
    """The returned state, or fail naming what is wrong with it."""
    if type(value) is not dict or set(value) != {"step", "exp_avg", "exp_avg_sq"}:
        keys = sorted(value) if isinstance(value, dict) else describe(value)
        fail(f"{what} should be a dict with keys step, exp_avg, exp_avg_sq; got {keys}")
    if isinstance(value["step"], bool) or not isinstance(value["step"], int):
        fail(f"{what}['step'] should be a Python int, got {describe(value['step'])}")
    for key in ("exp_avg", "exp_avg_sq"):
        moments = as_list(value[key], f"{what}[{key!r}]", as_tensor)
        if len(moments) != n:
            fail(f"{what}[{key!r}] holds {len(moments)} tensors, expected one per parameter ({n})")
    return value


def run_adamw(student, case: dict, hyper: dict) -> dict:
    """The student's adamw_step, called once per step, each time with the state it returned."""
    params, after = case["params"], []
    state: dict = {}
    for t, grads in enumerate(case["grads"], start=1):
        what = f"adamw_step (step {t})"
        try:
            result = student.call("adamw_step", params, grads, state, **hyper)
        except StudentError as error:
            # One pair of moments carried on from a parameter to the next of another shape.
            if error.is_a("RuntimeError") and "must match the size" in error.message:
                fail(error.detail, "shared-state")
            raise
        if type(result) not in (tuple, list) or len(result) != 2:
            fail(f"{what} should return (new parameters, new state), got {describe(result)}")
        params = as_list(result[0], f"the parameters {what} returned", as_tensor)
        if len(params) != len(grads):
            fail(f"{what} returned {len(params)} parameters, expected {len(grads)}")
        state = as_state(result[1], f"the state {what} returned", len(grads))
        if state["step"] != t:
            fail(
                f"{what} returned step {state['step']}; the step counts the steps taken, "
                f"so it is {t} here",
                "step-count",
            )
        after.append(params)
    return dict(params=after, state=state)


def check_adamw(
    student, case: dict, what: str, mistakes: tuple[str, ...] = (), **hyper: Any
) -> None:
    expected = oracle.adamw_steps(case["params"], case["grads"], **hyper)

    def answer(key: str) -> Any:
        return later.adamw_steps(case["params"], case["grads"], mistake=key, **hyper).then(
            lambda r: r["params"]
        )

    answers = {key: answer(key) for key in (*mistakes, "no-sqrt")}
    # Neither moment corrected, or one of them only
    answers["no-bias-correction"] = AnyOf(
        *(answer(f"no-bias-correction{form}") for form in ("", ":m", ":v"))
    )
    # t one more, or one less (0 on the first call: the correction divides by 0)
    answers["step-off-by-one"] = AnyOf(answer("step-off-by-one"), answer("step-off-by-one:less"))
    got = run_adamw(student, case, hyper)
    if not same(got["params"], expected["params"], rtol=1e-5, atol=1e-6):
        diagnose(
            got["params"],
            answers,
            rtol=1e-5,
            atol=1e-6,
            detail=f"{what}: the parameters are not torch.optim.AdamW's"
            + _params_gap(got["params"], expected["params"]),
        )
    for key in ("exp_avg", "exp_avg_sq"):
        if not same(got["state"][key], expected["state"][key], rtol=1e-5, atol=1e-7):
            fail(f"{what}: the returned state's {key} is not torch.optim.AdamW's")


@pytest.mark.check("adamw-first-step")
def test_adamw_first_step(student):
    check_adamw(
        student,
        adamw_case(1, [[3, 4], [5]], steps=1),
        "one adamw_step from an empty state (lr=0.1)",
        lr=0.1,
    )


@pytest.mark.check("adamw-several-steps")
def test_adamw_several_steps(student):
    check_adamw(
        student,
        adamw_case(2, [[4, 3], [3]], steps=4),
        "four adamw_steps (lr=0.01, betas=(0.9, 0.95))",
        ("shared-state",),
        lr=0.01,
    )


@pytest.mark.check("adamw-weight-decay")
def test_adamw_weight_decay(student):
    check_adamw(
        student,
        adamw_case(3, [[4, 4], [4]], steps=3),
        "three adamw_steps with weight_decay=0.1 (lr=0.05)",
        ("l2-decay", "decay-without-lr", "decay-after-step"),
        lr=0.05,
        weight_decay=0.1,
    )


@pytest.mark.check("adamw-eps")
def test_adamw_eps(student):
    # Gradients of about 1e-3 and eps=1e-3: where eps goes changes the step by a third.
    check_adamw(
        student,
        adamw_case(4, [[6], [2, 2]], steps=2, grad_scale=1e-3),
        "two adamw_steps with gradients near 1e-3 and eps=1e-3",
        ("eps-inside",),
        lr=0.01,
        eps=1e-3,
    )


@pytest.mark.check("adamw-per-parameter")
def test_adamw_per_parameter(student):
    # Three parameters of one shape whose gradients differ by orders of magnitude.
    case = adamw_case(5, [[3], [3], [3]], steps=3)
    case = {
        "params": case["params"],
        "grads": [[g * 10.0**i for i, g in enumerate(grads)] for grads in case["grads"]],
    }
    check_adamw(
        student,
        case,
        "three adamw_steps on parameters with gradients of 1, 10 and 100",
        ("shared-state",),
        lr=0.01,
        betas=(0.8, 0.9),
    )


# -- train_step -----------------------------------------------------------------------------------

TOY = {"vocab": 11, "dim": 8, "context_length": 16}


@recorded
def batch(seed: int, B: int = 2, T: int = 5, vocab: int = 11, ignore: float = 0.0):
    g = generator(seed)
    x = torch.randint(0, vocab, (B, T), generator=g)
    y = torch.randint(0, vocab, (B, T), generator=g)
    y[torch.rand(B, T, generator=g) < ignore] = -100
    return (x, y)


def step_config(
    seed: int,
    n_micro: int,
    *,
    steps: int = 1,
    max_grad_norm: float = 1e9,
    optimizer: str = "sgd",
    lr: float = 0.5,
    start_training: bool = False,
    ignore: float = 0.0,
    B: int = 2,
    T: int = 5,
) -> dict:
    return {
        "model": TOY | {"seed": seed_for(seed)},
        "optimizer": {"kind": optimizer, "lr": lr},
        "steps": [
            {
                "micro_batches": [
                    batch(seed * 100 + 10 * s + i, B, T, ignore=ignore) for i in range(n_micro)
                ],
                "max_grad_norm": max_grad_norm,
            }
            for s in range(steps)
        ],
        "start_training": start_training,
    }


def run_step(student, config: dict) -> dict:
    got = student.scenario("train_step", **config)
    steps = len(config["steps"])
    return {
        "losses": as_list(got["losses"], "the returned losses", lambda v, w: v),
        "params": [as_list(p, "the parameters", as_tensor) for p in got["params"]][:steps],
        "grads": got["grads"],
        "records": got["records"],
        "micro_batches_after": got.get("micro_batches_after"),
    }


def check_params(got: dict, config: dict, what: str, mistakes: tuple[str, ...]) -> None:
    expected = oracle.train_step_params(config)
    answers = {key: later.train_step_params(config, mistake=key) for key in mistakes}
    if same(got["params"], expected, rtol=1e-4, atol=1e-6):
        return
    diagnose(
        got["params"],
        answers,
        rtol=1e-4,
        atol=1e-6,
        detail=f"{what}: the parameters after the step are not the expected ones"
        + _params_gap(got["params"], expected),
    )


def _params_gap(got: list, expected: list) -> str:
    """The first parameter that differs, with got and expected values, for a detail."""
    for s, (step_got, step_want) in enumerate(zip(got, expected, strict=False)):
        for i, (a, b) in enumerate(zip(step_got, step_want, strict=False)):
            if not same(a, b, rtol=1e-4, atol=1e-6):
                where = f" after step {s + 1}" if len(expected) > 1 else ""
                if a.shape != b.shape:
                    shapes = f"{list(a.shape)}, expected {list(b.shape)}"
                    return f"; parameter {i}{where} has shape {shapes}"
                return f"; parameter {i}{where}: {difference(a, b)}"
    return ""


# Every check of train_step's parameters names any of these: one mistake, however it shows.
STEP_MISTAKES = (
    "unscaled",
    "last-batch-only",
    "no-step",
    "no-clip",
    "token-weighted",
    "clamps-ignored",
    "counts-ignored",
)


@pytest.mark.check("train-step-update")
def test_train_step_update(student):
    config = step_config(1, 3)
    check_params(
        run_step(student, config),
        config,
        "train_step(toy model, 3 micro-batches, SGD)",
        STEP_MISTAKES,
    )


@pytest.mark.check("train-step-unequal-batches")
def test_train_step_unequal_batches(student):
    config = step_config(6, 1)
    config["steps"][0]["micro_batches"] = [
        batch(601, B=1, T=3),
        batch(602, B=3, T=6, ignore=0.3),
        batch(603, B=2, T=2),
    ]
    what = "train_step(toy model, micro-batches of 3, 13 and 4 counted targets)"
    got = run_step(student, config)
    check_params(got, config, what, STEP_MISTAKES)
    check_returned_mean(got, config, what)


@pytest.mark.check("train-step-mode-and-batches")
def test_train_step_leaves_batches(student):
    config = step_config(7, 3)
    got = run_step(student, config)
    before = [step["micro_batches"] for step in config["steps"]]
    after = got["micro_batches_after"]
    if not same(after, before, rtol=0, atol=0):
        lengths = [len(b) if isinstance(b, list) else None for b in after or []]
        fail(
            f"train_step(3 micro-batches) left the caller's list with {lengths} micro-batches "
            "(or changed their tensors); expected it unchanged",
            "changed-batches",
        )


@pytest.mark.check("train-step-clips")
def test_train_step_clips(student):
    config = step_config(2, 2, max_grad_norm=0.05)
    check_params(
        run_step(student, config),
        config,
        "train_step(toy model, 2 micro-batches, max_grad_norm=0.05)",
        STEP_MISTAKES,
    )


@pytest.mark.check("train-step-zeroes-grads")
def test_train_step_zeroes_grads(student):
    config = step_config(3, 2, steps=2)
    got = run_step(student, config)
    for grad in got["grads"]:
        if grad is not None and bool(as_tensor(grad, "a gradient").abs().sum() > 0):
            fail("after train_step the parameters still hold gradients", "not-zeroed")
    check_params(got, config, "two train_steps in a row", STEP_MISTAKES)


def check_returned_mean(got: dict, config: dict, what: str) -> None:
    """The loss train_step returned is the plain mean of the first step's micro-batch losses."""
    losses = oracle.micro_losses(config)
    loss = as_float(got["losses"][0], "the loss train_step returned", allow_int=False)
    mean = sum(losses) / len(losses)
    if math.isclose(loss, mean, rel_tol=1e-5):
        return
    diagnose(
        loss,
        {"sum": sum(losses), "last": losses[-1], "scaled": mean / len(losses)},
        rtol=1e-5,
        detail=f"{what} returned {loss:.6g}; the micro-batch losses were "
        f"{[round(v, 6) for v in losses]}, their mean {mean:.6g}",
    )


@pytest.mark.check("train-step-returns-mean")
def test_train_step_returns_mean(student):
    config = step_config(4, 3)
    check_returned_mean(run_step(student, config), config, "train_step")


@pytest.mark.check("train-step-ignore-index")
def test_train_step_ignore_index(student):
    config = step_config(6, 3, ignore=0.4)
    check_params(
        run_step(student, config), config, "train_step with ignored targets", STEP_MISTAKES
    )


@pytest.mark.check("train-step-mode-and-batches")
def test_train_step_train_mode(student):
    config = step_config(5, 2, start_training=False)
    got = run_step(student, config)
    modes = [as_bool(r["training"], "model.training") for r in got["records"]]
    if not modes or not all(modes):
        fail(
            f"train_step ran the model in modes {modes} (True = train) on a model that "
            "arrived in eval mode",
            "eval-mode",
        )
    check_params(got, config, "train_step on a model in eval mode", STEP_MISTAKES)


# -- evaluate -------------------------------------------------------------------------------------


def eval_config(seed: int, n: int, *, start_training: bool = True, one_shot: bool = False) -> dict:
    # Batches with very different numbers of counted targets, so weighting by tokens shows.
    batches = [batch(seed * 10 + i, B=1 + i, T=4, ignore=0.25 * i) for i in range(n)]
    for x, y in batches:
        y[0, 0] = int(x[0, 0])  # at least one target counts
    return {
        "model": TOY | {"seed": seed_for(seed)},
        "batches": batches,
        "start_training": start_training,
        "one_shot": one_shot,
    }


def run_evaluate(student, config: dict) -> dict:
    got = student.scenario("evaluate", **config)
    return got


def check_eval_loss(student, config: dict, what: str) -> dict:
    expected = oracle.evaluate(config)
    weighted = later.evaluate(config, mistake="token-weighted")
    got = run_evaluate(student, config)
    loss = as_float(got["loss"], f"the loss {what} returned", allow_int=False)
    if not math.isclose(loss, expected, rel_tol=1e-5):
        n = len(config["batches"])
        diagnose(
            loss,
            {"token-weighted": weighted, "sum": expected * n},
            rtol=1e-5,
            detail=f"{what} returned {loss:.6g}, expected {expected:.6g}",
        )
    return got


@pytest.mark.check("evaluate-mean-loss")
def test_evaluate_mean_loss(student):
    check_eval_loss(student, eval_config(1, 3), "evaluate(toy model, 3 batches)")


@pytest.mark.check("evaluate-mode-and-batches")
def test_evaluate_eval_mode(student):
    got = check_eval_loss(student, eval_config(2, 2), "evaluate(toy model, 2 batches)")
    records = as_list(got["records"], "the model's calls", lambda v, w: v)
    if not records:
        fail("evaluate never called the model")
    if any(as_bool(r["training"], "model.training") for r in records):
        fail("the model was in train mode during evaluate", "train-mode")
    if any(as_bool(r["grad"], "grad mode") for r in records):
        fail("gradients were enabled during evaluate", "grad-enabled")


@pytest.mark.check("evaluate-mode-and-batches")
@pytest.mark.parametrize("start_training", [True, False], ids=["from-train", "from-eval"])
def test_evaluate_restores_mode(student, start_training):
    got = run_evaluate(student, eval_config(3, 2, start_training=start_training))
    after = as_bool(got["training_after"], "model.training after evaluate")
    if after != start_training:
        fail(
            f"a model in {'train' if start_training else 'eval'} mode left evaluate in "
            f"{'train' if after else 'eval'} mode",
            "left-eval" if start_training else "forced-train",
        )


@pytest.mark.check("evaluate-mode-and-batches")
def test_evaluate_leaves_batches(student):
    config = eval_config(4, 3)
    got = run_evaluate(student, config)
    if not same(got.get("batches_after"), config["batches"], rtol=0, atol=0):
        after = got.get("batches_after")
        fail(
            f"evaluate(3 batches) left the caller's list with "
            f"{len(after) if isinstance(after, list) else after!r} batches (or changed their "
            "tensors); expected it unchanged",
            "changed-batches",
        )


@pytest.mark.check("evaluate-one-pass")
def test_evaluate_one_pass(student):
    check_eval_loss(student, eval_config(4, 3, one_shot=True), "evaluate(a generator of batches)")


# -- fit ------------------------------------------------------------------------------------------


def fit_config(
    seed: int,
    *,
    steps: int = 4,
    grad_accum: int = 2,
    n_batches: int = 3,
    eval_every: int | None = None,
    with_eval: bool = False,
    loader: bool = False,
    optimizer: str = "sgd",
) -> dict:
    train: dict[str, Any]
    if loader:
        xs, ys = zip(*(batch(seed * 50 + i, B=1) for i in range(n_batches * 2)), strict=True)
        train = {"tensors": (torch.cat(xs), torch.cat(ys)), "batch_size": 2, "seed": seed_for(seed)}
    else:
        train = {"batches": [batch(seed * 50 + i) for i in range(n_batches)]}
    return {
        "model": TOY | {"seed": seed_for(seed)},
        "optimizer": {"kind": optimizer, "lr": 0.5},
        "train": train,
        "steps": steps,
        "grad_accum": grad_accum,
        "lr_base": 0.3,
        "lr_decay": 0.7,
        "eval_batches": [batch(seed * 70 + i) for i in range(2)] if with_eval else None,
        "eval_every": eval_every,
    }


def run_fit(student, config: dict, what: str) -> dict:
    try:
        got = student.scenario("fit", **config)
    except StudentError as error:
        if "StopIteration" in (error.type_name, error.message) or "StopIteration" in error.message:
            fail(f"{what} raised {error.type_name}: {error.message}", "no-cycle")
        raise
    history = as_list(
        got["history"],
        f"the history {what} returned",
        lambda v, w: v if isinstance(v, dict) else fail(f"{w} is not a dict"),
    )
    for i, record in enumerate(history):
        keys = set(record)
        if not {"step", "lr", "loss"} <= keys <= {"step", "lr", "loss", "eval_loss"}:
            fail(
                f"record {i} of the history has keys {sorted(keys)}; expected step, lr, loss "
                "(and eval_loss after an evaluation)"
            )
        for key in keys - {"step"}:
            as_float(record[key], f"history[{i}][{key!r}]")
    return {
        "history": history,
        "step_lrs": got["step_lrs"],
        "params": got["params"],
        "train_after": got.get("train_after"),
    }


# Every check of fit names any of these: a mistake that shows in several checks' parts of the
# run is named by each, and the report tells the student that the later ones follow from it.
FIT_MISTAKES = (
    "restarts-each-step",
    "ignores-accum",
    "no-cycle",
    "cycle-replays",
    "lr-after-step",
    "lr-not-set",
    "first-group-only",
    "eval-off-by-one",
    "no-final-eval",
)


def check_fit(
    student, config: dict, what: str, part: str, mistakes: tuple[str, ...] = FIT_MISTAKES
) -> None:
    """Compare one ``part`` of the run ("history", "step_lrs" or "params"): the behaviour the
    check is about, and nothing else, so that one mistake fails the checks it shows in."""
    expected = oracle.fit(config)
    runs = {key: later.fit(config, mistake=key) for key in mistakes if key != "no-cycle"}
    got = run_fit(student, config, what)
    rtol, atol = (1e-4, 1e-6) if part == "params" else (1e-5, 1e-7)
    if same(got[part], expected[part], rtol=rtol, atol=atol):
        return
    answers = {key: run.then(lambda r: r[part]) for key, run in runs.items()}
    if part == "history":
        detail = f"{what}: " + _history_gap(got["history"], expected["history"])
    elif part == "step_lrs":
        detail = (
            f"{what}: the optimizer stepped with learning rates {got['step_lrs']}, expected "
            f"{expected['step_lrs']}"
        )
    else:
        detail = f"{what}: the parameters after training are not the expected ones"
        detail += _params_gap([got["params"]], [expected["params"]])
    diagnose(got[part], answers, detail=detail, rtol=rtol, atol=atol)


def _history_gap(got: list[dict], expected: list[dict]) -> str:
    """The first record of a history that differs, got and expected, for a detail."""

    def shown(record: dict) -> dict:
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in record.items()}

    if len(got) != len(expected):
        return f"the history has {len(got)} records, expected {len(expected)} (one per step)"
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        if not same(a, b, rtol=1e-5, atol=1e-7):
            return f"history[{i}] is {shown(a)}, expected {shown(b)}"
    return "the history matches, but the training did not"


@pytest.mark.check("fit-history")
def test_fit_history(student):
    check_fit(
        student,
        fit_config(1),
        "fit(steps=4, grad_accum=2, 3 train batches)",
        "history",
    )


@pytest.mark.check("fit-sets-lr")
def test_fit_sets_lr(student):
    check_fit(
        student,
        fit_config(2, steps=3),
        "fit(steps=3, lr_schedule=0.3 * 0.7**step)",
        "step_lrs",
    )


@pytest.mark.check("fit-param-groups")
def test_fit_param_groups(student):
    check_fit(
        student,
        fit_config(4, steps=3, optimizer="sgd-groups"),
        "fit(an optimizer with two param groups, lr_schedule=0.3 * 0.7**step)",
        "step_lrs",
    )


@pytest.mark.check("fit-leaves-batches")
def test_fit_leaves_batches(student):
    config = fit_config(5, steps=4, grad_accum=2, n_batches=3)
    got = run_fit(student, config, "fit(steps=4, grad_accum=2, 3 train batches)")
    before = config["train"]["batches"]
    if not same(got["train_after"], before, rtol=0, atol=0):
        after = got["train_after"]
        fail(
            f"fit left the caller's list of 3 train batches with "
            f"{len(after) if isinstance(after, list) else after!r} (or changed their tensors); "
            "expected it unchanged",
            "changed-batches",
        )


def _evaluated(run: dict) -> list:
    """The steps after which a run evaluated."""
    return [r["step"] for r in run["history"] if "eval_loss" in r]


@pytest.mark.check("fit-evaluates")
def test_fit_evaluates(student):
    config = fit_config(3, steps=5, eval_every=2, with_eval=True)
    expected = _evaluated(oracle.fit(config))
    answers = {
        key: later.fit(config, mistake=key).then(_evaluated)
        for key in ("eval-off-by-one", "no-final-eval")
    }
    got = run_fit(student, config, "fit(steps=5, eval_every=2)")
    evaluated = _evaluated(got)
    if evaluated != expected:
        diagnose(
            evaluated,
            answers,
            rtol=0,
            atol=0,
            detail=f"fit(steps=5, eval_every=2) evaluated after steps {evaluated}, "
            f"expected after steps {expected}",
        )


@pytest.mark.check("fit-no-eval")
@pytest.mark.parametrize("with_eval", [False, True], ids=["no-eval-batches", "no-eval-every"])
def test_fit_no_eval(student, with_eval):
    config = fit_config(7, steps=3, with_eval=with_eval)
    check_fit(student, config, "fit", "history")


@pytest.mark.check("fit-reshuffles")
def test_fit_reshuffles(student):
    # Three batches an epoch, two a step: steps straddle epochs, so the order matters.
    config = fit_config(8, steps=4, grad_accum=2, n_batches=3, loader=True)
    check_fit(student, config, "fit(a shuffling DataLoader)", "params")
