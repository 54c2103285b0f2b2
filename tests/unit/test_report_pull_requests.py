"""lk report's pull-request panel: terminal tasks without a pull request against the SLO,
cost per merged pull request, landings vs returns -- from the ledger's tasks and the
stacks lk stack recorded."""

from __future__ import annotations

from typing import Any

from loopkit.views import report


def _task(tid: str, outcome: str | None, cost: float = 1.0) -> dict[str, Any]:
    return {"task_id": tid, "outcome": outcome, "cost_usd": cost, "cost_untrusted_usd": 0.0}


def _slice(
    sid: str, *, pr: int | None = None, pushed: str = "", merged: str = "", task: str = ""
) -> dict[str, Any]:
    return {
        "id": sid,
        "pr": pr,
        "pushed": pushed,
        "merged": merged,
        "evidence": {"task": task} if task else {},
    }


def test_counts_terminal_tasks_without_a_pull_request_and_cost_per_merged() -> None:
    tasks = [
        _task("alpha", "complete", 2.0),
        _task("beta", "complete", 1.0),
        _task("broken", "failed", 3.0),  # parked: no pull request, its spend still counts
        _task("busy", "retry", 0.5),  # not terminal
    ]
    stacks = [
        {
            "forge": "github",
            "slices": [
                _slice("alpha", pr=2, merged="a" * 40),
                _slice("s2", pr=3, task="beta"),  # named by its task, not its id
            ],
            "returned": [{"slice": "s2", "step": "land", "why": "head changed"}],
        }
    ]
    got = report.pull_requests(tasks, stacks)
    assert got["terminal_tasks"] == 3
    assert got["without_pull_request"] == ["broken"]
    assert got["share_without"] == round(1 / 3, 4)
    assert got["merged"] == got["landings"] == 1
    assert got["cost_per_merged"]["trusted_usd"] == 6.5
    assert got["returns"] == 1


def test_a_plain_remote_counts_a_pushed_branch_and_nothing_merged_has_no_cost() -> None:
    tasks = [_task("alpha", "complete")]
    plain = [{"forge": "plain", "slices": [_slice("alpha", pushed="b" * 40)], "returned": []}]
    got = report.pull_requests(tasks, plain)
    assert got["without_pull_request"] == [] and got["share_without"] == 0.0
    assert got["cost_per_merged"] == {"trusted_usd": None, "untrusted_usd": None}
    github = [{"forge": "github", "slices": [_slice("alpha", pushed="b" * 40)], "returned": []}]
    assert report.pull_requests(tasks, github)["without_pull_request"] == ["alpha"]


def test_the_text_says_whether_the_slo_was_met() -> None:
    doc = report.build([], stacks=[])
    assert "pull_requests" in doc["health"]
    rec = {"task_id": "a", "type": "attempt", "decision": {"outcome": "failed"}, "usage": {}}
    # A local run (no stack, no queue): its tasks land on the branch, no SLO applies.
    local = report.text(report.build([(0, rec)], stacks=[]), width=120)
    assert "pull request" not in local and "SLO" not in local
    stack = {"forge": "github", "slices": [], "returned": []}
    doc = report.build([(0, rec)], stacks=[stack])
    text = report.text(doc, width=120)
    assert "ended without a pull request: 1 of 1 terminal tasks (100%; SLO < 5%: MISSED)" in text
    assert "landings vs returns: stacks 0 landed, 0 returned; queue 0 landed, 0 returned" in text


def test_the_queue_s_landings_and_returns_are_counted() -> None:
    queue = [
        {"status": "landed"},
        {"status": "landed"},
        {"status": "returned"},
        {"status": "queued"},
    ]
    got = report.pull_requests([], [], queue)["queue"]
    assert got == {"landed": 2, "returned": 1, "queued": 1}


def test_lk_show_tells_a_missing_cost_from_an_untrusted_one() -> None:
    def attempt(n: int, usd: float | None, trusted: bool | None) -> dict[str, object]:
        return {"attempt": n, "outcome": "failed", "failure_class": None, "duration_s": 3,
                "cost_usd": usd, "cost_trusted": trusted, "reason": "r"}  # fmt: skip

    story = {"task": "t", "attempts": [attempt(1, None, False), attempt(2, 0.5, False)],
             "saved": [], "memory": []}  # fmt: skip
    text = report.story_text(story)
    assert "-?" not in text  # a command worker's run has no cost: "-", nothing to doubt
    row1, row2 = [line for line in text.splitlines() if line.lstrip().startswith("#")][1:]
    assert " - " in row1 and "$0.50 (untrusted)" in row2
