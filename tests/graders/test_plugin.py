"""The grading plugin's own decisions (graders/plugin.py): error-path checks count only when
their function computes its values (a stub that raises ValueError naming its
arguments earned the "raises ValueError" checks with no exercise written)."""

from __future__ import annotations

import pytest
from variants import Variant, build_target

from core.manifest import load_manifest
from graders.hints import ERROR_PATH

pytestmark = pytest.mark.slow
MANIFEST = load_manifest()

# Stubs that raise ValueError naming their arguments, whatever they are given.
STUBS = [
    Variant(
        "embeddings",
        "add_positions",
        "raises",
        """
        def add_positions(vectors, pos_table):
            T, L = vectors.shape[1], pos_table.shape[0]
            raise ValueError(f"sequence length T={T} does not fit L={L} positions")
        """,
    ),
    Variant(
        "block",
        "split_heads",
        "raises",
        """
        def split_heads(x, n_head):
            raise ValueError(f"C={x.shape[-1]} is not a multiple of n_head={n_head}")
        """,
    ),
    Variant(
        "training",
        "lr_at",
        "raises",
        """
        def lr_at(step, *, max_lr, min_lr, warmup_steps, max_steps):
            raise ValueError(f"warmup_steps={warmup_steps} max_steps={max_steps}")
        """,
    ),
]


def test_an_error_raised_by_a_stub_earns_nothing(tmp_path):
    import graders

    report = graders.grade(
        build_target(tmp_path, STUBS),
        lessons=sorted({stub.module for stub in STUBS}),
        hidden=True,
        functions=[stub.function for stub in STUBS],
        json_path=tmp_path / "r.json",
    )
    checks = [check for lesson in report["lessons"] for check in lesson["checks"]]
    error_paths = {c.id for c in MANIFEST.checks if c.error_path}
    gated = [c for c in checks if c["id"] in error_paths]
    assert len(gated) == len(STUBS), [c["id"] for c in checks]
    assert report["points"] == 0, [c["id"] for c in checks if c["passed"]]
    for check in gated:  # told with the mistake of the function's values
        assert check["detail"] == ERROR_PATH.format(function=check["function"]), check
        first = next(c for c in checks if c["function"] == check["function"] and c is not check)
        assert check["hint"] == first["hint"] and check["hint"], check


def test_code_that_reaches_the_grader_is_flagged_in_a_lesson_without_rules(tmp_path):
    """Flagged for review with its file and line; the lesson's functions (no rule) keep their
    points, while every by-hand function of the package loses its own."""
    import graders

    target = build_target(tmp_path)
    (target / "helpers.py").write_text("import sys\n\nworker = sys.modules.get('grader')\n")
    report = graders.grade(
        target,
        lessons=["embeddings", "training"],
        hidden=False,
        functions=["lookup", "adamw_step"],
        json_path=tmp_path / "r.json",
    )
    embeddings, training = report["lessons"]
    expected = {"file": "helpers.py", "line": 3, "reason": "the submission uses sys.modules"}
    assert embeddings["flagged"] == [{"function": None, **expected}]
    assert training["flagged"] == [{"function": "adamw_step", **expected}]
    assert embeddings["points"] == embeddings["max_points"] > 0
    assert training["points"] == 0 < training["max_points"]
