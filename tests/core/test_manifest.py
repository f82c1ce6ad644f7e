"""The lesson manifest's checks: validation, links, and coverage of every exercise function."""

from __future__ import annotations

import copy
import os
import tomllib
from pathlib import Path

import pytest

from core.manifest import ManifestError, load_manifest, parse_manifest, site_url

ROOT = Path(__file__).resolve().parents[2]
RAW = tomllib.loads((ROOT / "course" / "lessons.toml").read_text())
# The course's exercise API: every function a student implements.
CONTRACT = {
    "tokens": {"split_pieces", "bpe_merge", "encode", "decode", "train_bpe"},
    "embeddings": {"lookup", "one_hot_lookup", "add_positions", "nearest"},
    "windows": {"shift", "window_starts", "TokenWindows", "make_loader"},
    "attention": {"causal_mask", "attention"},
    "block": {
        "layer_norm",
        "gelu",
        "split_heads",
        "merge_heads",
        "self_attention",
        "mlp",
        "transformer_block",
        "gpt_logits",
    },
    "objective": {"cross_entropy", "lm_loss", "perplexity", "pad_targets"},
    "packing": {"pack", "document_mask", "position_ids", "packed_targets"},
    "training": {"adamw_step", "lr_at", "train_step", "evaluate", "fit"},
    "generation": {"sample_next", "generate", "load_gpt2_state_dict"},
}


def test_every_contract_function_has_public_and_hidden_checks():
    manifest = load_manifest()
    for lesson in manifest.lessons:
        assert set(lesson.functions) == CONTRACT[lesson.module]
        for function in lesson.functions:
            checks = [c for c in lesson.checks if c.function == function]
            assert any(not c.hidden for c in checks), f"{function}: no public check"
            assert any(c.hidden for c in checks), f"{function}: no hidden check"
    assert sum(len(functions) for functions in CONTRACT.values()) == 39


def test_links_point_at_the_function_section():
    manifest = load_manifest()
    check = manifest.check("bpe-merge-toy")
    assert check.link == "chapters/01-tokens.md#byte-pair-merges"
    assert check.url == "chapters/01-tokens/#byte-pair-merges"
    assert site_url("index.md") == ""
    assert manifest.lesson("2").slug == manifest.lesson("embeddings").slug == "embeddings"


def test_unknown_lesson_lists_the_valid_ones():
    with pytest.raises(KeyError, match="valid lessons: tokens, embeddings"):
        load_manifest().lesson("nope")


def mutated(change) -> dict:
    data = copy.deepcopy(RAW)
    change(data)
    return data


def first_check(data: dict) -> dict:
    return data["lesson"][0]["check"][0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: first_check(d).update(function="nope"), "unknown function 'nope'"),
        (
            lambda d: d["lesson"][1]["check"].append(dict(d["lesson"][1]["check"][0])),
            "check id 'lookup-matches-indexing' appears more than once",
        ),
        (lambda d: d["lesson"][0]["sections"].pop("encode"), "no section for function 'encode'"),
        (lambda d: first_check(d).update(points=0), "points must be positive"),
        (lambda d: first_check(d).update(points=True), "'points' must be an integer"),
        (lambda d: first_check(d).update(hiden=True), "unknown key(s) hiden"),
        (lambda d: first_check(d).pop("hint"), "missing 'hint'"),
        (lambda d: first_check(d).update(section="Not A Slug"), "missing section"),
        (
            lambda d: d["lesson"][0]["check"][1].update(mistakes={"lost-text": "other words"}),
            "two different hints",
        ),
        (lambda d: d.update(lesson=[]), "no [[lesson]] tables"),
        (lambda d: first_check(d).update(evidence="trusted"), "evidence must be one of"),
        (
            lambda d: first_check(d).update(evidence="claimed", points=2),
            "a claimed check (what only the student's process reports) is worth at most 1",
        ),
        (lambda d: d["lesson"][3]["rule"][0].update(names=[]), "a rule needs names"),
        (lambda d: d["lesson"][1].update(no_rule={"nope": "why"}), "no_rule.nope must name"),
        (
            lambda d: d["lesson"][3].update(no_rule={"attention": "why"}),
            "attention has a rule and a no_rule reason",
        ),
        (  # an earlier lesson's function that is not one of its functions
            lambda d: d["lesson"][4]["builds_on"].update(mlp=["attention.nope"]),
            "builds_on.mlp names 'attention.nope', which is no function of an earlier lesson",
        ),
        (  # a later lesson's function: a lesson is graded before the ones that follow it
            lambda d: d["lesson"][4]["builds_on"].update(mlp=["objective.cross_entropy"]),
            "builds_on.mlp names 'objective.cross_entropy', which is no function of an earlier",
        ),
        (
            lambda d: d["lesson"][4]["builds_on"].update(mlp=["gelu", "gelu"]),
            "builds_on.mlp entry 'gelu' appears more than once",
        ),
    ],
)
def test_invalid_manifests_are_rejected_with_a_clear_error(change, message):
    with pytest.raises(ManifestError) as error:
        parse_manifest(mutated(change), source="lessons.toml")
    assert message in str(error.value)


