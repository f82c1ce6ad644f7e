"""Lesson 6 — The training objective: cross-entropy, the LM loss, perplexity.

The model outputs one score (logit) per vocabulary entry. Softmax turns the scores into
probabilities; the loss at a position is minus the log-probability of the true next token.
Averaged over positions this is cross-entropy, and its exponential is perplexity.
"""

from __future__ import annotations

import math

import torch  # noqa: F401  (the examples below use it; so will your code)
from torch import Tensor


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    """Mean cross-entropy over the targets that are not ``ignore_index``, computed by hand.

    For one row of logits z and target y: loss = logsumexp(z) - z[y], which is
    -log softmax(z)[y]. Compute logsumexp stably: subtract the row's maximum m first,
    logsumexp(z) = m + log(sum(exp(z - m))), so logits of 1e4 do not overflow to inf.
    Positions whose target equals ``ignore_index`` contribute nothing and are not counted in
    the mean. When every target is ignored, the mean of nothing is NaN (as in
    ``F.cross_entropy``).

    Shapes:
        logits: [N, V] float; targets: [N] integer. returns: a scalar tensor.

    Example:
        >>> cross_entropy(torch.zeros(2, 4), torch.tensor([1, -100]))  # uniform: log 4
        tensor(1.3863)
    """
    raise NotImplementedError('cross_entropy in exercises/objective.py is not implemented yet (lesson 6, The training objective: see course/chapters/06-objective.md#cross-entropy-by-hand)')


def lm_loss(logits: Tensor, input_ids: Tensor, ignore_index: int = -100) -> Tensor:
    """The language-modelling loss of logits computed on ``input_ids`` themselves.

    Position t predicts token t+1, so compare ``logits[:, :-1]`` with ``input_ids[:, 1:]``:
    the last position has no next token, and the first token is never a target.

    Shapes:
        logits: [B, T, V]; input_ids: [B, T]. returns: a scalar tensor.
    """
    raise NotImplementedError('lm_loss in exercises/objective.py is not implemented yet (lesson 6, The training objective: see course/chapters/06-objective.md#the-language-modelling-loss)')


def perplexity(loss: float | Tensor) -> float:
    """Perplexity: exp of a mean cross-entropy loss (in nats), as a Python float.

    A perplexity of 50 means the model is, on average, as unsure as if it picked uniformly
    among 50 tokens. A uniform guess over V tokens has loss log V and perplexity V.

    Example:
        >>> round(perplexity(math.log(50)), 6)
        50.0
    """
    raise NotImplementedError('perplexity in exercises/objective.py is not implemented yet (lesson 6, The training objective: see course/chapters/06-objective.md#perplexity)')


def pad_targets(targets: Tensor, pad_id: int, ignore_index: int = -100) -> Tensor:
    """Mark padding positions so the loss skips them.

    Rows of different length are padded to a common length with ``pad_id``; predicting
    padding teaches nothing, so every target equal to ``pad_id`` becomes ``ignore_index``.
    Returns a new tensor; ``targets`` is not changed.

    Example:
        >>> pad_targets(torch.tensor([[5, 6, 0, 0]]), pad_id=0)
        tensor([[   5,    6, -100, -100]])
    """
    raise NotImplementedError('pad_targets in exercises/objective.py is not implemented yet (lesson 6, The training objective: see course/chapters/06-objective.md#ignore-index-and-padding)')
