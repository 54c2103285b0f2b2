"""A plan task's estimate beside its actual diff: in every attempt record, re-derived by
replay, and summed up by lk report's estimates panel."""

from __future__ import annotations

import copy
from typing import Any

from loopkit.decision import records
from loopkit.views import report


def _view(budget: dict[str, int] | None, lines: int | None, files: int | None) -> dict[str, Any]:
    task: dict[str, Any] = {"id": "rows", "text": "Rows", "kind": "task"}
    if budget is not None:
        task["budget"] = budget
    view: dict[str, Any] = {"kind": "loopkit/attempt", "version": 1, "task": task}
    if lines is not None:
        view["diff"] = {"totals": {"lines": lines, "files": files}}
    return view


def test_the_estimate_beside_the_diff() -> None:
    est = records.estimate(_view({"lines": 40, "files": 2}, 120, 1))
    assert est == {
        "lines": 40,
        "files": 2,
        "actual_lines": 120,
        "actual_files": 1,
        "lines_ratio": 3.0,
        "files_ratio": 0.5,
        "within": False,
    }
    assert records.estimate(_view({"lines": 40}, 40, 3)) == {
        "lines": 40,
        "files": None,
        "actual_lines": 40,
        "actual_files": 3,
        "lines_ratio": 1.0,
        "files_ratio": None,
        "within": True,  # only the lines are estimated
    }
    nodiff = records.estimate(_view({"files": 1}, None, None))
    assert nodiff is not None and nodiff["within"] is None and nodiff["actual_files"] is None
    assert records.estimate(_view(None, 10, 1)) is None  # no budget: no estimate
    assert records.estimate(_view({}, 10, 1)) is None


def _record(view: dict[str, Any], outcome: str = "complete") -> dict[str, Any]:
    decision = {"attempt": 1, "outcome": outcome, "failure_class": None, "reason": "r"}
    return records.attempt_record(
        view,
        {},
        decision,
        tree_on_disk=None,
        cancel=None,
        trigger={"kind": "manual"},
        started_at=None,
        recorded_at="2026-01-01T00:00:00Z",
    )


def test_replay_checks_a_recorded_estimate_and_spares_older_records() -> None:
    rec = _record(_view({"lines": 4, "files": 2}, 12, 1))
    assert rec["estimate"]["within"] is False
    forged = copy.deepcopy(rec)
    forged["estimate"]["within"] = True  # a hand edit: the over-run hidden
    fields = [d["field"] for d in records.replay([(1, forged)])]
    assert "estimate" in fields
    assert "estimate" not in [d["field"] for d in records.replay([(1, rec)])]
    older = {k: v for k, v in rec.items() if k != "estimate"}  # before estimates existed
    assert "estimate" not in [d["field"] for d in records.replay([(1, older)])]


def test_the_panel_counts_landed_tasks_within_their_estimate_and_the_median() -> None:
    def rec(task: str, outcome: str, lines: int, budget: int = 10) -> dict[str, Any]:
        r = _record(_view({"lines": budget, "files": 1}, lines, 1), outcome)
        r["task_id"] = task
        r["decision"]["outcome"] = outcome
        return r

    ledger = [
        rec("a", "retry", 30),  # over, then landed within
        rec("a", "complete", 8),
        rec("b", "complete", 20),  # landed over its estimate (a lower cap elsewhere)
        rec("c", "complete", 10),
        rec("d", "failed", 40),  # parked: not landed
        {"type": "draft", "task_id": ":draft", "draft": {"outcome": "first_time", "split": "d"}},
        {"type": "draft", "task_id": ":draft", "draft": {"outcome": "given_up", "split": "d"}},
    ]
    doc = report.build(list(enumerate(ledger, 1)))
    panel = doc["health"]["estimates"]
    assert panel == {
        "landed": 3,
        "within": 2,
        "within_share": 0.6667,
        "attempts": 5,
        "over_estimate": 3,
        "resplit": 1,
        "median_lines_ratio": 1.0,
        "median_files_ratio": 1.0,
    }
    text = report.text(doc, width=200)
    assert (
        "estimates: 67% of 3 landed plan tasks within their estimate; median "
        "actual/estimate: lines 1.00x, files 1.00x; 3 of 5 attempts over, 1 re-split"
    ) in text
    assert "estimates: 67% of 3 landed" in report.page(doc)
    assert "estimates:" not in report.text(report.build([]), width=200)
