"""The worker's proxies know no lesson: a model, a generator, an optimizer, an iterator, a
large table or a Dataset class crosses by its type, and the caller's own objects end as the
trusted implementation left the checker's copies (graders/worker/proxies.py, graders/secret/
dependencies.py). Here the checker answers in this process, through the same plain-data
encoding as the socket."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset

from graders.secret import trusted
from graders.secret.dependencies import Answers, Refused
from graders.worker import protocol, scenarios
from graders.worker.proxies import DependencyRefused, make_proxies


@pytest.fixture
def answered() -> tuple[Answers, dict]:
    answers = Answers()

    def ask(name: str, question: object) -> object:
        try:
            value = answers.answer(name, protocol.decode(protocol.encode(question)))
        except Refused as refusal:
            raise DependencyRefused(str(refusal)) from None
        return protocol.decode(protocol.encode(value))

    return answers, make_proxies(ask)


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 11, (2, 8), generator=g), torch.randint(0, 11, (2, 8), generator=g)


def test_a_generator_advances_as_the_trusted_draw_advanced_it(answered):
    answers, proxies = answered
    answers.allow("generation.generate")
    logits = torch.randn(2, 11, generator=torch.Generator().manual_seed(0))
    mine, theirs = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(
        proxies["sample_next"](logits, 0.8, 5, mine), trusted.sample_next(logits, 0.8, 5, theirs)
    )
    assert torch.equal(mine.get_state(), theirs.get_state())


def test_the_callers_optimizer_takes_the_step_the_trusted_train_step_takes(answered):
    answers, proxies = answered
    answers.allow("training.fit")
    model, reference = scenarios.ToyLM(), scenarios.ToyLM()
    model.eval()  # the trusted step puts the model in training mode: so must the proxy
    mine = torch.optim.AdamW(model.parameters(), lr=0.1)
    theirs = torch.optim.AdamW(reference.parameters(), lr=0.1)
    batches = [_batch(0), list(_batch(1))]  # tuples and lists alike
    loss = proxies["train_step"](model, batches, mine, 0.5)
    assert loss == trusted.train_step(reference, [_batch(0), _batch(1)], theirs, 0.5)
    for param, expected in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(param, expected) and param.grad is None
    assert model.training and mine.state_dict()["state"].keys() == {0, 1, 2, 3}


def test_evaluate_reads_an_iterator_once_and_leaves_the_mode_as_it_was(answered):
    answers, proxies = answered
    answers.allow("training.fit")
    model = scenarios.ToyLM()
    model.eval()
    loss = proxies["evaluate"](model, (batch for batch in [_batch(0), _batch(1)]))
    assert loss == trusted.evaluate(scenarios.ToyLM(), [_batch(0), _batch(1)])
    assert not model.training


def test_a_dataset_dependency_gives_a_dataset_of_the_trusted_items(answered):
    answers, proxies = answered
    answers.allow("windows.make_loader")
    made = proxies["TokenWindows"](torch.arange(40), 8, stride=4)
    expected = trusted.TokenWindows(torch.arange(40), 8, 4)
    assert isinstance(made, Dataset) and len(made) == len(expected) == 8
    assert all(torch.equal(made[i][1], expected[i][1]) for i in range(len(made)))


def test_a_large_table_crosses_once_per_request(answered):
    answers, proxies = answered
    answers.allow("tokens.encode")
    ranks = {bytes([i]): i for i in range(256)}
    ranks |= {bytes([i, j]): 256 + 256 * i + j for i in range(97, 100) for j in range(256)}
    assert len(ranks) >= protocol.TABLE_SIZE
    for piece in (b"abc", b"cab", b"ca"):
        assert proxies["bpe_merge"](piece, ranks) == trusted.bpe_merge(piece, ranks)
    assert len(proxies.tables) == len(answers.vocabularies) == 1
    small = {bytes([i]): i for i in range(256)} | {b"ab": 256}
    assert proxies["bpe_merge"](b"abc", small) == [256, 99]  # a small one travels inline
    assert len(answers.vocabularies) == 1
    with pytest.raises(DependencyRefused, match="too long to merge"):
        proxies["bpe_merge"](b"a" * 5000, small)


def test_a_table_seen_before_is_not_decoded_again(answered, monkeypatch):
    """The GPT-2 ranks cross for every request that merges: their bytes' digest finds the
    table decoded for an earlier request (of this grading run or an earlier one in the same
    process), and other bytes are decoded (and checked) anew."""
    from graders.secret import dependencies

    answers, proxies = answered
    monkeypatch.setattr(dependencies, "_DECODED", {})
    ranks = {bytes([i]): i for i in range(256)}
    ranks |= {bytes([i, j]): 256 + 256 * i + j for i in range(97, 100) for j in range(256)}
    decoded = []
    real = dependencies._decoded_table
    monkeypatch.setattr(dependencies, "_decoded_table", lambda b: decoded.append(b) or real(b))
    for _ in range(3):  # three requests, as three encode checks make
        answers.allow("tokens.encode")
        proxies.tables.clear()
        assert proxies["bpe_merge"](b"ab", ranks) == trusted.bpe_merge(b"ab", ranks)
    assert len(decoded) == 1
    answers.allow("tokens.encode")
    proxies.tables.clear()
    other = ranks | {b"ab": 99999}
    assert proxies["bpe_merge"](b"ab", other) == [99999]
    assert len(decoded) == 2 and len(dependencies._DECODED) == 2
    later = Answers()  # the next grading run of this process: nothing decoded again
    later.allow("tokens.encode")
    later.answer("bpe_merge.table", protocol.encode(ranks))
    assert len(decoded) == 2


@pytest.mark.parametrize(
    ("question", "why"),
    [
        (lambda: {b"a": 1}, "encoded bytes"),
        (lambda: b"not an archive", "not plain data"),
        (lambda: protocol.encode([1, 2, 3]), "must be a dict"),
        # made when the test runs, not when every test worker collects it: 0.6 CPU-seconds
        (lambda: protocol.encode({i: i for i in range(1 << 18)}), "too long"),
    ],
    ids=["not-bytes", "not-an-archive", "a-list", "too-long"],
)
def test_a_table_that_is_no_table_is_refused(question, why, monkeypatch):
    from graders.secret import dependencies

    monkeypatch.setattr(dependencies, "_DECODED", {})
    answers = Answers()
    answers.allow("tokens.encode")
    with pytest.raises(Refused, match=why):
        answers.answer("bpe_merge.table", question())
    assert not dependencies._DECODED


def test_an_earlier_lessons_function_is_asked_as_its_signature_binds_and_falls_back_to_its_own():
    """The release matches recorded questions as asked (graders/replayed.py): a keyword the
    submission's own function would take by position crosses by position; where the release's
    checker has no answer (UseOwn), the submission's own function answers, with the caller's
    arguments as given."""
    from graders.worker.proxies import UseOwn

    asked: list = []

    def ask(name: str, question: object) -> object:
        asked.append((name, question))
        raise UseOwn("no recorded answer")

    def own(q, k, v, mask=None):
        return ("own", mask)

    proxies = make_proxies(ask)
    proxies.own["attention.attention"] = own
    proxy = proxies["attention.attention"]
    assert proxy.__name__ == "attention"
    assert proxy(1, 2, 3, mask=4) == ("own", 4)
    assert asked == [("attention.attention", [[1, 2, 3, 4], {}])]
    proxies.own.clear()  # a proxy kept after its call has no own function to fall back on
    with pytest.raises(UseOwn):
        proxy(1, 2, 3, mask=4)
    assert asked[-1] == ("attention.attention", [[1, 2, 3], {"mask": 4}])


def test_a_trusted_dependencys_value_error_is_raised_in_the_caller(answered):
    """gpt_logits' check of a sequence longer than the position table grades the caller's
    handling of add_positions' ValueError, which the trusted add_positions raises."""
    from graders.replayed import Raised

    answers, _ = answered
    answers.allow("block.gpt_logits")
    with pytest.raises(Raised, match="exceeds the position table") as raised:
        answers.answer("embeddings.add_positions", [[torch.zeros(1, 9, 4), torch.ones(6, 4)], {}])
    assert raised.value.kind == "ValueError"
    answers.allow("block.self_attention")
    with pytest.raises(Refused, match="not a dependency"):
        answers.answer("embeddings.add_positions", [[torch.zeros(1, 2, 4), torch.ones(6, 4)], {}])
