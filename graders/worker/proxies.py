"""The proxies: stand-ins for the functions the graded one builds on, answered by the checker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from .protocol import GENERATOR_STATE, MODULE, OPTIMIZER, TABLE, TABLE_SIZE, encode

# Dependencies. While one function is graded, the names of its own module that it builds on
# (lm_loss's cross_entropy, fit's train_step, ...) are replaced by *proxies*, so that every check
# grades one function and a mistake in one function costs only its own checks. A proxy holds no
# answer: it sends its inputs to the checker, which computes the answer with its trusted
# implementation (graders/secret/dependencies.py, in the checker's process) and sends back
# plain data, with what the trusted code did to the objects it was given (see _Crossing).
# The checker decides which names are proxied (a function's ``builds_on`` in the manifest) and
# answers only for the dependencies of the function it is grading at that moment, so a proxy
# kept for later answers nothing. Where the checker has no trusted implementations
# (the student release) a request names no proxies, and a function runs with the submission's
# own versions of its dependencies.


class DependencyRefused(RuntimeError):
    """The checker would not answer a proxy's question (not a dependency of this check)."""


class UseOwn(DependencyRefused):
    """The release's checker has no recorded answer for this question (graders/replayed.py):
    the submission's own function answers it, as it would without a proxy."""


# The errors a trusted dependency may raise in the caller, as the student's own would (an
# earlier lesson's add_positions past its table: ValueError); any other is a refusal.
RAISED = {kind.__name__: kind for kind in (ValueError, TypeError, IndexError, KeyError)}


# Every proxy is the same: it knows no lesson. What is not plain data crosses as a marker, by
# its type, and the checker's answer says what becomes of the caller's objects:
#   an nn.Module       {MODULE: [slot, state dict, training]}; afterwards it takes the gradients the
#                      checker computed and the training mode the checker's copy ended in;
#   a torch.Generator  {GENERATOR_STATE: [slot, state]}; afterwards it holds the state the
#                      checker's draws left, as if the caller's generator had drawn;
#   an optimizer       {OPTIMIZER: slot}; the steps the checker's code takes (step, zero_grad)
#                      are taken here by the caller's own optimizer, with its own hooks, state
#                      and learning rates;
#   an iterator        the list of its items (a generator, a DataLoader: read once);
#   a dict of TABLE_SIZE entries or more (bpe_merge's ranks) {TABLE: key}: it crosses once
#                      per request, as the bytes of its encoding ("NAME.table" answers with
#                      its key; the checker decodes bytes it has seen before only once), then
#                      as its key.
# A dependency that is a class (a Dataset such as TokenWindows) answers with its items, and
# the proxy gives back a Dataset that holds them.
PLAIN = (Tensor, str, bytes, int, float, bool, type(None))


def _model_state(model: nn.Module) -> dict[str, Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


class _Answered(Dataset):
    """A dependency's Dataset, its items computed by the checker."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


class _Crossing:
    """One proxy call: its arguments as plain data, and the caller's objects they stand for."""

    def __init__(self, name: str, ask: Callable[[str, Any], Any], tables: list) -> None:
        self.name, self.ask, self.tables = name, ask, tables
        self.modules: list[nn.Module] = []
        self.generators: list[torch.Generator] = []
        self.optimizers: list[torch.optim.Optimizer] = []

    def plain(self, value: Any) -> Any:
        if isinstance(value, PLAIN):
            return value
        if isinstance(value, nn.Module):
            self.modules.append(value)
            return {MODULE: [len(self.modules) - 1, _model_state(value), value.training]}
        if isinstance(value, torch.Generator):
            self.generators.append(value)
            return {GENERATOR_STATE: [len(self.generators) - 1, value.get_state()]}
        if isinstance(value, torch.optim.Optimizer):
            self.optimizers.append(value)
            return {OPTIMIZER: len(self.optimizers) - 1}
        if isinstance(value, dict):
            if len(value) >= TABLE_SIZE:
                return {TABLE: self.table(value)}
            return {key: self.plain(item) for key, item in value.items()}
        if isinstance(value, tuple):
            return tuple(self.plain(item) for item in value)
        if isinstance(value, list) or hasattr(value, "__iter__"):
            return [self.plain(item) for item in value]
        return value  # not plain data: the question cannot be sent, and says so

    def table(self, mapping: dict) -> int:
        key = next((key for known, key in self.tables if known is mapping), None)
        if key is None:
            # as its own encoded bytes: the checker decodes a table it has seen once by
            # their digest, not again for every request (the GPT-2 ranks take a second)
            key = self.ask(f"{self.name}.table", encode(dict(mapping)))
            self.tables.append((mapping, key))
        return key

    def settle(self, effects: list) -> None:
        """What the checker's code did to the objects it was given, done to the caller's."""
        for kind, slot, detail in effects:
            if kind == "grads":
                params = list(self.modules[slot].parameters())
                for param, grad in zip(params, detail, strict=True):
                    param.grad = grad
            elif kind == "train":
                self.modules[slot].train(detail)
            elif kind == "generator":
                self.generators[slot].set_state(detail)
            elif kind == "step":
                self.optimizers[slot].step()
            elif kind == "zero_grad":
                self.optimizers[slot].zero_grad(set_to_none=detail)


def make_proxies(ask: Callable[[str, Any], Any]) -> _Proxies:
    """The stand-ins the worker plugs in; ``ask(name, question)`` is the checker's answer."""
    tables: list[tuple[dict, int]] = []  # tables sent in this request, kept alive

    def proxy_of(name: str) -> Callable:
        def proxy(*args: Any, **kwargs: Any) -> Any:
            crossing = _Crossing(name, ask, tables)
            asked, named = _positional(proxies.own.get(name), args, kwargs)
            question = [crossing.plain(list(asked)), crossing.plain(named)]
            try:
                value, effects, dataset = ask(name, question)
            except UseOwn:
                own = proxies.own.get(name)
                if own is None:
                    raise
                return own(*args, **kwargs)
            crossing.settle(effects)
            return _Answered(value) if dataset else value

        proxy.__name__ = proxy.__qualname__ = name.rpartition(".")[2]
        return proxy

    proxies = _Proxies(proxy_of, tables)
    return proxies


def _positional(own: Callable | None, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """An earlier lesson's function's arguments as its own signature binds them, positional
    where they can be: ``attention(q, k, v, mask=m)`` asks what ``attention(q, k, v, m)`` does
    (the release matches questions with the recorded ones). As given where it cannot bind."""
    if own is None or not kwargs:
        return args, kwargs
    import inspect

    try:
        bound = inspect.signature(own).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    return tuple(bound.args), dict(bound.kwargs)


class _Proxies(dict):
    """The proxies by name, each made on first use."""

    def __init__(self, proxy_of: Callable[[str], Callable], tables: list) -> None:
        super().__init__()
        self.proxy_of = proxy_of
        self.tables = tables  # the checker forgets its tables after every request
        # an earlier lesson's function as the submission wrote it, by the proxy's name, while
        # the proxy stands in for it (the release falls back on it: UseOwn)
        self.own: dict[str, Callable | None] = {}

    def __missing__(self, name: str) -> Callable:
        self[name] = proxy = self.proxy_of(name)
        return proxy
