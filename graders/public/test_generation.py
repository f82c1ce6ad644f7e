"""Lesson 9, Generation and GPT-2 weights: public checks.

Sampling is compared draw for draw with the same seeded generator: the contract fixes one
torch.multinomial call, so a correct sample_next gives exactly the trusted one's tokens.
"""

from __future__ import annotations

import pytest
import torch

from graders.answers import later, oracle, recorded
from graders.checking import (
    as_bool,
    as_list,
    as_tensor,
    diagnose,
    expect_close,
    fail,
    generator,
    randn,
    same,
    seed_for,
)
from graders.client import StudentError
from graders.gpt2 import gpt2_state
from graders.plugin import seeded

# -- sample_next ----------------------------------------------------------------------------------


def check_sample(
    student, logits, what, *, temperature=1.0, top_k=None, seed=0, mistakes: dict | None = None
) -> None:
    seed = seed_for(seed)  # no release's: the secret seed's, at autograde
    expected = oracle.sample_next(logits, temperature, top_k, seed)
    apart = oracle.sample_next(logits, temperature, top_k, seed + 1)  # another seed's draw
    answers = {"shape": expected.unsqueeze(-1), "squeezed-all": expected.squeeze()}
    for key, change in (mistakes or {}).items():
        args = {"logits": logits, "temperature": temperature, "top_k": top_k, "seed": seed}
        answers[key] = later.sample_next(**(args | change))
    if top_k is not None and top_k > logits.shape[-1]:
        # k capped at V or not shows only where k + 1 tokens would not be kept anyway.
        fewer = {"logits": logits, "temperature": temperature, "top_k": 2, "seed": seed}
        right, more = oracle.sample_next(**fewer), later.sample_next(**(fewer | {"top_k": 3}))
    try:
        result = student.call("sample_next", logits, temperature, top_k, seeded(seed))
    except StudentError as error:
        if top_k is not None and top_k > logits.shape[-1]:
            try:
                small = student.call("sample_next", logits, temperature, 2, seeded(seed))
            except StudentError:
                small = None
            if not same(small, right) and same(small, more.get()):
                fail(f"{what} raised {error.type_name}: {error.message}", "top-k-one-more")
            if "range" in error.message:
                fail(f"{what} raised {error.type_name}: {error.message}", "not-capped")
        raise
    if not same(result, expected) and temperature != 0:
        # Two generators seeded alike give the same draws, and two seeded apart other draws,
        # unless the draw ignores them.
        again = student.call("sample_next", logits, temperature, top_k, seeded(seed))
        if not same(result, again):
            fail(
                f"{what}: two calls with generators seeded alike drew differently", "own-generator"
            )
        other = student.call("sample_next", logits, temperature, top_k, seeded(seed + 1))
        if same(result, other) and not same(expected, apart):
            fail(f"{what}: generators seeded apart gave the same draws", "own-generator")
    expect_close(result, expected, what, mistakes=answers)


@pytest.mark.check("sample-greedy")
def test_sample_greedy(student):
    logits = 2 * randn(1, 6, 9)
    expect_close(
        student.call("sample_next", logits, 0.0),
        oracle.sample_next(logits, 0.0),
        "sample_next(logits [6, 9], temperature=0)",
    )
    expect_close(
        student.call("sample_next", logits, 0, 3),
        oracle.sample_next(logits, 0.0, 3),
        "sample_next(logits [6, 9], temperature=0, top_k=3)",
    )


@pytest.mark.check("sample-seeded")
def test_sample_seeded(student):
    check_sample(
        student, 2 * randn(2, 64, 12), "sample_next(logits [64, 12], seeded generator)", seed=11
    )
    # One row: the result is still one token per row, shape [1].
    check_sample(student, 2 * randn(8, 1, 12), "sample_next(logits [1, 12], seeded generator)")


@pytest.mark.check("sample-temperature")
@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_sample_temperature(student, temperature):
    logits = 2 * randn(3, 64, 10)
    check_sample(
        student,
        logits,
        f"sample_next(logits [64, 10], temperature={temperature})",
        temperature=temperature,
        seed=12,
        mistakes={"multiplies": {"logits": logits * temperature**2}},
    )


@pytest.mark.check("sample-top-k")
def test_sample_top_k(student):
    check_sample(
        student,
        2 * randn(4, 64, 10),
        "sample_next(logits [64, 10], top_k=3)",
        top_k=3,
        seed=13,
        mistakes={"top-k-ignored": {"top_k": None}, "top-k-one-more": {"top_k": 4}},
    )


@pytest.mark.check("sample-top-k-capped")
def test_sample_top_k_capped(student):
    check_sample(
        student, 2 * randn(5, 32, 6), "sample_next(logits [32, 6], top_k=50)", top_k=50, seed=14
    )


