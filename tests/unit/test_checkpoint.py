"""The checkpoint of an exhausted budget: what it says, and that it is written whole."""

from __future__ import annotations

import json
from pathlib import Path

from loopkit.decision import budget, checkpoint


def test_checkpoint_is_written_whole(tmp_path: Path) -> None:
    path = checkpoint.write(tmp_path, "fix-parser", {"exit_reason": "attempts"})
    assert json.loads(path.read_text()) == {"exit_reason": "attempts"}
    assert [p.name for p in path.parent.iterdir()] == ["fix-parser.json"]


def test_a_checkpoint_says_what_was_spent_what_is_left_and_why() -> None:
    history = {
        **budget.empty_history(),
        "attempts": 3,
        "spent_attempts": 3,
        "last_fingerprint": "fpB",
    }
    decision = {
        "outcome": "budget_exhausted",
        "reason": "budget exhausted (attempts) after attempt 3",
        "exhausted": ["attempts"],
    }
    cp = checkpoint.build("fix-parser", decision, history, {"budgets": {"attempts": 4}})
    assert (cp["kind"], cp["version"], cp["task_id"]) == ("loopkit/checkpoint", 1, "fix-parser")
    assert cp["exit_reason"] == decision["reason"] and cp["exhausted"] == ["attempts"]
    assert cp["used"]["attempts"] == 3 and cp["limits"] == {"attempts": 4.0}
    assert cp["fractions"] == {"attempts": 0.75} and cp["last_fingerprint"] == "fpB"
