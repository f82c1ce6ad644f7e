"""Lesson 6, The training objective: public checks. The oracle is F.cross_entropy."""

from __future__ import annotations

import math

import pytest
import torch

from graders.answers import later, oracle
from graders.checking import (
    as_float,
    as_tensor,
    describe,
    expect_close,
    fail,
    randn,
    relabel,
    same,
    uniform,
)
from graders.client import StudentError

IGNORED = torch.tensor([3, -100, 9, -100, -100, 1, 4])


def ignores_by_default(student) -> bool:
    """Whether cross_entropy leaves -100 targets out as it should: a mistake that shows only
    with another ignore_index, or with nothing left, is named only when this holds (else the
    answer is that of the mistake this case shows)."""
    logits, targets = randn(2, 7, 10), relabel(8, IGNORED, 0, 10, keep=(-100,))
    try:
        got = student.call("cross_entropy", logits, targets)
    except StudentError:
        return False
    return same(got, oracle.cross_entropy(logits, targets, -100), rtol=1e-5, atol=1e-6)


def check_ce(student, logits, targets, what, ignore_index=None, **tolerance):
    args = (logits, targets) if ignore_index is None else (logits, targets, ignore_index)
    index = -100 if ignore_index is None else ignore_index
    expected = oracle.cross_entropy(logits, targets, index)
    mistakes = {
        key: later.cross_entropy(logits, targets, index, mistake=key)
        for key in ("mean-over-all", "sum", "negated", "no-max-back")
    }
    if index != -100 and ignores_by_default(student):  # it ignores -100 whatever it is given
        mistakes["hard-coded-ignore"] = later.cross_entropy(logits, targets, -100)
    try:
        result = student.call("cross_entropy", *args)
    except StudentError as error:
        if (targets == index).any() and (
            "out of bounds" in error.message or "out of range" in error.message
        ):
            fail(f"{what} raised {error.type_name}: {error.message}", "not-ignored")
        raise
    value = as_tensor(result, what)
    if bool(expected.isfinite()) and value.numel() == 1 and not bool(value.isfinite().all()):
        fail(f"{what} is {value.item()}, expected {expected.item():.6g}", "overflow")
    expect_close(result, expected, what, mistakes=mistakes, **tolerance)


@pytest.mark.check("ce-matches-torch")
def test_ce_matches_torch(student):
    check_ce(
        student,
        randn(1, 6, 10),
        relabel(7, torch.tensor([3, 0, 9, 9, 5, 1]), 0, 10),
        "cross_entropy(logits [6, 10], targets [6])",
    )


@pytest.mark.check("ce-ignore-index")
def test_ce_ignore_index(student):
    targets = relabel(8, IGNORED, 0, 10, keep=(-100,))
    check_ce(
        student,
        randn(2, 7, 10),
        targets,
        f"cross_entropy(logits [7, 10], targets {targets.tolist()})",
    )


@pytest.mark.check("ce-custom-ignore-index")
def test_ce_custom_ignore_index(student):
    targets = relabel(9, torch.tensor([3, 0, 2, 0, 1]), 0, 4, keep=(0,))
    check_ce(
        student,
        randn(3, 5, 4),
        targets,
        f"cross_entropy(logits [5, 4], targets {targets.tolist()}, ignore_index=0)",
        ignore_index=0,
    )


@pytest.mark.check("ce-large-logits")
def test_ce_large_logits(student):
    logits = 1e4 * randn(4, 5, 8)
    logits[0, 2] = 1e4
    # None ignored: this check is about stability only.
    targets = relabel(10, torch.tensor([2, 7, 0, 3, 5]), 0, 8)
    check_ce(student, logits, targets, "cross_entropy(logits around 1e4)", rtol=1e-5, atol=1e-2)


@pytest.mark.check("ce-all-ignored")
def test_ce_all_ignored(student):
    what = "cross_entropy with every target ignored"
    result = as_tensor(
        student.call("cross_entropy", randn(7, 3, 5), torch.full((3,), -100)), what, kind="float"
    )
    if result.shape == () and result.item() == 0 and ignores_by_default(student):
        fail(f"{what} gave 0, expected nan", "zero-when-all-ignored")
    if result.shape != () or not math.isnan(result.item()):
        fail(f"{what} gave {describe(result)} {result.tolist()}, expected nan")


@pytest.mark.check("ce-gradient")
def test_ce_gradient(student):
    logits, targets = randn(8, 6, 9), torch.tensor([2, -100, 0, 8, -100, 5])
    got = student.scenario("grad", args=[logits, targets], wrt=[0])
    grads = got["grads"] if isinstance(got, dict) else None
    if not isinstance(grads, list) or len(grads) != 1 or grads[0] is None:
        fail("no gradient reached the logits", "detached")
    expect_close(
        grads[0],
        oracle.cross_entropy_grad(logits, targets),
        "the gradient of cross_entropy with respect to the logits",
        rtol=1e-4,
        atol=1e-6,
    )