def check_draws(student, logits, what, *, temperature=1.0, top_k=None, seed=0, draws=1) -> None:
    """Samples and the caller's generator afterwards: both as PyTorch's own draws leave them."""
    seed = seed_for(seed)  # no release's: the secret seed's, at autograde
    config = {"temperature": temperature, "top_k": top_k, "seed": seed, "draws": draws}
    expected = oracle.sample(logits, **config)
    got = student.scenario("sample", function="sample_next", logits=logits, **config)
    samples = as_list(got["samples"], f"the samples of {what}", as_tensor)
    after = as_tensor(got["next"], "the generator's next numbers")
    untouched = later.sample(logits, **config, mistake="own-generator")
    more = None if top_k is None else later.sample(logits, **(config | {"top_k": top_k + 1}))
    if same(samples, expected["samples"], rtol=0, atol=0) and same(after, expected["next"]):
        return
    if same(after, untouched.get()["next"]):
        key = "argmax-top-1" if top_k == 1 else "own-generator"
        fail(f"{what}: the caller's generator did not advance", key)
    if more is not None and same(samples, more.get()["samples"], rtol=0, atol=0):
        fail(f"{what}: the samples are those of top_k={top_k + 1}", "top-k-one-more")
    for i, (sample, want) in enumerate(zip(samples, expected["samples"], strict=True)):
        expect_close(sample, want, f"{what}, draw {i + 1}")
    fail(f"{what}: the caller's generator advanced differently from one multinomial draw per call")


@pytest.mark.check("sample-uses-generator")
def test_sample_uses_generator(student):
    # Plain draws first: a generator of one's own shows there; then top_k = 1, where only a
    # shortcut around the draw leaves the caller's generator where it was.
    check_draws(
        student,
        2 * randn(7, 4, 10),
        "sample_next(logits [4, 10], temperature=0.7), 3 times",
        temperature=0.7,
        seed=32,
        draws=3,
    )
    check_draws(
        student,
        2 * randn(6, 4, 10),
        "sample_next(logits [4, 10], top_k=1), twice",
        top_k=1,
        seed=31,
        draws=2,
    )


# -- generate -------------------------------------------------------------------------------------


@recorded
def gen_config(model_seed: int, B: int, T: int, n: int, L: int, **options) -> dict:
    """A toy model, a prompt and generate's arguments (``seed`` seeds the generator)."""
    g = generator(model_seed)
    return {
        "model": {"vocab": 11, "dim": 8, "context_length": L, "seed": seed_for(model_seed)},
        "ids": torch.randint(0, 11, (B, T), generator=g),
        "max_new_tokens": n,
        "context_length": L,
    } | options


def run_generate(student, config: dict, what: str) -> dict:
    try:
        got = student.scenario("generate", **config)
    except StudentError as error:
        if error.message.startswith("grader's toy model"):
            fail(f"{what}: {error.message}", "not-cropped")
        raise
    ids = as_tensor(got["ids"], f"the ids {what} returned", kind="int")
    records = as_list(got["records"], "the model's calls", lambda v, w: v)
    return {"ids": ids, "records": records, "prompt_after": got.get("prompt_after")}


def check_generate(student, config: dict, what: str, mistakes: tuple[str, ...] = ()) -> dict:
    expected = oracle.generate(config)
    answers = {key: later.generate(config, mistake=key) for key in mistakes}
    got = run_generate(student, config, what)
    expect_close(got["ids"], expected, what, mistakes=answers)
    return got


@pytest.mark.check("generate-greedy")
def test_generate_greedy(student):
    config = gen_config(1, 2, 3, 4, 8, temperature=0.0)
    check_generate(
        student,
        config,
        "generate(toy model, ids [2, 3], 4 new tokens, greedy)",
        ("first-position", "only-new"),
    )


@pytest.mark.check("generate-crops-context")
def test_generate_crops_context(student):
    config = gen_config(2, 2, 5, 6, 4, temperature=0.0)
    check_generate(
        student, config, "generate(ids [2, 5], 6 new tokens, context_length=4)", ("cropped-start",)
    )


@pytest.mark.check("generate-seeded")
def test_generate_seeded(student):
    config = gen_config(3, 3, 2, 6, 5, temperature=0.8, top_k=4, seed=21)
    check_generate(student, config, "generate(temperature=0.8, top_k=4, seeded generator)")


@pytest.mark.check("generate-no-grad-keeps-prompt")
def test_generate_no_grad(student):
    config = gen_config(4, 1, 2, 3, 8, temperature=0.0)
    got = check_generate(student, config, "generate(ids [1, 2], 3 new tokens)")
    if any(as_bool(r["grad"], "grad mode") for r in got["records"]):
        fail("the model ran with gradients enabled during generate", "grad-enabled")


@pytest.mark.check("generate-no-grad-keeps-prompt")
def test_generate_leaves_ids(student):
    config = gen_config(5, 2, 3, 4, 8, temperature=0.0)
    got = run_generate(student, config, "generate(ids [2, 3], 4 new tokens)")
    after = got["prompt_after"]
    if not same(after, config["ids"], rtol=0, atol=0):
        fail(
            f"generate changed the caller's prompt {config['ids'].tolist()} to "
            f"{after.tolist() if isinstance(after, torch.Tensor) else after!r}",
            "changed-prompt",
        )


# -- load_gpt2_state_dict ---------------------------------------------------------------------


