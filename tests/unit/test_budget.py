"""Budgets across runs: folding history, exhaustion, admission with reserves."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.decision import budget
from tests.helpers import decide as h

NOW = "2026-01-01T00:00:00Z"


def record(
    *,
    usd: float | None = 0.5,
    trusted: bool = True,
    tokens: int = 100,
    turns: int = 2,
    wall: float = 10.0,
    verified: bool = True,
    passed: bool = False,
    fp: str | None = "fpA",
    stale: bool = False,
    stop: str = "completed",
    outcome: str = "retry",
    cls: str | None = "verification_failure",
) -> dict[str, Any]:
    return {
        "type": "attempt",
        "usage": {
            "cost_usd": usd,
            "cost_trusted": trusted,
            "tokens": tokens,
            "turns": turns,
            "wall_s": wall,
            "verified": verified,
        },
        "evidence": {"verified": verified, "passed": passed, "fingerprint": fp, "stale": stale},
        "run": {"stop_reason": stop},
        "decision": {"outcome": outcome, "failure_class": cls},
    }


def test_fold_accumulates_and_counts_trusted_cost_apart() -> None:
    hist = budget.empty_history()
    hist = budget.fold(hist, record(usd=0.5))
    hist = budget.fold(hist, record(usd=2.0, trusted=False))
    hist = budget.fold(hist, record(usd=None, tokens=7))
    assert hist["attempts"] == 3
    assert hist["cost_usd"] == 0.5
    assert hist["cost_untrusted_usd"] == 2.0
    assert hist["tokens"] == 207
    assert hist["turns"] == 6
    assert hist["wall_s"] == 30.0
    assert hist["verify_attempts"] == 3


def test_fold_tracks_fingerprint_repeats_and_progress() -> None:
    hist = budget.fold(budget.empty_history(), record(fp="A"))
    assert (hist["last_fingerprint"], hist["same_failure"]) == ("A", 0)
    hist = budget.fold(hist, record(fp="A"))
    hist = budget.fold(hist, record(fp="A"))
    assert hist["same_failure"] == 2
    hist = budget.fold(hist, record(fp="B"))  # a changed fingerprint is progress
    assert (hist["last_fingerprint"], hist["same_failure"]) == ("B", 0)
    hist = budget.fold(hist, record(fp="B", stale=True))  # stale evidence moves nothing
    assert hist["same_failure"] == 0
    hist = budget.fold(hist, record(verified=False, fp=None, stop="api_error"))
    assert hist["last_fingerprint"] == "B" and hist["transient_streak"] == 1
    hist = budget.fold(hist, record(passed=True, fp=None))
    assert hist["last_fingerprint"] is None and hist["transient_streak"] == 0


def test_fold_does_not_mutate_its_input() -> None:
    hist = budget.empty_history()
    budget.fold(hist, record())
    assert hist == budget.empty_history()


def test_usage_of_reads_run_and_checks() -> None:
    doc = h.attempt(run=h.run(), verify=h.verify(False, "x"))
    u = budget.usage_of(doc)
    assert u["tokens"] == 120 and u["turns"] == 3 and u["cost_trusted"] is True
    assert u["wall_s"] == 14.0  # 12.5 s run + 1.5 s check
    untrusted = h.attempt(run=h.run(cost={"usd": None, "source": "unknown", "trusted": True}))
    assert budget.usage_of(untrusted)["cost_trusted"] is False


def test_exhausted_and_fractions() -> None:
    c = h.contract(attempts=2, tokens=1000, cost_usd=5)
    hist = budget.fold(budget.empty_history(), record(tokens=850))
    assert budget.exhausted(hist, c) == []
    assert budget.fractions(hist, c)["tokens"] == 0.85
    hist = budget.fold(hist, record(tokens=10))
    assert budget.exhausted(hist, c) == ["attempts"]


def test_admission_reserves_the_next_run_and_keeps_a_verify_reserve() -> None:
    c = h.contract(attempts=2, wall_seconds=1000)
    c["worker"]["timeout"] = 600
    first = budget.admit(budget.empty_history(), c, now=NOW)
    assert first["admitted"] and first["attempt"] == 1
    assert first["verify_reserve_s"] == 60  # the criteria's timeouts
    assert first["granted"]["timeout_s"] == 600
    hist = budget.fold(budget.empty_history(), {"type": "admission", "admission": first})
    second = budget.admit(hist, c, now=NOW)  # the first run's reservation still holds
    assert second["admitted"] and second["attempt"] == 2
    assert second["granted"]["timeout_s"] == 1000 - 600 - 60
    hist = budget.fold(hist, {"type": "admission", "admission": second})
    third = budget.admit(hist, c, now=NOW)
    assert not third["admitted"] and "attempts" in third["exhausted"]
    assert third["reason"].startswith("budget exhausted")


def test_admission_refuses_when_only_the_verify_reserve_is_left() -> None:
    c = h.contract(wall_seconds=100, verify_reserve_s=50)
    hist = budget.empty_history()
    hist["wall_s"] = 50.0
    a = budget.admit(hist, c, now=NOW)
    assert not a["admitted"] and a["exhausted"] == ["wall_seconds"]


def test_admission_cost_share_and_spent_budgets() -> None:
    c = h.contract(cost_usd=2, verify_attempts=3)
    c["worker"]["max_cost_usd"] = 0.5
    hist = budget.empty_history()
    hist.update(cost_usd=1.8, attempts=3)
    a = budget.admit(hist, c, now=NOW)
    assert a["admitted"] and abs(a["granted"]["cost_usd"] - 0.2) < 1e-9
    hist.update(cost_usd=2.0, verify_attempts=3)
    a = budget.admit(hist, c, now=NOW)
    assert not a["admitted"] and set(a["exhausted"]) == {"cost_usd", "verify_attempts"}


def test_abandoned_reservations_expire() -> None:
    c = h.contract(attempts=1)
    c["worker"]["timeout"] = 60
    a = budget.admit(budget.empty_history(), c, now=NOW)
    hist = budget.fold(budget.empty_history(), {"type": "admission", "admission": a})
    assert not budget.admit(hist, c, now="2026-01-01T00:01:00Z")["admitted"]
    later = budget.admit(hist, c, now="2026-01-01T01:00:00Z")  # the loop died long ago
    assert later["admitted"]


def test_an_attempt_settles_its_reservation() -> None:
    c = h.contract(attempts=3)
    a = budget.admit(budget.empty_history(), c, now=NOW)
    hist = budget.fold(budget.empty_history(), {"type": "admission", "admission": a})
    hist = budget.fold(hist, record())
    assert hist["reserved"] == [] and hist["attempts"] == 1
    assert budget.admit(hist, c, now=NOW)["attempt"] == 2


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(0, 10)),
            st.booleans(),
            st.integers(0, 10_000),
            st.sampled_from(["A", "B", None]),
        ),
        max_size=30,
    )
)
def test_fold_totals_match_a_plain_sum(
    items: list[tuple[float | None, bool, int, str | None]],
) -> None:
    hist = budget.empty_history()
    for usd, trusted, tokens, fp in items:
        hist = budget.fold(hist, record(usd=usd, trusted=trusted, tokens=tokens, fp=fp))
    assert hist["attempts"] == len(items)
    assert hist["tokens"] == sum(t for _, _, t, _ in items)
    want = sum(u for u, tr, _, _ in items if u is not None and tr)
    assert abs(hist["cost_usd"] - want) < 1e-4
    assert hist["same_failure"] >= 0


def test_a_usage_limit_blocks_admission_until_its_reset_time() -> None:
    from loopkit.decision import records

    c = h.contract(attempts=5)
    blocked = record(
        verified=False, fp=None, stop="usage_limit", outcome="blocked", cls="usage_limit"
    )
    blocked["decision"]["resume_after"] = "2026-01-01T05:00:00Z"
    hist = budget.fold(budget.empty_history(), blocked)
    early = budget.admit(hist, c, now="2026-01-01T04:59:00Z")
    assert not early["admitted"] and early["blocked_until"] == "2026-01-01T05:00:00Z"
    d = records.admission_decision(early)
    assert d is not None and d["outcome"] == "blocked" and d["exit_code"] == 20
    assert d["resume_after"] == "2026-01-01T05:00:00Z"
    assert budget.admit(hist, c, now="2026-01-01T05:00:01Z")["admitted"]
    hist = budget.fold(hist, record())  # a later attempt got through: the block is gone
    assert hist["resume_after"] is None


def test_a_check_that_cannot_run_and_a_reproduction_spend_no_attempt() -> None:
    from loopkit.decision import budget

    h = budget.empty_history()
    env = {"type": "attempt", "decision": {"outcome": "blocked", "failure_class": "environment"}}
    h = budget.fold(h, env)
    assert (h["attempts"], h["spent_attempts"]) == (1, 0)
    reproduced = {
        "type": "attempt",
        "evidence": {"verified": True, "passed": False, "fingerprint": "f", "reproduction": True},
        "decision": {"outcome": "retry", "failure_class": "verification_failure"},
    }
    h = budget.fold(h, reproduced)
    assert (h["attempts"], h["spent_attempts"], h["last_fingerprint"]) == (2, 0, "f")
    worker = {"type": "attempt", "decision": {"outcome": "retry", "failure_class": "no_op"}}
    assert budget.fold(h, worker)["spent_attempts"] == 1