def check_lm_loss(student, logits, ids, what, ignore_index=None):
    args = (logits, ids) if ignore_index is None else (logits, ids, ignore_index)
    index = -100 if ignore_index is None else ignore_index
    expected = oracle.lm_loss(logits, ids, index)
    mistakes = {
        key: later.lm_loss(logits, ids, index, mistake=key)
        for key in ("not-shifted", "shifted-backwards", "sum", "row-means")
    }
    if index != -100:  # the answer of an lm_loss that does not pass ignore_index on
        mistakes["ignore-index-dropped"] = later.lm_loss(logits, ids, -100)
    expect_close(
        student.call("lm_loss", *args), expected, what, mistakes=mistakes, rtol=1e-4, atol=1e-5
    )


@pytest.mark.check("lm-loss-shifted")
def test_lm_loss_shifted(student):
    ids = relabel(11, torch.tensor([[1, 4, 2, 7, 7, 0], [3, 3, 5, 1, 6, 2]]), 0, 8)
    check_lm_loss(student, randn(5, 2, 6, 8), ids, "lm_loss(logits [2, 6, 8], input_ids [2, 6])")


@pytest.mark.check("lm-loss-ignore-index")
def test_lm_loss_ignore_index(student):
    ids = relabel(12, torch.tensor([[5, 4, 2, 0, 0], [3, 1, 0, 0, 0]]), 0, 6, keep=(0,))  # 0 pads
    check_lm_loss(
        student,
        randn(6, 2, 5, 6),
        ids,
        "lm_loss(logits [2, 5, 6], padded input_ids, ignore_index=0)",
        ignore_index=0,
    )


# A correct answer computed in float32 (``float(torch.tensor(loss).exp())``) is off by up to
# about 1e-6 relative for losses up to 20 (the loss rounded to float32, then exp); the mistakes
# this check names (base 2, no exp) are off by far more.
PERPLEXITY_RTOL = 1e-5


def check_perplexity(student, loss, what):
    expected = oracle.perplexity(loss)
    base_two = later.perplexity(loss, mistake="base-two")
    result = student.call("perplexity", loss)
    tensor = "tensor" if isinstance(result, torch.Tensor) else None  # a recognised mistake
    got = as_float(result, what, allow_int=False, mistake=tensor)
    if math.isclose(got, expected, rel_tol=PERPLEXITY_RTOL):
        return
    if math.isclose(got, base_two.get(), rel_tol=PERPLEXITY_RTOL):
        fail(f"{what} returned {got!r}, expected {expected!r}", "base-two")
    fail(f"{what} returned {got!r}, expected {expected!r}")


@pytest.mark.check("perplexity-exp")
@pytest.mark.parametrize("loss", [math.log(50), 0.0, 2.5])
def test_perplexity_exp(student, loss):
    loss = uniform(13, loss, 0.5, 6.0) if loss else loss  # 0 stays: perplexity 1
    check_perplexity(student, loss, f"perplexity({loss:.4g})")


@pytest.mark.check("perplexity-tensor-input")
def test_perplexity_tensor_input(student):
    loss = uniform(14, 1.75, 0.5, 6.0)
    check_perplexity(student, torch.tensor(loss), f"perplexity(tensor({loss:.4g}))")


def check_pad(student, targets, pad_id, what, ignore_index=None):
    args = (targets, pad_id) if ignore_index is None else (targets, pad_id, ignore_index)
    index = -100 if ignore_index is None else ignore_index
    expect_close(
        student.call("pad_targets", *args),
        oracle.pad_targets(targets, pad_id, index),
        what,
        mistakes={
            "zero-not-pad": later.pad_targets(targets, pad_id, index, mistake="zero-not-pad"),
            **({"hard-coded-ignore": later.pad_targets(targets, pad_id)} if index != -100 else {}),
        },
    )


@pytest.mark.check("pad-targets-marks-pad")
def test_pad_targets_marks_pad(student):
    check_pad(
        student,
        torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]]),
        0,
        "pad_targets([[5, 6, 0, 0], [7, 0, 8, 0]], pad_id=0)",
    )
    targets = relabel(15, torch.tensor([[4, 0, 9, 9, 9]]), 0, 50257, keep=(0, 9))
    check_pad(student, targets, 9, f"pad_targets({targets.tolist()}, pad_id=9)")


@pytest.mark.check("pad-targets-ignore-index")
def test_pad_targets_ignore_index(student):
    targets = relabel(16, torch.tensor([[3, 1, 2, 2]]), 0, 50257, keep=(2,))
    check_pad(
        student,
        targets,
        2,
        f"pad_targets({targets.tolist()}, pad_id=2, ignore_index=-1)",
        ignore_index=-1,
    )
