"""The hosts the egress gate refused travel from the run's record to the ledger's
summary, ``lk show`` and ``lk report``."""

from __future__ import annotations

from typing import Any

from loopkit import schema
from loopkit.decision.records import summarize
from loopkit.state import report


def attempt(n: int, refused: dict[str, int]) -> dict[str, Any]:
    run = {
        "provider": "command",
        "duration_s": 1.0,
        "sandbox": {"used": True, "network": "egress", "egress": {"refused": refused}},
    }
    summary = summarize({"run": run})
    return {
        "type": "attempt",
        "task_id": "T1",
        "attempt": n,
        "decision": {"outcome": "retry", "failure_class": "verify_failed", "reason": "red"},
        "run": summary["run"],
        "usage": summary["usage"],
    }


def test_refused_hosts_are_listed_by_show_and_report() -> None:
    records = [attempt(1, {"evil.example:443": 3}), attempt(2, {}), attempt(3, {"a.test:80": 1})]
    assert records[0]["run"]["refused_hosts"] == {"evil.example:443": 3}
    assert "refused_hosts" not in records[1]["run"]
    story = report.task_story(records, "T1", refs=[], memory=None)
    schema.validate(story, "show")
    text = report.story_text(story)
    assert "#1 refused hosts: evil.example:443 (3×)" in text
    assert "#3 refused hosts: a.test:80" in text and "#2 refused" not in text
    doc = report.build(list(enumerate(records)))
    assert doc["health"]["refused_hosts"] == {"evil.example:443": 3, "a.test:80": 1}
    assert "hosts the egress gate refused: evil.example:443 (3×), a.test:80" in report.text(doc)
