"""The attempt document as written: JSON any reader accepts."""

from __future__ import annotations

import json

import pytest

from loopkit import document


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_is_never_written(value: float) -> None:
    with pytest.raises(ValueError):
        document.dumps(document.new_attempt(run={"duration_s": value}))


def test_a_document_reads_back_as_written() -> None:
    doc = document.new_attempt(task={"id": "t", "text": "x 1.5", "kind": "task"})
    doc["started_at"] = "2026-01-01T00:00:00Z"
    assert json.loads(document.dumps(doc)) == doc
    assert document.parse_attempt(document.dumps(doc)) == doc