def as_state(value, what: str) -> dict:
    if type(value) is not dict:
        fail(f"{what} should be a dict of tensors")
    for key, tensor in value.items():
        if type(key) is not str:
            fail(f"{what} has a key {key!r} that is not a string")
        as_tensor(tensor, f"{what}[{key!r}]")
    return value


def load(student, hf: dict, what: str) -> dict:
    return as_state(student.call("load_gpt2_state_dict", hf), what)


KEY_MISTAKES = ("drops-c-attn-bias", "keeps-buffers", "prefixes-lm-head", "no-prefix", "not-tied")


def check_keys(got: dict, hf: dict, what: str) -> None:
    expected = oracle.load_gpt2_keys(hf)
    answers = {key: later.load_gpt2_keys(hf, mistake=key) for key in KEY_MISTAKES}
    keys = sorted(got)
    if keys == expected:
        return
    missing = sorted(set(expected) - set(keys))
    extra = sorted(set(keys) - set(expected))
    if "transformer.lm_head.weight" in extra:
        fail(f"{what}: unexpected key transformer.lm_head.weight", "prefixes-lm-head")
    diagnose(
        keys,
        answers,
        rtol=0,
        atol=0,
        detail=f"{what}: missing keys {missing[:4]}{'...' if len(missing) > 4 else ''}, "
        f"unexpected keys {extra[:4]}{'...' if len(extra) > 4 else ''}",
    )


def check_values(got: dict, hf: dict, what: str) -> None:
    expected = oracle.load_gpt2_state_dict(hf)
    mistakes = {
        key: later.load_gpt2_state_dict(hf, mistake=key)
        for key in ("not-transposed", "transposes-all")
    }
    shared = sorted(set(got) & set(expected))
    if not shared:
        fail(f"{what} has none of the expected keys")
    if same({k: got[k] for k in shared}, {k: expected[k] for k in shared}, rtol=0, atol=0):
        return
    wrong = [k for k in shared if not same(got[k], expected[k], rtol=0, atol=0)]
    wte = got.get("transformer.wte.weight")
    given = "lm_head.weight" in hf and "transformer.lm_head.weight" not in got
    if wrong == ["lm_head.weight"] and given and same(got[wrong[0]], wte):
        fail(f"{what} replaced the given lm_head.weight by wte", "replaced-lm-head")
    answers = {
        key: state.then(lambda d: {k: d[k] for k in shared}) for key, state in mistakes.items()
    }
    diagnose(
        {k: got[k] for k in shared},
        answers,
        rtol=0,
        atol=0,
        detail=f"{what}: wrong values (or layouts) for {wrong[:4]}",
    )


@pytest.mark.check("load-gpt2-keys")
def test_load_gpt2_keys(student):
    hf = gpt2_state(2, 4, 7, 5, seed=1, prefix=True, lm_head=True)
    check_keys(
        load(student, hf, "load_gpt2_state_dict(2 layers)"), hf, "load_gpt2_state_dict(2 layers)"
    )


@pytest.mark.check("load-gpt2-transposes")
def test_load_gpt2_transposes(student):
    hf = gpt2_state(2, 4, 7, 5, seed=2, prefix=True, lm_head=True)
    check_values(
        load(student, hf, "load_gpt2_state_dict(2 layers)"), hf, "load_gpt2_state_dict(2 layers)"
    )


@pytest.mark.check("load-gpt2-hub-keys")
def test_load_gpt2_hub_keys(student):
    hf = gpt2_state(2, 4, 7, 5, seed=3, prefix=False, lm_head=False, masked_bias=False)
    got = load(student, hf, "load_gpt2_state_dict(the Hub's keys)")
    check_keys(got, hf, "load_gpt2_state_dict(keys without 'transformer.', no lm_head)")
    check_values(got, hf, "load_gpt2_state_dict(keys without 'transformer.', no lm_head)")


@pytest.mark.check("sample-top-k-ties")
def test_sample_top_k_ties(student):
    row = torch.tensor([3.0, 1.0, 3.0, 0.0, 3.0, -1.0])
    logits = row.repeat(400, 1)
    check_sample(student, logits, "sample_next with tied logits, top_k=2", top_k=2, seed=5)


@pytest.mark.check("load-gpt2-keeps-lm-head")
def test_load_gpt2_keeps_lm_head(student):
    hf = gpt2_state(1, 4, 6, 3, seed=9, prefix=False, lm_head=True)
    got = load(student, hf, "load_gpt2_state_dict")
    head, wte = got.get("lm_head.weight"), got.get("transformer.wte.weight")
    # A given head kept under a prefixed name is the keys' mistake, told by check_keys.
    replaced = "transformer.lm_head.weight" not in got and not same(hf["lm_head.weight"], wte)
    if isinstance(head, torch.Tensor) and same(head, wte) and replaced:
        fail("load_gpt2_state_dict replaced the given lm_head.weight by wte", "replaced-lm-head")
    check_keys(got, hf, "load_gpt2_state_dict")
    check_values(got, hf, "load_gpt2_state_dict")
