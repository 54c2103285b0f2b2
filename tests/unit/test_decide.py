"""The decision table: every failure class, its outcome and exit code; completion's gates."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit import schema
from loopkit.decision import budget, classify, decide
from loopkit.exitcodes import OUTCOME_CODES
from tests.helpers import decide as h
from tests.helpers.decide import OTHER_TREE, TREE


def hist(**kw: Any) -> dict[str, Any]:
    out = budget.empty_history()
    out.update(kw)
    if "attempts" in kw and "spent_attempts" not in kw:
        out["spent_attempts"] = kw["attempts"]  # none of them transient
    return out


def changed_passing(**kw: Any) -> dict[str, Any]:
    return h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(True), **kw)


# (case id, document, history, tree on disk, cancel, outcome, failure class)
TABLE: list[tuple[str, dict[str, Any], dict[str, Any], str | None, Any, str, str | None]] = [
    ("complete", changed_passing(), hist(), TREE, None, "complete", None),
    (
        "complete-goal",
        h.attempt(kind="goal", run=h.run(), diff=h.diff(), verify=h.verify(True), judge=h.judge()),
        hist(),
        TREE,
        None,
        "complete",
        None,
    ),
    (
        "complete-no-change-allowed",
        h.attempt(allow_empty=True, run=h.run(), diff=h.diff(files=0), verify=h.verify(True)),
        hist(),
        TREE,
        None,
        "complete",
        None,
    ),
    (
        "cancel-intent",
        changed_passing(),
        hist(),
        TREE,
        {"reason": "stop"},
        "cancelled",
        "cancelled",
    ),
    (
        "run-cancelled",
        h.attempt(run=h.run("cancelled")),
        hist(),
        TREE,
        None,
        "cancelled",
        "cancelled",
    ),
    (
        "tampered",
        {**changed_passing(), "state_tampered": ["the ledger .loopkit/ledger.jsonl was rewritten"]},
        hist(),
        TREE,
        None,
        "blocked",
        "tampered",
    ),
    (
        "environment",
        h.attempt(
            run=h.run(),
            diff=h.diff(),
            verify={
                **h.verify(False),
                "environment": [
                    {"name": "regression", "command": "tox -q", "why": "`tox` is not installed"}
                ],
            },
        ),
        hist(),
        TREE,
        None,
        "blocked",
        "environment",
    ),
    ("transient-api", h.attempt(run=h.run("api_error")), hist(), TREE, None, "retry", "transient"),
    (
        "transient-throttle",
        h.attempt(run=h.run("rate_limited")),
        hist(),
        TREE,
        None,
        "retry",
        "transient",
    ),
    (
        "usage-limit",
        h.attempt(run=h.run("usage_limit", resume_after="2026-01-01T05:00:00Z")),
        hist(),
        TREE,
        None,
        "blocked",
        "usage_limit",
    ),
    ("auth", h.attempt(run=h.run("auth_error")), hist(), TREE, None, "blocked", "auth"),
    (
        "permission",
        h.attempt(run=h.run("permission_denied")),
        hist(),
        TREE,
        None,
        "blocked",
        "permission",
    ),
    (
        "invalid-input",
        h.attempt(run=h.run("invalid_request")),
        hist(),
        TREE,
        None,
        "failed",
        "invalid_input",
    ),
    ("timeout-first", h.attempt(run=h.run("timeout")), hist(), TREE, None, "retry", "timeout"),
    (
        "timeout-again",
        h.attempt(run=h.run("timeout")),
        hist(timeouts=1, attempts=1),
        TREE,
        None,
        "replan",
        "timeout",
    ),
    (
        "timeout-limit",
        h.attempt(run=h.run("timeout"), contract_=h.contract(timeouts=2)),
        hist(timeouts=1, attempts=1),
        TREE,
        None,
        "failed",
        "timeout",
    ),
    ("stuck", h.attempt(run=h.run("stuck")), hist(), TREE, None, "replan", "stuck"),
    ("crashed", h.attempt(run=h.run("crashed")), hist(), TREE, None, "retry", "crashed"),
    ("unknown-stop", h.attempt(run=h.run("exploded")), hist(), TREE, None, "failed", "unknown"),
    (
        "unsupported-completion",
        h.attempt(run=h.run(claimed_complete=True), diff=h.diff(), verify=h.verify(False, "fpA")),
        hist(),
        TREE,
        None,
        "retry",
        "unsupported_completion",
    ),
    (
        "no-op",
        h.attempt(run=h.run(claimed_complete=True), diff=h.diff(files=0), verify=h.verify(True)),
        hist(),
        TREE,
        None,
        "replan",
        "no_op",
    ),
    (
        "scope-violation",
        h.attempt(
            run=h.run(),
            diff=h.diff(violations=[{"rule": "protected", "path": "migrations/001.sql"}]),
            verify=h.verify(True),
        ),
        hist(),
        TREE,
        None,
        "retry",
        "scope_violation",
    ),
    (
        "scope-too-big",
        h.attempt(
            run=h.run(),
            diff=h.diff(files=1, lines=500),
            verify=h.verify(True),
            contract_=h.contract(changed_lines=100),
        ),
        hist(),
        TREE,
        None,
        "retry",
        "scope_violation",
    ),
    (
        "verification-failure",
        h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(False, "fpB")),
        hist(attempts=1, last_fingerprint="fpA"),
        TREE,
        None,
        "retry",
        "verification_failure",
    ),
    (
        "no-progress",
        h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(False, "fpA")),
        hist(attempts=1, last_fingerprint="fpA"),
        TREE,
        None,
        "replan",
        "no_progress",
    ),
    (
        "no-progress-park",
        h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(False, "fpA")),
        hist(attempts=2, last_fingerprint="fpA", same_failure=1),
        TREE,
        None,
        "failed",
        "no_progress",
    ),
    (
        "stale-verify",
        h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(True)),
        hist(),
        OTHER_TREE,
        None,
        "retry",
        "stale_evidence",
    ),
    (
        "stale-diff-vs-verify",
        h.attempt(run=h.run(), diff=h.diff(tree=OTHER_TREE), verify=h.verify(True)),
        hist(),
        TREE,
        None,
        "retry",
        "stale_evidence",
    ),
    (
        "unhashable-tree",
        h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(True)),
        hist(),
        None,
        None,
        "retry",
        "stale_evidence",
    ),
    (
        "ungrounded",
        h.attempt(
            kind="goal",
            run=h.run(),
            diff=h.diff(),
            verify=h.verify(True),
            judge=h.judge("MET", grounded=False),
        ),
        hist(),
        TREE,
        None,
        "retry",
        "ungrounded",
    ),
    (
        "untrusted-judge",
        h.attempt(
            kind="goal",
            run=h.run(),
            diff=h.diff(),
            verify=h.verify(True),
            judge=h.judge("MET", trusted=False),
        ),
        hist(),
        TREE,
        None,
        "retry",
        "ungrounded",
    ),
    (
        "goal-without-judge",
        h.attempt(kind="goal", run=h.run(), diff=h.diff(), verify=h.verify(True)),
        hist(),
        TREE,
        None,
        "retry",
        "ungrounded",
    ),
    (
        "judge-not-met",
        h.attempt(
            kind="goal",
            run=h.run(),
            diff=h.diff(),
            verify=h.verify(True),
            judge=h.judge("NOT_MET"),
        ),
        hist(),
        TREE,
        None,
        "retry",
        "judge_not_met",
    ),
    (
        "budget-attempts",
        h.attempt(
            run=h.run(),
            diff=h.diff(),
            verify=h.verify(False, "fpB"),
            contract_=h.contract(attempts=3),
        ),
        hist(attempts=2, last_fingerprint="fpA"),
        TREE,
        None,
        "budget_exhausted",
        "budget",
    ),
    (
        "unknown-stop-reason",
        h.attempt(run={**h.run(), "stop_reason": "exploded", "is_error": True}),
        hist(),
        TREE,
        None,
        "failed",
        "unknown",
    ),
]


@pytest.mark.parametrize(
    ("doc", "history", "tree", "cancel", "outcome", "failure_class"),
    [pytest.param(*row[1:], id=row[0]) for row in TABLE],
)
def test_decision_table(
    doc: dict[str, Any],
    history: dict[str, Any],
    tree: str | None,
    cancel: Any,
    outcome: str,
    failure_class: str | None,
) -> None:
    d = decide.decide(doc, history, tree_on_disk=tree, cancel=cancel)
    assert (d["outcome"], d["failure_class"]) == (outcome, failure_class), d["reason"]
    assert d["exit_code"] == OUTCOME_CODES[outcome]
    assert d["attempt"] == int(history.get("attempts") or 0) + 1
    assert d["reason"]
    schema.validate(d, "decision")


def test_every_class_is_in_the_table_and_the_schema() -> None:
    covered = {row[6] for row in TABLE if row[6] is not None}
    assert covered == set(classify.CLASSES)
    enum = set(schema.load("decision")["properties"]["failure_class"]["enum"]) - {None}
    assert enum == set(classify.CLASSES)
    for cls, (outcome, _) in classify.ACTIONS.items():
        assert outcome in OUTCOME_CODES, cls


def test_a_claim_of_done_is_not_completion() -> None:
    doc = h.attempt(run=h.run(claimed_complete=True), diff=h.diff(), verify=h.verify(False, "fpX"))
    d = decide.decide(doc, None, tree_on_disk=TREE)
    assert d["outcome"] == "retry"
    assert "unsupported completion" in d["feedback"].lower()
    assert "ValueError" in d["feedback"]  # the failing check's output is carried


def test_no_claim_but_evidence_completes() -> None:
    doc = changed_passing()
    doc["run"]["stop_reason"] = "max_turns"
    d = decide.decide(doc, None, tree_on_disk=TREE)
    assert d["outcome"] == "complete"
    assert "evidence decides" in d["reason"]


def test_stale_evidence_never_completes_even_when_passing() -> None:
    doc = changed_passing()
    for tree in (OTHER_TREE, None):
        d = decide.decide(doc, None, tree_on_disk=tree)
        assert d["outcome"] != "complete"
        assert d["failure_class"] == "stale_evidence"


def test_no_progress_feedback_says_the_hypothesis_failed() -> None:
    doc = h.attempt(run=h.run(claimed_complete=True), diff=h.diff(), verify=h.verify(False, "fpA"))
    d = decide.decide(doc, hist(attempts=1, last_fingerprint="fpA"), tree_on_disk=TREE)
    assert d["outcome"] == "replan"
    assert "hypothesis failed" in d["feedback"]
    assert "unsupported completion" in d["feedback"]


def test_reason_and_feedback_quote_the_same_fingerprint() -> None:
    # The memory file's retrospective quotes both: one failure, one fingerprint.
    verify = h.verify(False, "fpAll")
    verify["checks"][0]["fingerprint"] = "fpCheck"  # the check's own, as lk-verify printed it
    doc = h.attempt(run=h.run(), diff=h.diff(), verify=verify)
    d = decide.decide(doc, hist(attempts=1, last_fingerprint="fpAll"), tree_on_disk=TREE)
    assert d["failure_class"] == "no_progress"
    assert "regression fpCheck" in d["reason"] and "regression fpCheck" in d["feedback"]
    assert "fpAll" not in d["reason"] + d["feedback"]


def test_same_failure_setting_moves_the_park() -> None:
    doc = h.attempt(
        run=h.run(),
        diff=h.diff(),
        verify=h.verify(False, "fpA"),
        contract_=h.contract(same_failure=3),
    )
    history = hist(attempts=2, last_fingerprint="fpA", same_failure=1)
    assert decide.decide(doc, history, tree_on_disk=TREE)["outcome"] == "replan"
    history["same_failure"] = 2
    assert decide.decide(doc, history, tree_on_disk=TREE)["outcome"] == "failed"


def test_scope_violations_are_the_feedback() -> None:
    v = [{"rule": "protected", "path": "migrations/001.sql"}, {"rule": "outside", "path": "x.py"}]
    doc = h.attempt(run=h.run(), diff=h.diff(violations=v), verify=h.verify(True))
    d = decide.decide(doc, None, tree_on_disk=TREE)
    assert "migrations/001.sql" in d["feedback"] and "x.py" in d["feedback"]
    assert d["violations"] == v


def test_usage_limit_carries_resume_after_and_no_backoff() -> None:
    doc = h.attempt(run=h.run("usage_limit", resume_after="2026-01-01T05:00:00Z"))
    d = decide.decide(doc, None, tree_on_disk=TREE)
    assert d["resume_after"] == "2026-01-01T05:00:00Z"
    assert d["backoff_s"] is None


def test_transient_failures_spend_no_attempt_and_have_their_own_budget() -> None:
    doc = h.attempt(run=h.run("api_error"), contract_=h.contract(attempts=2, transient=3))
    # Two transient failures already: the attempts budget (2) is not what stops it.
    d = decide.decide(
        doc, hist(attempts=2, spent_attempts=0, transient_streak=1), tree_on_disk=TREE
    )
    assert (d["outcome"], d["failure_class"]) == ("retry", "transient") and d["backoff_s"]
    d = decide.decide(
        doc, hist(attempts=3, spent_attempts=0, transient_streak=2), tree_on_disk=TREE
    )
    assert (d["outcome"], d["failure_class"]) == ("blocked", "transient")
    assert "budgets.transient (3)" in d["reason"]


def test_the_backoff_follows_the_contract() -> None:
    shape = {**h.contract(transient=100), "backoff": {"base_s": 1, "max_s": 4}}
    doc = h.attempt(run=h.run("api_error"), contract_=shape)
    waits = [
        decide.decide(doc, hist(transient_streak=k), tree_on_disk=TREE)["backoff_s"]
        for k in range(6)
    ]
    assert 0.5 <= waits[0] <= 1 and all(w <= 4 for w in waits) and waits[5] >= 2


def test_the_same_violations_again_are_no_progress_then_park() -> None:
    bad = [{"rule": "protected", "path": "migrations/0001.sql"}]
    doc = h.attempt(run=h.run(), diff=h.diff(violations=bad), verify=h.verify(True))
    first = decide.decide(doc, hist(), tree_on_disk=TREE)
    assert first["failure_class"] == "scope_violation"
    sig = budget.violation_signature(first["violations"])
    again = decide.decide(doc, hist(attempts=1, last_violations=sig), tree_on_disk=TREE)
    assert (again["outcome"], again["failure_class"]) == ("replan", "no_progress")
    third = decide.decide(
        doc, hist(attempts=2, last_violations=sig, same_violation=1), tree_on_disk=TREE
    )
    assert (third["outcome"], third["failure_class"]) == ("failed", "no_progress")


def test_a_crash_is_retried_with_its_output_and_the_same_crash_is_no_progress() -> None:
    run = h.run(
        "crashed",
        exit_code=2,
        error="ImportError: no module named parser",
        final_message="Traceback ...\nImportError: no module named parser",
    )
    doc = h.attempt(run=run)
    d = decide.decide(doc, hist(), tree_on_disk=TREE)
    assert (d["outcome"], d["failure_class"]) == ("retry", "crashed")
    assert "ImportError" in d["feedback"] and "exit 2" in d["feedback"]
    assert d["crash"] == budget.crash_signature(run)
    again = decide.decide(doc, hist(attempts=1, last_crash=d["crash"]), tree_on_disk=TREE)
    assert (again["outcome"], again["failure_class"]) == ("replan", "no_progress")


def test_transient_backoff_is_deterministic_exponential_and_jittered() -> None:
    doc = h.attempt(run=h.run("api_error"), contract_=h.contract(transient=100))
    first = [
        decide.decide(doc, hist(transient_streak=k), tree_on_disk=TREE)["backoff_s"]
        for k in range(8)
    ]
    again = [
        decide.decide(doc, hist(transient_streak=k), tree_on_disk=TREE)["backoff_s"]
        for k in range(8)
    ]
    assert first == again
    for k, b in enumerate(first):
        base = min(decide.BACKOFF_CAP_S, decide.BACKOFF_BASE_S * 2**k)
        assert base / 2 <= b <= base
    assert first[3] > first[0]
    other = h.attempt(run=h.run("api_error"), attempt_id="20260101T000000Z-ffffff")
    jittered = [
        decide.decide(other, hist(transient_streak=k), tree_on_disk=TREE)["backoff_s"]
        for k in range(8)
    ]
    assert jittered != first


def test_budget_exhaustion_keeps_the_cause_and_feedback() -> None:
    doc = h.attempt(
        run=h.run(), diff=h.diff(), verify=h.verify(False, "fpB"), contract_=h.contract(attempts=2)
    )
    d = decide.decide(doc, hist(attempts=1, last_fingerprint="fpA"), tree_on_disk=TREE)
    assert d["outcome"] == "budget_exhausted" and d["exit_code"] == 22
    assert d["exhausted"] == ["attempts"]
    assert d["cause"] == "verification_failure"
    assert "ValueError" in d["feedback"]


def test_untrusted_cost_does_not_spend_the_cost_budget_but_tokens_do() -> None:
    untrusted = h.run(cost={"usd": 50.0, "source": "cli-price-table", "trusted": False})
    doc = h.attempt(
        run=untrusted,
        diff=h.diff(),
        verify=h.verify(False, "fpB"),
        contract_=h.contract(cost_usd=1),
    )
    assert decide.decide(doc, None, tree_on_disk=TREE)["outcome"] == "retry"
    trusted = h.run(cost={"usd": 1.5, "source": "provider", "trusted": True})
    doc = h.attempt(
        run=trusted, diff=h.diff(), verify=h.verify(False, "fpB"), contract_=h.contract(cost_usd=1)
    )
    assert decide.decide(doc, None, tree_on_disk=TREE)["exhausted"] == ["cost_usd"]
    doc = h.attempt(
        run=untrusted, diff=h.diff(), verify=h.verify(False, "fpB"), contract_=h.contract(tokens=50)
    )
    assert decide.decide(doc, None, tree_on_disk=TREE)["exhausted"] == ["tokens"]


def test_completion_wins_over_a_spent_budget() -> None:
    doc = changed_passing(contract_=h.contract(attempts=1))
    assert decide.decide(doc, None, tree_on_disk=TREE)["outcome"] == "complete"


def test_decide_is_pure() -> None:
    doc = h.attempt(run=h.run("api_error"), diff=h.diff(), verify=h.verify(False, "fpA"))
    history = hist(attempts=1, last_fingerprint="fpA")
    import copy

    before = (copy.deepcopy(doc), copy.deepcopy(history))
    a = decide.decide(doc, history, tree_on_disk=TREE)
    b = decide.decide(doc, history, tree_on_disk=TREE)
    assert a == b
    assert (doc, history) == before


def test_inputs_trims_bulk_and_keeps_what_decides() -> None:
    full = changed_passing()
    full["verify"]["checks"][0]["output_tail"] = "x" * 50_000
    full["run"]["final_message"] = "y" * 50_000
    full["run"]["side_effects"] = [{"kind": "network"}]
    view = decide.inputs(full, h.contract())
    assert len(view["verify"]["checks"][0]["output_tail"]) == decide.TAIL_CHARS
    assert len(view["run"]["final_message"]) == decide.TAIL_CHARS
    assert "side_effects" not in view["run"]
    assert decide.decide(view, None, tree_on_disk=TREE) == decide.decide(
        full, None, tree_on_disk=TREE
    )
    assert full["verify"]["checks"][0]["output_tail"] == "x" * 50_000  # the original is untouched


def test_task_identity() -> None:
    assert decide.task_id(changed_passing()) == "fix-parser"
    assert decide.task_id({"kind": "loopkit/attempt", "version": 1}) == decide.DEFAULT_TASK_ID


def test_classify_run_maps_every_stop_reason() -> None:
    reasons = schema.load("run")["properties"]["stop_reason"]["enum"]
    assert set(reasons) == set(classify.STOP_REASONS)
    assert classify.classify_run(None) is None
    assert classify.classify_run({"stop_reason": "completed", "is_error": False}) is None
    assert classify.classify_run({"is_error": True}) == "unknown"


def test_the_documented_table_matches_the_code() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "decide.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].strip("`") in classify.ACTIONS:
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    assert set(rows) == set(classify.CLASSES)
    for cls, (outcome, code) in rows.items():
        default = classify.ACTIONS[cls][0]
        assert outcome.replace("_", " ").startswith(
            default.replace("_", " ")
        ) or outcome.startswith(default), cls
        assert code.split(" ")[0] == str(int(OUTCOME_CODES[default])), cls


def test_the_tree_the_checks_left_behind_is_current() -> None:
    doc = changed_passing()
    doc["verify"]["tree_after"] = OTHER_TREE  # e.g. a cache the checks wrote, not ignored
    doc["verify"]["tree_changed"] = True
    assert decide.decide(doc, None, tree_on_disk=OTHER_TREE)["outcome"] == "complete"
    assert decide.decide(doc, None, tree_on_disk=TREE)["outcome"] == "complete"
    d = decide.decide(doc, None, tree_on_disk="c" * 40)
    assert d["failure_class"] == "stale_evidence"


def test_inputs_bound_the_record_size() -> None:
    doc = h.attempt(
        run=h.run(command=["claude", "-p", "x" * 20_000]),
        diff=h.diff(files=500),
        verify=h.verify(True),
    )
    view = decide.inputs(doc, h.contract())
    assert len(json.dumps(view)) < 20_000
    assert view["run"]["command"][2].endswith("(20000 chars)")
    assert len(view["diff"]["files"]) == decide.MAX_FILES and view["diff"]["totals"]["files"] == 500
    assert decide.decide(view, None, tree_on_disk=TREE) == decide.decide(
        doc, None, tree_on_disk=TREE
    )


STOPS = [*classify.STOP_REASONS, "weird"]


@settings(max_examples=150, deadline=None)
@given(
    stop=st.sampled_from(STOPS),
    claimed=st.booleans(),
    has_diff=st.booleans(),
    files=st.integers(0, 3),
    has_verify=st.booleans(),
    passed=st.booleans(),
    fp=st.sampled_from(["A", "B"]),
    last_fp=st.sampled_from([None, "A"]),
    same=st.integers(0, 3),
    attempts=st.integers(0, 6),
    disk=st.sampled_from([TREE, OTHER_TREE, None]),
    goal=st.booleans(),
    verdict=st.sampled_from([None, "MET", "NOT_MET"]),
)
def test_any_evidence_gives_one_valid_decision(
    stop: str,
    claimed: bool,
    has_diff: bool,
    files: int,
    has_verify: bool,
    passed: bool,
    fp: str,
    last_fp: str | None,
    same: int,
    attempts: int,
    disk: str | None,
    goal: bool,
    verdict: str | None,
) -> None:
    r = h.run(stop if stop != "weird" else "completed", claimed_complete=claimed)
    if stop == "weird":
        r["stop_reason"], r["is_error"] = "weird", True
    doc = h.attempt(
        kind="goal" if goal else "task",
        run=r,
        diff=h.diff(files=files) if has_diff else None,
        verify=h.verify(passed, fp) if has_verify else None,
        judge=h.judge(verdict) if verdict else None,
        contract_=h.contract(attempts=5),
    )
    history = hist(attempts=attempts, last_fingerprint=last_fp, same_failure=same)
    d = decide.decide(doc, history, tree_on_disk=disk)
    schema.validate(d, "decision")
    assert d["exit_code"] == OUTCOME_CODES[d["outcome"]]
    if d["outcome"] == "complete":
        assert has_verify and passed and disk == TREE and has_diff and files > 0
        assert not goal or verdict == "MET"
        assert d["failure_class"] is None
    else:
        assert d["failure_class"] in classify.CLASSES
    if d["outcome"] in ("retry", "replan") and stop not in budget.TRANSIENT_STOPS:
        assert attempts + 1 < 5  # never past the attempts budget (a transient spends none)


def test_reason_and_feedback_carry_no_terminal_control_sequences() -> None:
    # Loops print the reason and write both into the memory file and commit messages.
    tail = "\x1b]0;owned\x07\x1b[31mE   AssertionError\x1b[0m\x9b2J\x1bP+q\x1b\\"
    run = h.run("crashed", error="\x1b]52;c;cm0=\x07crashed\r")
    for doc, kept in (
        (h.attempt(run=h.run(), diff=h.diff(), verify=h.verify(False, "fpX", tail=tail)), "E   "),
        (h.attempt(run=run, diff=h.diff(), verify=h.verify(False, "fpY")), "crashed: crashed"),
    ):
        d = decide.decide(doc, None, tree_on_disk=TREE)
        for field in ("reason", "feedback"):
            assert "\x1b" not in d[field] and "\x9b" not in d[field] and "\r" not in d[field]
        assert kept in d["feedback"] + d["reason"]


def test_a_diff_over_changed_bytes_is_a_scope_violation_even_if_it_says_within_policy() -> None:
    # lk-decide checks the totals against the budgets itself, as for lines and files.
    diff = h.diff()
    diff["totals"]["bytes"] = 200 * 1024 * 1024
    doc = h.attempt(
        run=h.run(), diff=diff, verify=h.verify(True), contract_=h.contract(changed_bytes=5_000_000)
    )
    d = decide.decide(doc, None, tree_on_disk=TREE)
    assert (d["outcome"], d["failure_class"]) == ("retry", "scope_violation")
    assert "changed_bytes" in d["reason"] + d["feedback"]


def test_a_broken_size_budget_says_its_numbers() -> None:
    over = [{"rule": "changed_lines", "path": "*", "detail": "24 lines changed; budget 20"}]
    doc = h.attempt(run=h.run(), diff=h.diff(violations=over), verify=h.verify(True))
    d = decide.decide(doc, hist(), tree_on_disk=TREE)
    assert "24 lines changed; budget 20" in d["reason"]
    assert "24 lines changed; budget 20" in d["feedback"]
