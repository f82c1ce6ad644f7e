"""instructor/preprocessors.py: hidden tests keep only their score."""

from __future__ import annotations

import json

from support.extras import require_extra

require_extra("nbgrader", "the grading extra (nbgrader) is not installed")


def test_hide_hidden_tests_keeps_only_the_score():
    import nbformat

    from instructor.preprocessors import HideHiddenTests

    cell = nbformat.v4.new_code_cell(
        "# hidden\n### BEGIN HIDDEN TESTS\ncheck('x', 'secret-check')\n### END HIDDEN TESTS"
    )
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="secret-check failed: secret hint"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "0"}, execution_count=1),
    ]
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "secret" not in json.dumps(cell)
    assert [o.output_type for o in cell.outputs] == ["execute_result"]
