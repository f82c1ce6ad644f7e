"""What the checker believes about a call comes from what it verifies itself.

A function that changes its input in place and then alters what the worker reports of its
inputs loses the points anyway: the tensors it was given live in memory the checker maps, and
the checker reads them back itself after the call.
"""

from __future__ import annotations

import pytest
from variants import Variant, build_target

from graders.hints import IN_PLACE

pytestmark = pytest.mark.slow

# lookup's answer is right, but it adds 1 to the caller's table, then makes the worker report
# a clean copy of the table as the inputs the call left.
MUTATES_AND_FAKES = """
    def lookup(table, ids):
        import gc
        out = table[ids].clone()
        clean = table.clone()
        table.add_(1.0)
        for worker in gc.get_objects():  # the worker's globals, wherever they are
            if type(worker) is dict and "strip" in worker and "SCENARIOS" in worker:
                real = worker["strip"]
                def report(obj, real=real):
                    shown = real(obj)
                    if isinstance(shown, list) and shown and obj[0] is table:
                        shown[0] = clean
                    return shown
                worker["strip"] = report
        return out
"""


def test_a_function_that_changes_its_input_and_fakes_the_report_loses_its_points(tmp_path):
    import graders

    variant = Variant("embeddings", "lookup", "mutates-and-fakes", MUTATES_AND_FAKES)
    report = graders.grade(
        build_target(tmp_path, [variant]),
        lessons=["embeddings"],
        hidden=True,
        functions=["lookup"],
        json_path=tmp_path / "r.json",
        reveal_hidden=True,
    )
    checks = [c for c in report["lessons"][0]["checks"] if c["function"] == "lookup"]
    assert checks and not any(c["passed"] for c in checks), [c["id"] for c in checks]
    # (the gradient check's table requires grad, so there the change itself raises)
    called = [c for c in checks if " raised " not in c["detail"]]
    assert called and all(c["hint"] == IN_PLACE for c in called), [c["hint"] for c in called]
    assert all("changed its input in place" in c["detail"] for c in called), called
