"""The ledger's records: their shapes, and the replay that re-derives them from their inputs.

A record is appended for every decision (``attempt_record``) and every admission
(``admission_record``): a readable summary of the attempt, the decision, and the exact
inputs it was derived from, so ``replay`` can re-derive each decision, history and
summary and name the records that disagree. The rules themselves are ``loopkit.decision.decide``'s;
how records are stored is ``loopkit.decision.ledger``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from loopkit.decision import budget
from loopkit.decision import classify as fc
from loopkit.decision import decide as decider

if TYPE_CHECKING:
    from typing import TypedDict

    from loopkit.sections import (
        Admission,
        Decision,
        Derived,
        Disagreement,
        Entry,
        History,
        Inputs,
        JSONObject,
        Summary,
        Timing,
        Trigger,
    )

    class ManualHead(TypedDict, closed=True):
        """What a record no decision made begins with (``manual_record``); closed: it
        holds no other key, so it spreads into an ``Entry``."""

        type: str
        task_id: str
        attempt: int
        attempt_id: None
        trigger: Trigger
        started_at: None
        recorded_at: str
        decision: None
        reason: str


def summarize(view: Mapping[str, Any]) -> Summary:
    """The record's readable summary of an attempt (derived from its inputs; replay checks it)."""
    run = view.get("run") or None
    judge = view.get("judge") or None
    return {
        "run": None if run is None else _ran(run),
        "usage": budget.usage_of(view),
        "diff": _changed(view.get("diff") or None),
        "judge": None
        if judge is None
        else {k: judge.get(k) for k in ("verdict", "grounded", "trusted", "provider")},
        "verify": _verified(view.get("verify") or None),
    }


#: The fields of the run section a record keeps.
RUN_FIELDS = (
    "provider",
    "command",
    "effective_model",
    "session_id",
    "stop_reason",
    "is_error",
    "exit_code",
    "claimed_complete",
    "duration_s",
    "transcript",
)


def _ran(run: Mapping[str, Any]) -> JSONObject:
    out = {k: run.get(k) for k in RUN_FIELDS}
    out["cost"] = run.get("cost")
    refused = ((run.get("sandbox") or {}).get("egress") or {}).get("refused")
    if refused:  # the hosts the egress gate refused (sandbox.network: egress)
        out["refused_hosts"] = dict(refused)
    return out


def _changed(diff: Mapping[str, Any] | None) -> JSONObject | None:
    if diff is None:
        return None
    totals = diff.get("totals") or {}
    out = {
        "base": diff.get("base"),
        "tree": diff.get("tree"),
        "files": totals.get("files"),
        "lines": totals.get("lines"),
        "within_policy": diff.get("within_policy"),
        "violations": len(diff.get("violations") or []),
    }
    if "bytes" in totals:  # absent from records older than the changed_bytes budget
        out["bytes"] = totals["bytes"]
    return out


def _verified(verify: Mapping[str, Any] | None) -> JSONObject | None:
    if verify is None:
        return None
    out: JSONObject = {
        "tree": verify.get("tree"),
        "passed": verify.get("passed"),
        "fingerprint": verify.get("fingerprint"),
        "checks": [
            {"name": c.get("name"), "passed": c.get("passed"), "exit_code": c.get("exit_code")}
            for c in verify.get("checks") or []
        ],
    }
    if verify.get("hint"):
        out["hint"] = verify["hint"]
    refused = ((verify.get("sandbox") or {}).get("egress") or {}).get("refused")
    if refused:  # the hosts the egress gate refused the checks (verify.network: egress)
        out["refused_hosts"] = dict(refused)
    return out


def estimate(view: Mapping[str, Any]) -> JSONObject | None:
    """A plan task's estimate (its ``budget:``) beside the attempt's actual diff: lines and
    files, each with its ratio actual/estimate, and whether the diff stayed within. None
    for a task without a budget."""
    task = view.get("task") or {}
    budget_ = task.get("budget") if isinstance(task, Mapping) else None
    if not isinstance(budget_, Mapping) or not (budget_.get("lines") or budget_.get("files")):
        return None
    diff = view.get("diff") or None
    totals = (diff or {}).get("totals") or {}
    out: JSONObject = {}  # the schema leaves it open: lines, files, actual_*, *_ratio, within
    within: bool | None = None if diff is None else True
    for key in ("lines", "files"):
        est = budget_.get(key)
        actual = totals.get(key) if diff is not None else None
        out[key] = est if isinstance(est, int) else None
        out[f"actual_{key}"] = actual if isinstance(actual, int) else None
        ratio = None
        if isinstance(est, int) and est > 0 and isinstance(actual, int):
            ratio = round(actual / est, 4)
            if actual > est:
                within = False
        out[f"{key}_ratio"] = ratio
    out["within"] = within
    return out


