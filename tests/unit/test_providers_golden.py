"""Golden streams: real claude, codex, gemini and qwen output (captured by
tests/golden/capture.py) normalized into run records, compared with the saved expectation
field by field; and each stream recognised by its own provider's sniff and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit import schema
from loopkit.worker.invoke import normalize_transcript
from loopkit.worker.providers.base import detect

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = sorted(p.name.removesuffix(".jsonl") for p in GOLDEN.glob("*.jsonl"))


def test_there_are_golden_cases_for_every_cli() -> None:
    for cli in ("claude", "codex", "gemini", "qwen"):
        assert any(c.startswith(f"{cli}_") for c in CASES), cli
    assert len(CASES) >= 20


def _claimants(path: Path) -> list[set[str]]:
    """For each JSON line among the first 50 of a stream: the providers whose sniff
    takes it."""
    from loopkit.worker import providers

    every = [providers.get(n) for n in providers.names()]
    out = []
    with path.open("rb") as f:
        for n, raw in enumerate(f):
            if n > 50:
                break
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append({p.name for p in every if p.sniff(obj)})
    return out


@pytest.mark.parametrize("case", CASES)
def test_each_stream_is_taken_by_its_own_provider_and_no_other(case: str) -> None:
    """Every golden stream (any file added later too): some line is taken, each line
    by exactly one provider at most, and only by the file's own (its name's prefix)."""
    own = case.split("_")[0]
    claims = _claimants(GOLDEN / f"{case}.jsonl")
    taken = [c for c in claims if c]
    assert taken, f"{case}: no provider recognises any line"
    assert all(c == {own} for c in taken), f"{case}: lines taken by {taken}"


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


@pytest.mark.parametrize(
    "line",
    [
        {"type": "assistant.message", "data": {"content": "hi"}},  # a dotted type, not codex's
        {"type": "session.idle", "id": "s"},
        {"type": "tool.execution_complete", "data": {"toolCallId": "t"}},
        {"type": "error", "timestamp": 1, "sessionID": "s", "error": {"name": "APIError"}},
        {"type": "tool_use", "timestamp": 1, "sessionID": "s", "part": {"tool": "bash"}},
        {"type": "system", "subtype": "init", "session_id": "s", "qwen_code_version": "0.24.4"},
        {"type": "system", "subtype": "retry", "session_id": "s", "data": {"attempt": 1}},
        {"type": "result", "timestamp": "t", "status": "success", "stats": {}, "session_id": "s"},
        {"type": "assistant", "uuid": "u1", "message": {"id": "u1", "content": []}},
        {"type": "system", "subtype": "init", "session_id": "s", "cwd": "/r", "tools": ["Execute"]},
    ],
)
def test_claude_and_codex_take_no_foreign_line(line: dict[str, object]) -> None:
    """Lines other CLIs print (Copilot's dotted events, opencode's error and tool lines,
    Qwen Code's and Gemini CLI's) are not claude's or codex's."""
    from loopkit.worker.providers.claude import ClaudeProvider
    from loopkit.worker.providers.codex import CodexProvider

    assert not ClaudeProvider.sniff(line)
    assert not CodexProvider.sniff(line)
