"""Golden streams: real claude and codex output (captured by tests/golden/capture.py)
normalized into run records, compared with the saved expectation field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit import schema
from loopkit.worker.invoke import normalize_transcript
from loopkit.worker.providers.base import detect

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = sorted(p.name.removesuffix(".jsonl") for p in GOLDEN.glob("*.jsonl"))


def test_there_are_golden_cases_for_both_clis() -> None:
    assert any(c.startswith("claude_") for c in CASES)
    assert any(c.startswith("codex_") for c in CASES)
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES)
def test_golden_stream_normalizes_to_its_expectation(case: str) -> None:
    expected = json.loads((GOLDEN / f"{case}.expected.json").read_text())
    record = normalize_transcript(str(GOLDEN / f"{case}.jsonl"))
    schema.validate({"kind": "loopkit/run", "version": 1, **record}, "run")
    record.pop("transcript")
    expected.pop("kind", None)
    expected.pop("version", None)
    assert record == expected


@pytest.mark.parametrize("case", CASES)
def test_provider_is_detected_from_the_stream(case: str) -> None:
    assert detect(GOLDEN / f"{case}.jsonl") == case.split("_")[0]


def test_golden_stop_reasons_cover_the_failure_classes() -> None:
    reasons = {
        json.loads((GOLDEN / f"{c}.expected.json").read_text())["stop_reason"] for c in CASES
    }
    assert {
        "completed",
        "max_turns",
        "api_error",
        "rate_limited",
        "usage_limit",
        "permission_denied",
        "stuck",
        "auth_error",
        "invalid_request",
    } <= reasons
