"""The hosts the egress gate refused travel from the run's record to the ledger's
summary, ``lk show`` and ``lk report``."""

from __future__ import annotations

from typing import Any

from loopkit import schema
from loopkit.decision.records import summarize
from loopkit.views import report


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


def test_the_pull_request_body_lists_the_refused_hosts(tmp_path: Any) -> None:
    import json

    from loopkit.forge import body
    from loopkit.forge.stack import Slice, Stack

    ledger = tmp_path / "ledger.jsonl"
    lines = [attempt(1, {"evil.example:443": 2}), attempt(2, {"evil.example:443": 1})]
    from loopkit.decision.ledger import RECORD_KIND

    ledger.write_text("".join(json.dumps({**r, "kind": RECORD_KIND}) + "\n" for r in lines))
    ev = body.from_ledger(ledger, "T1")
    assert ev["refused_hosts"] == {"evil.example:443": 3}
    stack = Stack.__new__(Stack)
    s = Slice.__new__(Slice)
    stack.live = lambda: [s]  # type: ignore[method-assign]
    stack.name, stack.issue = "st", None
    s.id, s.head, s.tree, s.fork, s.evidence = "T1", "h" * 40, "t" * 40, "f" * 40, ev
    s.issue, s.pr, s.branch = None, None, "b"
    assert "Hosts the egress gate refused: evil.example:443 (3×)." in body.render(stack, s)
