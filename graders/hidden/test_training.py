"""Lesson 8, The training loop: hidden checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.checking import hidden_settings
from graders.public.test_training import (
    STEP_MISTAKES,
    adamw_case,
    check_adamw,
    check_eval_loss,
    check_fit,
    check_params,
    check_schedule,
    eval_config,
    fit_config,
    run_step,
    step_config,
)


@pytest.mark.check("lr-random")
@hidden_settings
@given(
    max_lr=st.floats(1e-5, 1.0),
    ratio=st.floats(0, 1),
    warmup=st.integers(0, 50),
    extra=st.integers(1, 200),
    data=st.data(),
)
def test_lr_random(student, max_lr, ratio, warmup, extra, data):
    max_steps = warmup + extra
    steps = data.draw(st.lists(st.integers(0, max_steps + 20), min_size=1, max_size=6))
    check_schedule(
        student,
        steps,
        "lr_at",
        max_lr=max_lr,
        min_lr=max_lr * ratio,
        warmup_steps=warmup,
        max_steps=max_steps,
    )


@pytest.mark.check("train-step-adamw")
@hidden_settings
@given(
    seed=st.integers(0, 10_000),
    n_micro=st.integers(1, 4),
    B=st.integers(1, 3),
    T=st.integers(1, 6),
    clip=st.sampled_from([1e9, 1.0, 0.01]),
    steps=st.integers(1, 2),
)
def test_train_step_adamw(student, seed, n_micro, B, T, clip, steps):
    config = step_config(
        seed,
        n_micro,
        steps=steps,
        max_grad_norm=clip,
        optimizer="adamw",
        lr=0.01,
        start_training=seed % 2 == 0,
        B=B,
        T=T,
    )
    check_params(run_step(student, config), config, "train_step with AdamW", STEP_MISTAKES)


@pytest.mark.check("evaluate-random")
@hidden_settings
@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), start=st.booleans())
def test_evaluate_random(student, seed, n, start):
    # The loss alone: the model's mode and grad mode are what the student's process reports,
    # a claim, which the public evaluate-mode-and-batches check holds at its one point.
    check_eval_loss(student, eval_config(seed, n, start_training=start), "evaluate")


@pytest.mark.check("fit-random")
@hidden_settings
@given(
    seed=st.integers(0, 10_000),
    steps=st.integers(1, 5),
    grad_accum=st.integers(1, 3),
    n_batches=st.integers(1, 4),
    eval_every=st.one_of(st.none(), st.integers(1, 3)),
    with_eval=st.booleans(),
)
def test_fit_random(student, seed, steps, grad_accum, n_batches, eval_every, with_eval):
    config = fit_config(
        seed,
        steps=steps,
        grad_accum=grad_accum,
        n_batches=n_batches,
        eval_every=eval_every,
        with_eval=with_eval,
    )
    check_fit(student, config, "fit", "history", ())


@pytest.mark.check("adamw-random")
@hidden_settings
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 3),
    steps=st.integers(1, 4),
    lr=st.floats(1e-4, 0.1),
    beta1=st.sampled_from([0.0, 0.5, 0.9]),
    beta2=st.sampled_from([0.9, 0.95, 0.999]),
    eps=st.sampled_from([1e-8, 1e-6]),
    weight_decay=st.sampled_from([0.0, 0.01, 0.1]),
)
def test_adamw_random(student, seed, n, steps, lr, beta1, beta2, eps, weight_decay):
    shapes = [[1 + (seed + i) % 4, 1 + i] for i in range(n)]
    check_adamw(
        student,
        adamw_case(seed, shapes, steps),
        "adamw_step",
        lr=lr,
        betas=(beta1, beta2),
        eps=eps,
        weight_decay=weight_decay,
    )