def attempt_record(
    view: Mapping[str, Any],
    history: Mapping[str, Any],
    decision: Mapping[str, Any],
    *,
    tree_on_disk: str | None,
    cancel: Mapping[str, Any] | None,
    trigger: Mapping[str, Any],
    started_at: str | None,
    recorded_at: str,
    timings: list[Timing] | None = None,
) -> Entry:
    """The ledger record of one decided attempt: a readable summary plus the exact inputs
    (and for a plan task, its estimate beside the actual diff; ``timings``, each stage's
    time, when measured: loopkit.timing)."""
    summary = summarize(view)
    out: Entry = {
        "type": "attempt",
        "task_id": decider.task_id(view),
        "attempt": decision["attempt"],
        "attempt_id": view.get("attempt_id"),
        "trigger": cast("Trigger", dict(trigger)),
        "started_at": started_at,
        "recorded_at": recorded_at,
        "run": summary["run"],
        "usage": summary["usage"],
        "diff": summary["diff"],
        "judge": summary["judge"],
        "verify": summary["verify"],
        "evidence": decider.evidence_state(view, tree_on_disk),
        "decision": cast("Decision", dict(decision)),
        "reason": decision["reason"],
        "inputs": {
            "document": dict(view),
            "history": dict(history),
            "tree_on_disk": tree_on_disk,
            "cancel": dict(cancel) if cancel else None,
        },
    }
    est = estimate(view)
    if est is not None:
        out["estimate"] = est
    if timings:
        out["timings"] = timings
    return out


def admission_decision(admission: Mapping[str, Any]) -> Decision | None:
    """The decision section an exhausted admission prints (None when admitted)."""
    if admission.get("admitted"):
        return None
    spent = list(admission.get("exhausted") or [])
    pool = admission.get("pool") or {}
    if not spent and pool.get("exhausted"):
        return decider.decision(
            "budget_exhausted",
            fc.BUDGET,
            f"not admitted: {pool.get('reason')} (before attempt {admission.get('attempt')})",
            int(admission.get("attempt") or 1),
            exhausted=list(pool["exhausted"]),
        )
    if not spent and admission.get("blocked_until"):
        until = str(admission["blocked_until"])
        return decider.decision(
            "blocked",
            fc.USAGE_LIMIT,
            f"not admitted: {admission.get('reason')}",
            int(admission.get("attempt") or 1),
            resume_after=until,
        )
    return decider.decision(
        "budget_exhausted",
        fc.BUDGET,
        f"not admitted: budget exhausted ({', '.join(spent)}) before attempt "
        f"{admission.get('attempt')}",
        int(admission.get("attempt") or 1),
        exhausted=spent,
    )


def admission_record(
    view: Mapping[str, Any],
    history: Mapping[str, Any],
    admission: Mapping[str, Any],
    *,
    now: str,
    trigger: Mapping[str, Any],
    pool: Mapping[str, Any] | None = None,
) -> Entry:
    decision = admission_decision(admission)
    inputs: Inputs = {"document": dict(view), "history": dict(history), "now": now}
    if pool is not None:
        inputs["pool"] = dict(pool)
    return {
        "type": "admission",
        "task_id": decider.task_id(view),
        "attempt": admission["attempt"],
        "attempt_id": None,
        "trigger": cast("Trigger", dict(trigger)),
        "started_at": None,
        "recorded_at": now,
        "admission": cast("Admission", dict(admission)),
        "decision": decision,
        "reason": admission["reason"],
        "inputs": inputs,
    }