def test_a_broken_file_is_reported_with_its_path(tmp_path):
    path = tmp_path / "lessons.toml"
    path.write_text("[[lesson]\n")
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(path)


def test_an_unchanged_file_is_parsed_once_and_a_changed_one_again(tmp_path):
    path = tmp_path / "lessons.toml"
    text = (ROOT / "course" / "lessons.toml").read_text()
    path.write_text(text)
    first = load_manifest(path)
    assert load_manifest(path) is first
    path.write_text(text.replace('title = "', 'title = "Renamed: ', 1))
    second = load_manifest(path)
    assert second is not first
    assert second.lessons[0].title == "Renamed: " + first.lessons[0].title
    # An edit of the same size, with the old modification time put back: still re-read.
    stat = path.stat()
    path.write_text(text.replace('title = "', 'title = "Retitled ', 1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_manifest(path).lessons[0].title == "Retitled " + first.lessons[0].title
    # Another spelling of the path gets a manifest whose path is the one it gave.
    assert load_manifest(str(path)).path == path
    relative = os.path.relpath(path)
    assert load_manifest(relative).path == Path(relative)


def test_every_declared_mistake_is_diagnosed_by_some_grader():
    source = "".join(p.read_text() for p in (ROOT / "graders").glob("*/test_*.py"))
    unused = [
        f"{c.id}: {key}"
        for c in load_manifest().checks
        for key in c.mistakes
        if f'"{key}"' not in source
    ]
    assert not unused, f"mistakes no grader names: {unused}"


def test_claims_are_named_and_worth_one_point_at_most():
    """What only the student's process reports about itself (a model's mode, grad mode, its
    inputs after a scenario) is a claim in the manifest."""
    manifest = load_manifest()
    claimed = {check.id for check in manifest.checks if check.evidence == "claimed"}
    assert {"train-step-train-mode", "evaluate-eval-mode", "generate-no-grad"} <= claimed
    assert all(manifest.check(c).points <= 1 for c in claimed)


def test_error_path_checks_are_marked():
    manifest = load_manifest()
    marked = {check.id for check in manifest.checks if check.error_path}
    assert marked == {
        "train-bpe-validates",
        "add-positions-too-long",
        "split-heads-indivisible",
        "gpt-logits-too-long",
        "lr-validates",
    }


def test_a_function_builds_on_earlier_lessons_directly_and_through_its_own_lessons():
    """The block lesson's self_attention calls lesson 4's attention itself; transformer_block
    reaches it only through self_attention, gpt_logits through transformer_block too."""
    manifest = load_manifest()
    block = manifest.lesson("block")
    assert block.own_dependencies("self_attention") == ("split_heads", "merge_heads")
    assert block.earlier_dependencies("self_attention") == (
        "attention.attention",
        "attention.causal_mask",
    )
    assert block.earlier_dependencies("transformer_block") == ()
    assert manifest.earlier_dependencies("block.transformer_block") == (
        "attention.attention",
        "attention.causal_mask",
    )
    assert set(manifest.earlier_dependencies("block.gpt_logits")) == {
        "embeddings.lookup",
        "embeddings.add_positions",
        "attention.causal_mask",
        "attention.attention",
    }
    assert manifest.earlier_dependencies("block.gelu") == ()
    assert manifest.earlier_dependencies("nope.gelu") == ()
