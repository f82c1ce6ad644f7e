"""The checker bounds itself (issue 18): a failure message shows a bounded summary of a value,
never its full repr, however the value shares its parts."""

from __future__ import annotations

import time

import pytest
import torch

from graders.checking import CheckFailed, expect_equal, summary


def test_a_value_of_shared_parts_is_summarised_in_bounded_time_and_size():
    text = "x" * (1 << 20)
    shared = [text] * 10_000_000  # 80 MB of references; its repr would be 10 TB
    nested: list = []
    nested.append(nested)
    for value in (shared, {i: shared for i in range(1000)}, nested, (torch.zeros(10**6),)):
        start = time.process_time()
        shown = summary(value)
        assert len(shown) <= 210 and time.process_time() - start < 1.0, shown


def test_a_failure_message_names_type_shape_dtype_and_first_elements():
    with pytest.raises(CheckFailed) as failed:
        expect_equal(["y" * (1 << 20)] * 1_000_000, [1, 2], "encode('hi')")
    detail = failed.value.detail
    assert len(detail) < 600 and "list of 1000000" in detail and "'yyyy" in detail, detail
    assert "tensor(float32, shape [2, 3], first [0.0, 0.0, 0.0, 0.0])" in summary(torch.zeros(2, 3))