def pool_record(
    pool_id: str,
    history: Mapping[str, Any],
    event: Mapping[str, Any],
    *,
    now: str,
    trigger: Mapping[str, Any],
) -> Entry:
    """One event of a run's pool (``budget.admit_pool``), under the pool's own ledger key:
    a worker's share reserved (``event: reserve``, appended with its task's admission), or
    an attempt settled (``event: settle``, with its decision: the share returned, what it
    spent charged). ``history``: the pool's before it."""
    key = budget.pool_key(pool_id)
    if event.get("event") == "reserve":
        reason = f"{event.get('task')}: its share of the run's pool reserved"
    else:
        reason = f"{event.get('task')}: settled; its share returned, what it spent charged"
    return {
        "type": "pool",
        "task_id": key,
        "attempt": int(event.get("attempt") or 1),
        "attempt_id": None,
        "trigger": cast("Trigger", dict(trigger)),
        "started_at": None,
        "recorded_at": now,
        "decision": None,
        "reason": reason,
        "pool": {"id": pool_id, **event},
        "inputs": {"document": {"task": {"id": key}}, "history": dict(history)},
    }


def manual_record(
    kind: str, task_id: str, history: Mapping[str, Any], *, source: str, now: str, reason: str
) -> ManualHead:
    """The head of a record no decision made (a reopen, a recovered interruption, a plan
    draft): the task's next attempt, triggered by hand (``source`` says how)."""
    return {
        "type": kind,
        "task_id": task_id,
        "attempt": int(history.get("attempts") or 0) + 1,
        "attempt_id": None,
        "trigger": {"kind": "manual", "source": source},
        "started_at": None,
        "recorded_at": now,
        "decision": None,
        "reason": reason,
    }


def reopen_record(
    task_id: str,
    history: Mapping[str, Any],
    *,
    reason: str,
    now: str,
    source: str = "lk-plan mark --status open",
) -> Entry:
    """A task reopened by a person (``lk-plan mark --status open`` on a parked task, or
    its line set back to ``- [ ]`` by hand: ``source``): a new budget epoch starts for it
    -- the attempts, the same-failure streaks and the spend the budgets count begin again
    (``budget.fold``)."""
    epoch = int(history.get("epoch") or 0) + 1
    return {
        **manual_record(
            "reopen",
            task_id,
            history,
            source=source,
            now=now,
            reason=reason or f"reopened: budget epoch {epoch}",
        ),
        "epoch": epoch,
        "inputs": {"document": {"task": {"id": task_id}}, "history": dict(history)},
    }


def interrupted_record(
    task_id: str, history: Mapping[str, Any], *, reason: str, now: str, ran: bool = True
) -> Entry:
    """An attempt that never reached a decision (its loop was killed): the recipe that
    found it saved its tree and restored the start. It counts as an attempt -- a loop
    killed again and again still ends under its budgets -- and settles its reservation;
    ``ran``: whether its worker ran at all (one that never did is numbered, not charged)."""
    return {
        "ran": ran,
        **manual_record(
            "interrupted",
            task_id,
            history,
            source="recovery at the next start",
            now=now,
            reason=reason or "interrupted: the loop ended before a decision",
        ),
        "inputs": {"document": {"task": {"id": task_id}}, "history": dict(history)},
    }


def replay(records: Iterable[tuple[int, Mapping[str, Any]]]) -> list[Disagreement]:
    """Re-derive every recorded decision (and history, and summary) from its inputs.

    Returns the disagreements: each names the record's line, task, attempt, the field and
    the recorded and derived values. Histories are re-folded from the ledger itself, so a
    record whose recorded history was edited is caught as well as one whose evidence or
    decision was.
    """
    state = _Replay()
    for line, rec in records:
        if rec.get("type") != "draft":  # lk-plan draft's outcome: no decision to re-derive
            state.check(line, rec)
    return state.out


#: The fields of a record that replay re-derives and compares.
DERIVED = (
    "admission",
    "decision",
    "reason",
    "attempt",
    "evidence",
    "run",
    "usage",
    "diff",
    "verify",
    "judge",
    "estimate",
)


