"""graders/replayed.py: the student release answers an earlier lesson's function with the answer
recorded for the question it matches (close tensors, equal numbers and structure, a large
check input by its digest), raises what the trusted code raised, and leaves a question nothing
recorded matches to the submission's own function. The questions are recorded here as the
release records them: the instructor's Answers, live, while graders/answers.py records."""

from __future__ import annotations

import pytest
import torch

from graders import answers
from graders.replayed import Raised, Refused, Replayed, Unrecorded, matches
from graders.secret.dependencies import Answers


def _qkv(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 2, 5, 4, generator=g) for _ in range(3)]


MASK = torch.ones(5, 5, dtype=torch.bool).tril()
BIG = torch.arange(70_000, dtype=torch.float32).reshape(-1, 1)  # over RECORDED_ELEMENTS
IDS = torch.tensor([[3, 69_999, 7]])


@pytest.fixture
def replayed(monkeypatch) -> Replayed:
    """The questions a release of the block lesson records, replayed from that recording."""
    live = Answers()
    with answers.recording() as recorded, answers.lesson("block"):
        live.allow("block.self_attention")
        live.answer("attention.attention", [[*_qkv(0), MASK], {}])
        live.answer("attention.causal_mask", [[5], {}])
        live.allow("block.gpt_logits")
        live.answer("embeddings.lookup", [[BIG, IDS], {}])
        with pytest.raises(Raised) as raised:
            live.answer("embeddings.add_positions", [[torch.zeros(1, 9, 8), torch.ones(6, 8)], {}])
        assert raised.value.kind == "ValueError"
    table = dict(recorded["block"])
    stored = [entry for key, entry in table.items() if key.startswith(answers.DEPENDENCY)]
    assert len(stored) == 4
    # the large table is recorded as its digest, not its 70,000 numbers
    lookup = next(e for e in stored if isinstance(e["question"][0][0], dict))
    assert lookup["question"][0][0][answers.DIGESTED]
    monkeypatch.setattr(answers, "_table", lambda: table)
    monkeypatch.setattr(answers, "_dependencies", None)
    return Replayed()


def test_a_close_question_gets_the_recorded_answer(replayed):
    replayed.allow("block.self_attention")
    q, k, v = _qkv(0)
    value, effects, dataset = replayed.answer(
        "attention.attention", [[q + 1e-7, k, v - 1e-7, MASK], {}]
    )
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=MASK)
    assert torch.allclose(value, expected, atol=1e-6) and effects == [] and not dataset
    assert torch.equal(replayed.answer("attention.causal_mask", [[5], {}])[0], MASK)


@pytest.mark.parametrize(
    "question",
    [
        [[*_qkv(1), MASK], {}],  # other numbers: a mistake upstream
        [[*_qkv(0)], {}],  # no mask
        [[*_qkv(0)], {"mask": MASK}],  # the same, but not as the release recorded it
        [[*(t[:, :, :4] for t in _qkv(0)), MASK], {}],  # other shapes
    ],
)
def test_a_question_nothing_recorded_matches_goes_to_the_submissions_own(replayed, question):
    replayed.allow("block.self_attention")
    with pytest.raises(Unrecorded, match="recorded no answer for attention.attention"):
        replayed.answer("attention.attention", question)
    with pytest.raises(Unrecorded):
        replayed.answer("attention.causal_mask", [[6], {}])


def test_only_the_graded_functions_earlier_dependencies_are_answered(replayed):
    replayed.allow("block.self_attention")
    assert set(replayed.names("block.transformer_block")) == {
        "attention.attention",
        "attention.causal_mask",
    }
    assert replayed.names("block.gelu") == []
    with pytest.raises(Refused, match="not a dependency") as refused:
        replayed.answer("embeddings.lookup", [[BIG, IDS], {}])
    assert not isinstance(refused.value, Unrecorded)
    replayed.allow(None)
    with pytest.raises(Refused, match="not a dependency"):
        replayed.answer("attention.causal_mask", [[5], {}])


def test_a_large_input_must_be_the_checks_own_and_an_error_is_raised_again(replayed):
    replayed.allow("block.gpt_logits")
    rows = replayed.answer("embeddings.lookup", [[BIG.clone(), IDS], {}])[0]
    assert torch.equal(rows, BIG[IDS])
    changed = BIG.clone()
    changed[5, 0] += 1  # one number of 70,000: not the check's table
    with pytest.raises(Unrecorded):
        replayed.answer("embeddings.lookup", [[changed, IDS], {}])
    with pytest.raises(Raised, match="exceeds the position table") as raised:
        replayed.answer("embeddings.add_positions", [[torch.zeros(1, 9, 8), torch.ones(6, 8)], {}])
    assert raised.value.kind == "ValueError"


def test_matching_compares_structure_numbers_and_tensors():
    x = torch.linspace(-1, 1, 12).reshape(3, 4)
    assert matches([x, 3, "a", None, (1.0,)], [x + 1e-7, 3, "a", None, (1.0 + 1e-9,)])
    assert not matches([x], [x + 1e-3])
    assert not matches([x], [x.double()])
    assert not matches([x], [x.reshape(4, 3)])
    assert not matches([3], [3.0]) and not matches([True], [1]) and not matches([x], [x, x])
    assert matches({"a": x}, {"a": x}) and not matches({"a": x}, {"b": x})
    ids = torch.tensor([1, 2])
    assert matches(ids, ids.clone()) and not matches(ids, torch.tensor([1, 3]))
    digest = answers.digested(x)
    assert matches(digest, x.clone()) and not matches(digest, x + 1e-7)
