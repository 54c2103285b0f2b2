"""Each provider's ``sniff`` takes its own stream's lines and no other provider's: every
JSON line of every golden stream is claimed by its owner alone (or by nobody)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit.worker import providers

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
STREAMS = sorted(GOLDEN.glob("*.jsonl"))


def lines(path: Path) -> list[dict[str, object]]:
    found = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("{"):
            obj = json.loads(raw)
            if isinstance(obj, dict):
                found.append(obj)
    return found


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.stem)
def test_no_line_is_taken_by_another_provider(path: Path) -> None:
    owner = path.name.split("_", 1)[0]
    for n, line in enumerate(lines(path)):
        takers = [name for name in providers.names() if providers.get(name).sniff(line)]
        assert set(takers) <= {owner}, f"{path.name} line {n + 1}: {takers}"


def test_the_new_clis_have_golden_streams() -> None:
    owners = {p.name.split("_", 1)[0] for p in STREAMS}
    assert {"opencode", "pi", "copilot"} <= owners


@pytest.mark.parametrize(
    "line",
    [
        # Copilot: dotted types, a data object (codex once took any dotted type).
        {"type": "session.error", "data": {"message": "x", "statusCode": 500}, "id": "1"},
        {"type": "assistant.message", "data": {"content": "Done."}, "id": "2"},
        # opencode's error event (codex once took any "error").
        {"type": "error", "timestamp": 1, "sessionID": "ses_1", "error": {"name": "APIError"}},
        # Copilot's closing line is no claude result.
        {"type": "result", "sessionId": "s", "exitCode": 0, "usage": {}},
    ],
)
def test_codex_and_claude_do_not_take_these(line: dict[str, object]) -> None:
    assert not providers.get("codex").sniff(line)
    assert not providers.get("claude").sniff(line)


def test_codex_still_takes_its_own_error_line() -> None:
    assert providers.get("codex").sniff({"type": "error", "message": "Reconnecting... 1/5"})
    assert providers.get("codex").sniff({"type": "item.completed", "item": {}})
