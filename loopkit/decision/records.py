"""The ledger's records: their shapes, and the replay that re-derives them from their inputs.

A record is appended for every decision (``attempt_record``) and every admission
(``admission_record``): a readable summary of the attempt, the decision, and the exact
inputs it was derived from, so ``replay`` can re-derive each decision, history and
summary and name the records that disagree. The rules themselves are ``loopkit.decision.decide``'s;
how records are stored is ``loopkit.decision.ledger``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loopkit.decision import budget
from loopkit.decision import classify as fc
from loopkit.decision import decide as decider

if TYPE_CHECKING:
    from loopkit.sections import Decision


def summarize(view: Mapping[str, Any]) -> dict[str, Any]:
    """The record's readable summary of an attempt (derived from its inputs; replay checks it)."""
    run = view.get("run") or None
    diff = view.get("diff") or None
    verify = view.get("verify") or None
    judge = view.get("judge") or None
    out: dict[str, Any] = {
        "run": None,
        "usage": budget.usage_of(view),
        "diff": None,
        "judge": None,
    }
    if run is not None:
        out["run"] = {
            k: run.get(k)
            for k in (
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
        }
        out["run"]["cost"] = run.get("cost")
        refused = ((run.get("sandbox") or {}).get("egress") or {}).get("refused")
        if refused:  # the hosts the egress gate refused (sandbox.network: egress)
            out["run"]["refused_hosts"] = dict(refused)
    if diff is not None:
        totals = diff.get("totals") or {}
        out["diff"] = {
            "base": diff.get("base"),
            "tree": diff.get("tree"),
            "files": totals.get("files"),
            "lines": totals.get("lines"),
            "within_policy": diff.get("within_policy"),
            "violations": len(diff.get("violations") or []),
        }
        if "bytes" in totals:  # absent from records older than the changed_bytes budget
            out["diff"]["bytes"] = totals["bytes"]
    if verify is not None:
        out["verify"] = {
            "tree": verify.get("tree"),
            "passed": verify.get("passed"),
            "fingerprint": verify.get("fingerprint"),
            "checks": [
                {"name": c.get("name"), "passed": c.get("passed"), "exit_code": c.get("exit_code")}
                for c in verify.get("checks") or []
            ],
        }
        if verify.get("hint"):
            out["verify"]["hint"] = verify["hint"]
        refused = ((verify.get("sandbox") or {}).get("egress") or {}).get("refused")
        if refused:  # the hosts the egress gate refused the checks (verify.network: egress)
            out["verify"]["refused_hosts"] = dict(refused)
    else:
        out["verify"] = None
    if judge is not None:
        out["judge"] = {k: judge.get(k) for k in ("verdict", "grounded", "trusted", "provider")}
    return out


def estimate(view: Mapping[str, Any]) -> dict[str, Any] | None:
    """A plan task's estimate (its ``budget:``) beside the attempt's actual diff: lines and
    files, each with its ratio actual/estimate, and whether the diff stayed within. None
    for a task without a budget."""
    task = view.get("task") or {}
    budget_ = task.get("budget") if isinstance(task, Mapping) else None
    if not isinstance(budget_, Mapping) or not (budget_.get("lines") or budget_.get("files")):
        return None
    diff = view.get("diff") or None
    totals = (diff or {}).get("totals") or {}
    out: dict[str, Any] = {}
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
    timings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ledger record of one decided attempt: a readable summary plus the exact inputs
    (and for a plan task, its estimate beside the actual diff; ``timings``, each stage's
    time, when measured: loopkit.timing)."""
    out = {
        "type": "attempt",
        "task_id": decider.task_id(view),
        "attempt": decision["attempt"],
        "attempt_id": view.get("attempt_id"),
        "trigger": dict(trigger),
        "started_at": started_at,
        "recorded_at": recorded_at,
        **summarize(view),
        "evidence": decider.evidence_state(view, tree_on_disk),
        "decision": dict(decision),
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
) -> dict[str, Any]:
    decision = admission_decision(admission)
    inputs: dict[str, Any] = {"document": dict(view), "history": dict(history), "now": now}
    if pool is not None:
        inputs["pool"] = dict(pool)
    return {
        "type": "admission",
        "task_id": decider.task_id(view),
        "attempt": admission["attempt"],
        "attempt_id": None,
        "trigger": dict(trigger),
        "started_at": None,
        "recorded_at": now,
        "admission": dict(admission),
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
) -> dict[str, Any]:
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
        "trigger": dict(trigger),
        "started_at": None,
        "recorded_at": now,
        "decision": None,
        "reason": reason,
        "pool": {"id": pool_id, **event},
        "inputs": {"document": {"task": {"id": key}}, "history": dict(history)},
    }


def reopen_record(
    task_id: str,
    history: Mapping[str, Any],
    *,
    reason: str,
    now: str,
    source: str = "lk-plan mark --status open",
) -> dict[str, Any]:
    """A task reopened by a person (``lk-plan mark --status open`` on a parked task, or
    its line set back to ``- [ ]`` by hand: ``source``): a new budget epoch starts for it
    -- the attempts, the same-failure streaks and the spend the budgets count begin again
    (``budget.fold``)."""
    epoch = int(history.get("epoch") or 0) + 1
    return {
        "type": "reopen",
        "task_id": task_id,
        "attempt": int(history.get("attempts") or 0) + 1,
        "attempt_id": None,
        "trigger": {"kind": "manual", "source": source},
        "started_at": None,
        "recorded_at": now,
        "decision": None,
        "reason": reason or f"reopened: budget epoch {epoch}",
        "epoch": epoch,
        "inputs": {"document": {"task": {"id": task_id}}, "history": dict(history)},
    }


def interrupted_record(
    task_id: str, history: Mapping[str, Any], *, reason: str, now: str, ran: bool = True
) -> dict[str, Any]:
    """An attempt that never reached a decision (its loop was killed): the recipe that
    found it saved its tree and restored the start. It counts as an attempt -- a loop
    killed again and again still ends under its budgets -- and settles its reservation;
    ``ran``: whether its worker ran at all (one that never did is numbered, not charged)."""
    return {
        "ran": ran,
        "type": "interrupted",
        "task_id": task_id,
        "attempt": int(history.get("attempts") or 0) + 1,
        "attempt_id": None,
        "trigger": {"kind": "manual", "source": "recovery at the next start"},
        "started_at": None,
        "recorded_at": now,
        "decision": None,
        "reason": reason or "interrupted: the loop ended before a decision",
        "inputs": {"document": {"task": {"id": task_id}}, "history": dict(history)},
    }


def replay(records: Iterable[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Re-derive every recorded decision (and history, and summary) from its inputs.

    Returns the disagreements: each names the record's line, task, attempt, the field and
    the recorded and derived values. Histories are re-folded from the ledger itself, so a
    record whose recorded history was edited is caught as well as one whose evidence or
    decision was.
    """
    out: list[dict[str, Any]] = []
    # Per task, the histories the next record may start from: folded from what the
    # previous record's inputs re-derive, and folded from what it recorded. A tampered
    # record then disagrees once, and the records after it still check cleanly whichever
    # half of it (inputs or results) was edited.
    histories: dict[str, list[dict[str, Any]]] = {}
    # A pool's history before each share it reserved (by pool key, task, attempt): the
    # one the admission that follows it reserved from.
    before_share: dict[tuple[str, str, Any], dict[str, Any]] = {}

    def differ(line: int, rec: Mapping[str, Any], what: str, recorded: Any, derived: Any) -> None:
        if recorded != derived:
            out.append(
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

    for line, rec in records:
        if rec.get("type") == "draft":  # lk-plan draft's outcome: no decision to re-derive
            continue
        inputs_ = rec.get("inputs") or {}
        view = inputs_.get("document") or {}
        tid = str(rec.get("task_id") or "")
        candidates = histories.get(tid) or [budget.empty_history()]
        recorded_history = inputs_.get("history")
        differ(line, rec, "task_id", tid, decider.task_id(view))
        resync: list[dict[str, Any]] = []
        if recorded_history in candidates:
            history = recorded_history
        else:
            differ(line, rec, "inputs.history", recorded_history, candidates[0])
            history = candidates[0]
            if isinstance(recorded_history, dict):  # a record lost upstream: follow the ledger
                resync.append(budget.fold(recorded_history, rec))
        derived: dict[str, Any] = dict(rec)
        if rec.get("type") == "pool" and (rec.get("pool") or {}).get("event") == "reserve":
            event = rec.get("pool") or {}
            before_share[(tid, str(event.get("task")), event.get("attempt"))] = history
        if rec.get("type") in ("reopen", "interrupted", "pool"):
            # A new epoch: nothing to re-derive but the history it starts.
            histories[tid] = [budget.fold(history, rec)]
            continue
        if rec.get("type") == "admission":
            pool = inputs_.get("pool")
            if isinstance(pool, dict):
                # The pool's history it reserved from: the one before its share's record
                # (appended just before it), else (refused, or waiting) the one the
                # pool's records fold to.
                key = budget.pool_key(str(pool.get("id") or ""))
                folded = histories.get(key) or [budget.empty_history()]
                mine = before_share.pop((key, tid, rec.get("attempt")), None)
                expected = [mine] if mine is not None else folded
                if pool.get("history") not in expected:
                    differ(line, rec, "inputs.pool.history", pool.get("history"), expected[0])
            admission = budget.admit(
                history,
                view.get("contract") or {},
                now=str(inputs_.get("now")),
                pool=pool if isinstance(pool, dict) else None,
            )
            derived.update(admission=admission, decision=admission_decision(admission))
        else:
            tree = inputs_.get("tree_on_disk")
            decision = decider.decide(
                view, history, tree_on_disk=tree, cancel=inputs_.get("cancel")
            )
            derived.update(
                decision=decision,
                reason=decision["reason"],
                attempt=decision["attempt"],
                evidence=decider.evidence_state(view, tree),
                **summarize(view),
            )
            if "estimate" in rec:  # absent from records older than the estimate
                derived["estimate"] = estimate(view)
        for key in (
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
        ):
            if key in derived or key in rec:
                differ(line, rec, key, rec.get(key), derived.get(key))
        histories[tid] = [budget.fold(history, derived), budget.fold(history, rec), *resync]
    return out
