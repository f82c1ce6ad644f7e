"""The toy model and the scenarios, run by the worker around the student's function and by the
checker around its trusted one (the oracles), so both answer the very same question."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

TOO_LONG = "grader's toy model: got {T} positions but it has only {L} (context_length)"

# The toy model and the scenarios. Each scenario takes the function under test first, so the
# checker runs the very same scenario with a trusted function to get the expected answer.


class ToyLM(nn.Module):
    """A tiny next-token model that records, for every forward, its mode, grad mode and shape.

    Position t's logits depend on tokens 0..t (a running mean of token + position vectors), so
    generation results depend on which tokens are in the context. Longer inputs than
    ``context_length`` raise, like a GPT with a learned position table.
    """

    def __init__(self, vocab: int = 11, dim: int = 8, context_length: int = 16, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.wte = nn.Parameter(torch.randn(vocab, dim, generator=g))
        self.wpe = nn.Parameter(0.3 * torch.randn(context_length, dim, generator=g))
        self.head = nn.Parameter(torch.randn(dim, vocab, generator=g))
        self.bias = nn.Parameter(0.1 * torch.randn(vocab, generator=g))
        self.records: list[dict] = []

    def forward(self, ids: Tensor) -> Tensor:
        T = ids.shape[-1]
        L = self.wpe.shape[0]  # the context length
        if T > L:
            raise ValueError(TOO_LONG.format(T=T, L=L))
        self.records.append(
            {"training": self.training, "grad": torch.is_grad_enabled(), "shape": list(ids.shape)}
        )
        h = self.wte[ids] + self.wpe[:T]
        h = h.cumsum(dim=-2) / torch.arange(1, T + 1, dtype=h.dtype).unsqueeze(-1)
        return torch.tanh(h) @ self.head + self.bias


def make_optimizer(model: nn.Module, kind: str = "sgd", lr: float = 0.1) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    if kind == "sgd-groups":  # the embeddings in a group of their own, as weight decay splits
        params = list(model.parameters())
        return torch.optim.SGD([{"params": params[:2]}, {"params": params[2:]}], lr=lr)
    raise ValueError(f"unknown optimizer {kind!r}")


def _params(model: nn.Module) -> list[Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _batches(batches: list) -> list[tuple[Tensor, Tensor]]:
    return [(x, y) for x, y in batches]


def scenario_token_windows(
    cls: Any, ids: Any, context_length: int, stride: int, limit: int = 64
) -> dict:
    dataset = cls(ids, context_length, stride)
    n = len(dataset)
    return {
        "len": n,
        "items": [dataset[i] for i in range(min(n, limit))],
        "is_dataset": isinstance(dataset, Dataset),
    }


def scenario_make_loader(
    fn: Callable,
    ids: Any,
    batch_size: int,
    context_length: int,
    stride: int,
    epochs: int = 1,
    **options: Any,
) -> dict:
    torch.manual_seed(0)  # the global random state, to see whether the loader draws from it
    loader = fn(ids, batch_size, context_length, stride, **options)
    global_before = torch.random.get_rng_state()
    batches = [[list(batch) for batch in loader] for _ in range(epochs)]
    generator = getattr(loader, "generator", None)
    seed = generator.initial_seed() if isinstance(generator, torch.Generator) else None
    return {
        "is_loader": isinstance(loader, DataLoader),
        "epochs": batches,
        "generator_seed": seed,
        "global_drawn": not torch.equal(global_before, torch.random.get_rng_state()),
    }


def scenario_train_step(
    fn: Callable, model: dict, optimizer: dict, steps: list[dict], start_training: bool = False
) -> dict:
    net = ToyLM(**model)
    opt = make_optimizer(net, **optimizer)
    net.train(start_training)
    losses, params, lists = [], [], []
    for step in steps:
        options = {k: v for k, v in step.items() if k != "micro_batches"}
        lists.append(_batches(step["micro_batches"]))
        losses.append(fn(net, lists[-1], opt, **options))
        params.append(_params(net))
    return {
        "losses": losses,
        "params": params,
        "micro_batches_after": lists,  # the caller's lists, as the function left them
        "grads": [None if p.grad is None else p.grad.detach().clone() for p in net.parameters()],
        "records": net.records,
    }


def scenario_evaluate(
    fn: Callable, model: dict, batches: list, start_training: bool = True, one_shot: bool = False
) -> dict:
    net = ToyLM(**model)
    net.train(start_training)
    before = _params(net)
    data = (batch for batch in _batches(batches)) if one_shot else _batches(batches)
    loss = fn(net, data)
    return {
        "loss": loss,
        "batches_after": None if one_shot else data,  # the caller's list, as evaluate left it
        "training_after": net.training,
        "records": net.records,
        "changed": any(not torch.equal(a, b) for a, b in zip(before, _params(net), strict=True)),
        "grads": [p.grad is not None for p in net.parameters()],
    }


def scenario_fit(
    fn: Callable,
    model: dict,
    optimizer: dict,
    train: dict,
    steps: int,
    grad_accum: int,
    lr_base: float,
    lr_decay: float,
    eval_batches: list | None = None,
    eval_every: int | None = None,
) -> dict:
    net = ToyLM(**model)
    opt = make_optimizer(net, **optimizer)
    seen: list[list[float]] = []
    opt.register_step_pre_hook(lambda o, a, k: seen.append([g["lr"] for g in o.param_groups]))
    if "seed" in train:  # a shuffling DataLoader: a fresh iter() reshuffles
        x, y = train["tensors"]
        train_batches: Iterable = DataLoader(
            torch.utils.data.TensorDataset(x, y),
            batch_size=train["batch_size"],
            shuffle=True,
            generator=torch.Generator().manual_seed(train["seed"]),
        )
    else:
        train_batches = _batches(train["batches"])

    def schedule(step: int) -> float:
        return lr_base * lr_decay**step

    history = fn(
        net,
        opt,
        train_batches,
        steps=steps,
        grad_accum=grad_accum,
        lr_schedule=schedule,
        eval_batches=None if eval_batches is None else _batches(eval_batches),
        eval_every=eval_every,
    )
    after = train_batches if isinstance(train_batches, list) else None  # as fit left it
    return {"history": history, "step_lrs": seen, "params": _params(net), "train_after": after}


def scenario_generate(
    fn: Callable,
    model: dict,
    ids: Tensor,
    max_new_tokens: int,
    context_length: int,
    seed: int | None = None,
    **options: Any,
) -> dict:
    net = ToyLM(**model)
    net.eval()
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    prompt = ids.clone()
    out = fn(net, prompt, max_new_tokens, context_length, generator=generator, **options)
    return {"ids": out, "records": net.records, "prompt_after": prompt}


def scenario_grad(
    fn: Callable,
    args: list,
    wrt: list[int],
    kwargs: dict | None = None,
    weights: Tensor | None = None,
) -> dict:
    """The gradients of ``out`` (or of ``(out * weights).sum()``) with respect to ``args[wrt]``;
    None for each where the output is not connected to the inputs at all."""
    args = [a.clone().requires_grad_(True) if i in wrt else a for i, a in enumerate(args)]
    out = fn(*args, **(kwargs or {}))
    if not isinstance(out, Tensor):
        raise TypeError(f"expected a tensor to differentiate, got {type(out).__name__}")
    if not out.requires_grad:  # detached: no gradient can reach the inputs
        return {"value": out.detach(), "grads": [None for _ in wrt]}
    out.backward(weights)
    return {"value": out.detach(), "grads": [args[i].grad for i in wrt]}


def scenario_sample(
    fn: Callable,
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    draws: int = 1,
) -> dict:
    """``draws`` calls with one seeded generator, then what that generator gives next: a
    function that draws with the caller's generator advances it exactly as PyTorch's draw does."""
    generator = torch.Generator().manual_seed(seed)
    samples = [fn(logits, temperature, top_k, generator) for _ in range(draws)]
    return {"samples": samples, "next": torch.randint(0, 2**30, (4,), generator=generator)}


# The scenarios that make an optimizer (which imports torch._dynamo: see serve_lessons).
OPTIMIZING_SCENARIOS = frozenset({"train_step", "evaluate", "fit"})
SCENARIOS: dict[str, Callable[..., dict]] = {
    "token_windows": scenario_token_windows,
    "make_loader": scenario_make_loader,
    "train_step": scenario_train_step,
    "evaluate": scenario_evaluate,
    "fit": scenario_fit,
    "generate": scenario_generate,
    "grad": scenario_grad,
    "sample": scenario_sample,
}