class _Replay:
    """What replaying a ledger carries from one record to the next."""

    def __init__(self) -> None:
        self.out: list[Disagreement] = []
        # Per task, the histories the next record may start from: folded from what the
        # previous record's inputs re-derive, and folded from what it recorded. A
        # tampered record then disagrees once, and the records after it still check
        # cleanly whichever half of it (inputs or results) was edited.
        self.histories: dict[str, list[History]] = {}
        # A pool's history before each share it reserved (by pool key, task, attempt):
        # the one the admission that follows it reserved from.
        self.before_share: dict[tuple[str, str, Any], History] = {}

    def differ(
        self, line: int, rec: Mapping[str, Any], what: str, recorded: Any, derived: Any
    ) -> None:
        if recorded != derived:
            self.out.append(
                {
                    "line": line,
                    "seq": rec.get("seq"),
                    "task_id": rec.get("task_id"),
                    "attempt": rec.get("attempt"),
                    "field": what,
                    "recorded": recorded,
                    "derived": derived,
                }
            )

    def check(self, line: int, rec: Mapping[str, Any]) -> None:
        """One record: its history, then what it re-derives, compared field by field."""
        inputs_ = rec.get("inputs") or {}
        view = inputs_.get("document") or {}
        tid = str(rec.get("task_id") or "")
        self.differ(line, rec, "task_id", tid, decider.task_id(view))
        history, resync = self.starting_history(line, rec, tid)
        if rec.get("type") == "pool" and (rec.get("pool") or {}).get("event") == "reserve":
            event = rec.get("pool") or {}
            self.before_share[(tid, str(event.get("task")), event.get("attempt"))] = history
        if rec.get("type") in ("reopen", "interrupted", "pool"):
            # A new epoch: nothing to re-derive but the history it starts.
            self.histories[tid] = [budget.fold(history, rec)]
            return
        redone = (
            self.admission(line, rec, tid, history)
            if rec.get("type") == "admission"
            else _decided(rec, history)
        )
        derived: dict[str, object] = {**rec, **redone}
        for key in DERIVED:
            if key in derived or key in rec:
                self.differ(line, rec, key, rec.get(key), derived.get(key))
        self.histories[tid] = [
            budget.fold(history, derived),
            budget.fold(history, rec),
            *resync,
        ]

    def starting_history(
        self, line: int, rec: Mapping[str, Any], tid: str
    ) -> tuple[History, list[History]]:
        """The history the record starts from -- its recorded one when the ledger folds to
        it, else the folded one (a disagreement) -- and, for a record whose predecessor
        was lost, the history its own recorded one folds to (the ledger followed)."""
        candidates = self.histories.get(tid) or [budget.empty_history()]
        recorded = (rec.get("inputs") or {}).get("history")
        for candidate in candidates:
            if recorded == candidate:
                return candidate, []
        self.differ(line, rec, "inputs.history", recorded, candidates[0])
        if isinstance(recorded, dict):  # a record lost upstream: follow the ledger
            return candidates[0], [budget.fold(recorded, rec)]
        return candidates[0], []

    def admission(self, line: int, rec: Mapping[str, Any], tid: str, history: History) -> Derived:
        """An admission re-derived: the budgets' verdict on its history (and its pool's)."""
        inputs_ = rec.get("inputs") or {}
        pool = inputs_.get("pool")
        if isinstance(pool, dict):
            # The pool's history it reserved from: the one before its share's record
            # (appended just before it), else (refused, or waiting) the one the pool's
            # records fold to.
            key = budget.pool_key(str(pool.get("id") or ""))
            folded = self.histories.get(key) or [budget.empty_history()]
            mine = self.before_share.pop((key, tid, rec.get("attempt")), None)
            expected = [mine] if mine is not None else folded
            if pool.get("history") not in expected:
                self.differ(line, rec, "inputs.pool.history", pool.get("history"), expected[0])
        admission = budget.admit(
            history,
            (inputs_.get("document") or {}).get("contract") or {},
            now=str(inputs_.get("now")),
            pool=pool if isinstance(pool, dict) else None,
        )
        return {"admission": admission, "decision": admission_decision(admission)}


def _decided(rec: Mapping[str, Any], history: History) -> Derived:
    """An attempt's decision re-derived from its inputs, with the summary beside it."""
    inputs_ = rec.get("inputs") or {}
    view = inputs_.get("document") or {}
    tree = inputs_.get("tree_on_disk")
    decision = decider.decide(view, history, tree_on_disk=tree, cancel=inputs_.get("cancel"))
    summary = summarize(view)
    derived: Derived = {
        "run": summary["run"],
        "usage": summary["usage"],
        "diff": summary["diff"],
        "judge": summary["judge"],
        "verify": summary["verify"],
        "decision": decision,
        "reason": decision["reason"],
        "attempt": decision["attempt"],
        "evidence": decider.evidence_state(view, tree),
    }
    if "estimate" in rec:  # absent from records older than the estimate
        derived["estimate"] = estimate(view)
    return derived
