"""The controller's decision: one attempt's evidence + the task's history -> the next step.

``decide`` is a pure function. Everything it reads is an argument -- the attempt
document (as ``inputs`` trims it), the task's folded history, the tree hash on disk and
the cancellation intent -- and the ledger records exactly those arguments, so
``lk-decide --replay`` re-derives every decision. Even the jitter of a backoff is derived
from the attempt id and number, never from a clock or a random source.

Order of the rules (the first that applies wins):

1. cancellation (a persisted intent, or a run that was cancelled);
2. completion: verification passed on the tree on disk, a change where one is required,
   scope held, and for a goal a grounded, trusted MET -- whatever the worker claimed;
3. the run's own failure class (transient, usage limit, auth, permission, invalid input,
   timeout, stuck, crashed);
4. the evidence: stale, scope, missing, failing (no progress / unsupported completion /
   verification failure), no-op, the judge;
5. budgets: a retry or replan that would need a spent budget becomes budget_exhausted.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from loopkit.decision import budget
from loopkit.decision import classify as fc
from loopkit.digest import sha256
from loopkit.evidence import globs
from loopkit.exitcodes import OUTCOME_CODES
from loopkit.text import clean
from loopkit.values import record

if TYPE_CHECKING:
    from loopkit.sections import Decision, Evidence, JSONObject, View

#: The id of "the task" when a document carries no task section.
DEFAULT_TASK_ID = "default"
#: Bytes of a failing check's output carried into feedback (and kept in the ledger).
TAIL_CHARS = 1500
#: Characters of one argv element, and changed files, kept in the recorded inputs.
ARG_CHARS = 400
MAX_FILES = 50
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 300.0
#: Transient failures in a row before the loop is blocked (budgets.transient).
DEFAULT_TRANSIENT = 5


def _same_crash(run: Mapping[str, Any], h: Mapping[str, Any]) -> bool:
    last = h.get("last_crash")
    return last is not None and budget.crash_signature(run) == last


def task_id(document: Mapping[str, Any]) -> str:
    task = document.get("task") or {}
    return str(task.get("id") or DEFAULT_TASK_ID)


def inputs(document: Mapping[str, Any], contract: Mapping[str, Any] | None) -> View:
    """The part of an attempt document a decision reads: what the ledger keeps for replay.

    Bulky fields (full transcripts, long outputs) are cut here, *before* deciding, so the
    recorded inputs are exactly what the decision saw.
    """
    view: JSONObject = {  # a View: the sections cut to what a decision reads
        "kind": "loopkit/attempt",
        "version": 1,
        "attempt_id": document.get("attempt_id"),
    }
    for key in ("task", "run", "diff", "verify", "judge"):
        if isinstance(document.get(key), Mapping):
            view[key] = copy.deepcopy(dict(document[key]))
    run = view.get("run")
    if run is not None:
        if isinstance(run.get("final_message"), str):
            run["final_message"] = run["final_message"][-TAIL_CHARS:]
        run.pop("side_effects", None)
        if isinstance(run.get("command"), list):  # argv may hold the whole handoff prompt
            run["command"] = [
                a if len(a) <= ARG_CHARS else a[:ARG_CHARS] + f"...({len(a)} chars)"
                for a in map(str, run["command"])
            ]
    diff = view.get("diff")
    if diff is not None and isinstance(diff.get("files"), list):
        diff["files"] = diff["files"][:MAX_FILES]  # the totals keep the full count
    verify = view.get("verify")
    if verify is not None:
        for check in verify.get("checks") or []:
            if isinstance(check.get("output_tail"), str):
                check["output_tail"] = check["output_tail"][-TAIL_CHARS:]
    judge = view.get("judge")
    if judge is not None and isinstance(judge.get("feedback"), str):
        judge["feedback"] = judge["feedback"][:TAIL_CHARS]
    if contract is not None:
        view["contract"] = {
            k: copy.deepcopy(contract[k])
            for k in (
                "budgets",
                "allow_empty_change",
                "scope",
                "worker",
                "criteria",
                "artifacts",
                "backoff",
                "judge",  # the review gate (judge.review) decides too: replay needs it
                "pool",  # a run's pool: its admissions are replayed too
            )
            if k in contract
        }
    return cast("View", view)


def _jitter(attempt_id: str | None, attempt: int, streak: int) -> float:
    """A number in [0, 1) fixed by the attempt: replays give the same backoff."""
    digest = sha256(f"{attempt_id or ''}:{attempt}:{streak}".encode()).digest()
    return float(int.from_bytes(digest[:8], "big")) / float(2**64)


def backoff_s(
    attempt_id: str | None,
    streak: int,
    *,
    attempt: int = 1,
    base_s: float = BACKOFF_BASE_S,
    max_s: float = BACKOFF_CAP_S,
) -> float:
    """Exponential backoff with "equal jitter": half fixed, half jittered, capped.

    ``streak`` is the number of transient failures in a row before this one; the jitter
    comes from the attempt's id and number, so a replay computes the same value. The
    contract's ``backoff: {base_s, max_s}`` sets the start and the cap.
    """
    base: float = min(max_s, base_s * float(2 ** max(0, min(streak, 60))))
    return round(base / 2 + base / 2 * _jitter(attempt_id, attempt, streak), 3)


def _failing(verify: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The failing checks the attempt answers for (not those already failing at the base)."""
    required = verify.get("required")
    return [
        c
        for c in verify.get("checks") or []
        if not c.get("passed") and (required is None or c.get("name") in required)
    ]


def _failure_text(verify: Mapping[str, Any]) -> str:
    failing = _failing(verify)
    if not failing:
        return f"verification failed (fingerprint {verify.get('fingerprint')})"
    parts = []
    for c in failing:
        part = f"check {c.get('name')!r} failed (exit {c.get('exit_code')})"
        worse = c.get("blocking_tests") or []
        if worse:
            part += ": tests " + ", ".join(map(str, worse[:10]))
            part += f" and {len(worse) - 10} more" if len(worse) > 10 else ""
        parts.append(part)
    tail = str(failing[0].get("output_tail") or "").strip()
    text = "; ".join(parts)
    if tail:
        text += f"\n--- output of {failing[0].get('name')!r} (tail) ---\n{tail[-TAIL_CHARS:]}"
    return text


def decision(
    outcome: str,
    failure_class: str | None,
    reason: str,
    attempt: int,
    *,
    feedback: str = "",
    backoff: float | None = None,
    resume_after: str | None = None,
    **extra: Any,
) -> Decision:
    """The fields of a decision section; ``extra`` adds others (``exhausted``, ``cause``, ...)."""
    out: Decision = {
        "outcome": outcome,
        # Both quote worker and check output; loops print them and write them to memory.
        "reason": clean(reason),
        "failure_class": failure_class,
        "backoff_s": backoff,
        "resume_after": resume_after,
        "feedback": clean(feedback),
        "attempt": attempt,
        "exit_code": int(OUTCOME_CODES[outcome]),
    }
    out.update(extra)  # type: ignore[typeddict-item]  # the schema's other fields
    return out


def evidence_state(document: Mapping[str, Any], tree_on_disk: str | None) -> Evidence:
    """Whether verification and diff are present, current, and what they say."""
    verify = document.get("verify") or None
    diff = document.get("diff") or None
    stale: list[str] = []
    if verify is not None:
        if tree_on_disk is None:
            stale.append(
                "the tree on disk could not be hashed, so the evidence cannot be bound to it"
            )
        elif verify.get("tree") != tree_on_disk and (
            verify.get("clean_room") or verify.get("tree_after") != tree_on_disk
        ):
            # The tree the checks ran on, or the one they left behind (a check's own
            # debris, e.g. caches not ignored), is current; anything else is not.
            stale.append(
                f"verification ran on tree {str(verify.get('tree'))[:12]}, "
                f"the tree on disk is {tree_on_disk[:12]}"
            )
        recorded = document.get("verify_recorded")
        if recorded == "differs":
            stale.append(
                "the verify section differs from the evidence lk-verify recorded for this "
                "attempt (edited after the checks ran?)"
            )
        elif recorded == "missing" and document.get("run"):
            stale.append("lk-verify recorded no evidence for this attempt")
        stale.extend(_foreign_checks(verify, document.get("contract")))
        if diff is not None and diff.get("tree") and diff.get("tree") != verify.get("tree"):
            stale.append(
                f"the diff was taken on tree {str(diff.get('tree'))[:12]}, "
                f"verification on {str(verify.get('tree'))[:12]}"
            )
    out: Evidence = {
        "verified": verify is not None,
        "passed": bool(verify and verify.get("passed")),
        "fingerprint": verify.get("fingerprint") if verify else None,
        "stale": bool(stale),
        "stale_why": stale,
    }
    if verify is not None and not document.get("run"):
        # No worker ran: the checks on the untouched tree (loop.sh --reproduce). The
        # failure is recorded; the attempts budget does not count it.
        out["reproduction"] = True
    return out


def _foreign_checks(verify: Mapping[str, Any], contract: Any) -> list[str]:
    """Checks in the evidence that are not the contract's: a name it does not have, or a
    command other than the one it gives (the evidence is for other rules)."""
    criteria = (contract or {}).get("criteria") if isinstance(contract, Mapping) else None
    if not isinstance(criteria, list):
        return []
    runs = {str(c.get("name")): str(c.get("run")) for c in criteria if isinstance(c, Mapping)}
    out = []
    for check in verify.get("checks") or []:
        name = str(check.get("name"))
        if name not in runs:
            out.append(f"the evidence holds a check {name!r} the contract does not have")
        elif check.get("command") is not None and str(check.get("command")) != runs[name]:
            out.append(
                f"check {name!r} ran {str(check.get('command'))[:80]!r}, the contract says "
                f"{runs[name][:80]!r}"
            )
    return out


def decide(
    document: Mapping[str, Any],
    history: Mapping[str, Any] | None,
    *,
    tree_on_disk: str | None,
    cancel: Mapping[str, Any] | None = None,
) -> Decision:
    """The decision section for one attempt. Pure and deterministic in its arguments."""
    h = dict(history or budget.empty_history())
    n = int(h.get("attempts") or 0) + 1
    contract = document.get("contract") or {}
    budgets = contract.get("budgets") or {}
    task = document.get("task") or {}
    run = document.get("run") or None
    diff = document.get("diff") or None
    judge = document.get("judge") or None
    attempt_id = document.get("attempt_id")
    claimed = bool(run and run.get("claimed_complete"))

    # 1. Cancellation wins over everything: a person said stop.
    if cancel:
        why = cancel.get("reason") or "cancelled"
        return decision("cancelled", fc.CANCELLED, f"cancellation requested: {why}", n)
    if run and run.get("stop_reason") == "cancelled":
        return decision("cancelled", fc.CANCELLED, "the worker's run was cancelled", n)
    tampered = document.get("state_tampered")
    if tampered:
        return decision(
            "blocked",
            fc.TAMPERED,
            "loopkit's state changed while the worker ran: " + "; ".join(map(str, tampered)),
            n,
        )

    ev = evidence_state(document, tree_on_disk)
    allow_empty = bool(contract.get("allow_empty_change") or task.get("allow_empty"))
    changed = bool(diff and (diff.get("files") or (diff.get("totals") or {}).get("files")))
    violations = _scope_violations(diff, budgets) + _protected_changed_by_checks(
        document.get("verify"), contract
    )
    is_goal = task.get("kind") == "goal" or _reviewed(contract)
    judge_ok = bool(
        judge and judge.get("verdict") == "MET" and judge.get("grounded") and judge.get("trusted")
    )

    # 2. Completion needs every piece of evidence; the worker's claim is only recorded.
    if (
        ev["verified"]
        and ev["passed"]
        and not _checks_not_run(document.get("verify"), contract)
        and not ev["stale"]
        and diff is not None
        and (changed or allow_empty)
        and not violations
        and (judge_ok or not is_goal)
    ):
        what = "a change" if changed else "no change (allowed)"
        why = f"verification passed on the tree on disk with {what} inside scope"
        if is_goal:
            why += "; the judge's grounded verdict is MET"
            if task.get("kind") != "goal":
                why += " (review)"
        if not claimed and run is not None:
            why += " (the worker did not claim completion; the evidence decides)"
        return decision("complete", None, why, n)

    cls, reason, feedback, extra = _classify(
        _Case(document, h, ev, changed=changed, allow_empty=allow_empty, violations=violations)
    )
    outcome, reason, extra = _act(
        cls, reason, h, budgets, run, attempt_id, extra, backoff=contract.get("backoff")
    )

    # 5. A loop that would go on must still have budget for another attempt.
    if outcome in ("retry", "replan"):
        after = budget.fold(
            h,
            {
                "type": "attempt",
                "usage": budget.usage_of(document),
                "evidence": ev,
                "run": {"stop_reason": (run or {}).get("stop_reason")},
                "decision": {"outcome": outcome, "failure_class": cls},
            },
        )
        spent = budget.exhausted(after, contract)
        if spent:
            return decision(
                "budget_exhausted",
                fc.BUDGET,
                f"budget exhausted ({', '.join(spent)}) after attempt {n}; the attempt itself "
                f"called for {outcome}: {reason}",
                n,
                feedback=feedback,
                exhausted=spent,
                cause=cls,
            )
    return decision(outcome, cls, reason, n, feedback=feedback, **extra)


def _scope_violations(
    diff: Mapping[str, Any] | None, budgets: Mapping[str, Any]
) -> list[dict[str, str]]:
    if diff is None:
        return []
    out = [
        # A whole-change violation (a size budget) says its numbers, not "*".
        {"rule": str(v.get("rule")), "path": str(v.get("detail") or v.get("path"))}
        if str(v.get("path")) == "*"
        else {"rule": str(v.get("rule")), "path": str(v.get("path"))}
        for v in diff.get("violations") or []
    ]
    totals = diff.get("totals") or {}
    rules = {v["rule"] for v in out}
    for key, limit_key in (
        ("lines", "changed_lines"),
        ("files", "changed_files"),
        ("bytes", "changed_bytes"),
    ):
        limit = budgets.get(limit_key)
        used = totals.get(key)
        if limit and isinstance(used, int) and used > limit and limit_key not in rules:
            out.append({"rule": limit_key, "path": f"{used} {key} changed; budget {limit}"})
    if not out and diff.get("within_policy") is False:
        out.append({"rule": "policy", "path": "(the diff reports the policy violated)"})
    return out


def _checks_not_run(verify: Mapping[str, Any] | None, contract: Mapping[str, Any]) -> list[str]:
    """The contract's acceptance checks the verify section has no result for (--only)."""
    ran = {str(c.get("name")) for c in (verify or {}).get("checks") or []}
    names = [str(c.get("name")) for c in contract.get("criteria") or [] if isinstance(c, Mapping)]
    return [n for n in names if n not in ran]


def _protected_changed_by_checks(
    verify: Mapping[str, Any] | None, contract: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Protected paths a check itself changed (verify.changed_by_checks): the diff, taken
    before the checks, never saw them, and the tree on disk now holds them."""
    protected = (contract.get("scope") or {}).get("protected") or []
    changed = (verify or {}).get("changed_by_checks") or []
    if not protected or not changed:
        return []

    return [
        {"rule": "protected_changed_by_check", "path": str(path)}
        for path in changed
        if globs.matches(str(path), protected)
    ]


#: What a rule says of an attempt that did not complete: (class, reason, feedback, extra
#: fields for the decision).
Classified = tuple[str, str, str, "JSONObject"]


@record
class _Case:
    """One attempt that did not complete, as the rules read it: its sections, its task's
    history, the evidence's state, and the extra fields the decision will carry."""

    document: Mapping[str, Any]
    h: Mapping[str, Any]
    ev: Mapping[str, Any]
    changed: bool
    allow_empty: bool
    violations: list[dict[str, str]]

    def __post_init__(self) -> None:
        document = self.document
        self.run: Mapping[str, Any] | None = document.get("run") or None
        self.verify: Mapping[str, Any] | None = document.get("verify") or None
        self.diff: Mapping[str, Any] | None = document.get("diff") or None
        self.judge: Mapping[str, Any] | None = document.get("judge") or None
        self.task: Mapping[str, Any] = document.get("task") or {}
        self.contract: Mapping[str, Any] = document.get("contract") or {}
        self.claimed = bool(self.run and self.run.get("claimed_complete"))
        self.extra: JSONObject = {}

    def says(self, cls: str, reason: str, feedback: str = "") -> Classified:
        return cls, reason, feedback, self.extra


def _run_failed(c: _Case) -> Classified | None:
    """The run's own failure (a timeout, a crash, a stuck worker, an API error...)."""
    run = c.run
    run_class = fc.classify_run(run)
    if run_class is None or run is None:
        return None
    detail = run.get("error") or run.get("final_message") or ""
    detail = str(detail).strip().splitlines()[0][:300] if str(detail).strip() else ""
    reason = f"the worker's run ended with {run.get('stop_reason')}"
    if detail:
        reason += f": {detail}"
    feedback = ""
    if run_class == fc.STUCK:
        stuck = run.get("stuck") or {}
        feedback = (
            "The previous attempt was stopped because it repeated the same failing action"
            + (f" ({stuck.get('tool')}: {stuck.get('error')})" if stuck else "")
            + ". Do not repeat it; take a different approach."
        )
    elif run_class == fc.TIMEOUT:
        feedback = "The previous attempt ran out of time. Make a smaller, focused change."
    elif run_class == fc.CRASHED:
        c.extra["crash"] = budget.crash_signature(run)  # the next attempt compares
        tail = str(run.get("final_message") or "").strip()[-1500:]
        feedback = (
            f"The previous attempt crashed (exit {run.get('exit_code')}): {detail or '?'}"
            + (f"\nIts last output:\n{tail}" if tail and tail != detail else "")
            + "\nFind why before changing the code again."
        )
        if _same_crash(run, c.h):
            repeats = int(c.h.get("same_crash") or 0) + 1
            c.extra["repeats"] = repeats
            return c.says(
                fc.NO_PROGRESS,
                f"no progress: the same crash as the previous attempt (repeat {repeats}): {detail}",
                "The worker crashed the same way again: the approach does not work. "
                "Rethink it.\n" + feedback,
            )
    return c.says(run_class, reason, feedback)


def _stale(c: _Case) -> Classified | None:
    """Evidence about another tree than the one on disk."""
    if c.verify is None or not c.ev["stale"]:
        return None
    return c.says(
        fc.STALE_EVIDENCE,
        f"stale evidence: {'; '.join(c.ev['stale_why'])}",
        "The evidence does not describe the tree on disk: collect the diff and run "
        "verification again before deciding.",
    )


def _out_of_scope(c: _Case) -> Classified | None:
    """Scope violations; the same ones as last time are no progress."""
    violations = c.violations
    if not violations:
        return None
    listed = "; ".join(f"{v['rule']}: {v['path']}" for v in violations[:20])
    sig = budget.violation_signature(violations)
    if sig is not None and sig == c.h.get("last_violations"):
        repeats = int(c.h.get("same_violation") or 0) + 1
        return (
            fc.NO_PROGRESS,
            f"no progress: the same scope violations as the previous attempt "
            f"(repeat {repeats}): {listed}",
            "The same scope violations again: the approach needs a change the scope does "
            "not allow. Find another way, inside the scope: " + listed,
            {"violations": violations, "repeats": repeats},
        )
    return (
        fc.SCOPE_VIOLATION,
        f"scope violated ({len(violations)}): {listed}",
        "The change broke the task's scope. Undo or avoid these: "
        + listed
        + ". Change only files inside the writable scope and keep the change within its size.",
        {"violations": violations},
    )


def _cannot_run(c: _Case) -> Classified | None:
    """A check that could not run at all: the environment's failure, not the worker's."""
    verify = c.verify
    if verify is None or not verify.get("environment") or c.ev["passed"]:
        return None
    first = verify["environment"][0]
    more = len(verify["environment"]) - 1
    return c.says(
        fc.ENVIRONMENT,
        f"the check {first.get('name')} cannot run: `{str(first.get('command'))[:200]}`: "
        f"{first.get('why')}"
        + (f" (and {more} more)" if more > 0 else "")
        + "; not the worker's failure: install what is missing or fix the criterion "
        "(no attempt spent)",
    )


def _unverified(c: _Case) -> Classified | None:
    """No verification at all, or one that left out some of the contract's checks."""
    if c.verify is None:
        return c.says(
            fc.VERIFICATION_FAILURE,
            "no verification evidence: the attempt cannot complete without lk-verify",
            "Nothing was verified. Run the acceptance checks.",
        )
    unrun = _checks_not_run(c.verify, c.document.get("contract") or {})
    if c.ev["passed"] and unrun:
        return c.says(
            fc.VERIFICATION_FAILURE,
            f"incomplete verification: {', '.join(unrun[:20])} did not run (lk-verify --only?)",
            "Not every acceptance check ran: " + ", ".join(unrun[:20]) + ". Run them all.",
        )
    return None


def _checks_failed(c: _Case) -> Classified | None:
    """Failing checks: the same fingerprint as last time is no progress; a claim of
    success over them is an unsupported completion; else a verification failure."""
    verify = c.verify
    if verify is None or c.ev["passed"]:
        return None
    fp = c.ev["fingerprint"]
    # What a person reads: the failing check's own fingerprint (the one lk-verify
    # printed) when one check failed; the attempt's combined one otherwise.
    failing = _failing(verify)
    shown = (
        f"{failing[0].get('name')} {failing[0].get('fingerprint')}"
        if len(failing) == 1 and failing[0].get("fingerprint")
        else fp
    )
    failure = _failure_text(verify)
    claim_note = (
        " The worker claimed the task was complete, but the checks fail: the claim is "
        "an unsupported completion."
        if c.claimed
        else ""
    )
    if fp is not None and fp == c.h.get("last_fingerprint"):
        repeats = int(c.h.get("same_failure") or 0) + 1
        c.extra["repeats"] = repeats
        return c.says(
            fc.NO_PROGRESS,
            f"no progress: the same failure ({shown}) as the previous attempt (repeat {repeats})",
            "The last hypothesis failed: the change did not alter the failure (the same "
            f"{shown}). Rethink the cause before editing again." + claim_note + "\n" + failure,
        )
    if c.claimed:
        return c.says(
            fc.UNSUPPORTED_COMPLETION,
            f"unsupported completion: the worker claimed done, verification failed ({shown})",
            "Unsupported completion: you reported the task complete, but verification "
            "fails. Do not claim completion until the checks pass.\n" + failure,
        )
    progress = " (a new fingerprint: progress)" if c.h.get("last_fingerprint") is not None else ""
    return c.says(fc.VERIFICATION_FAILURE, f"verification failed: {shown}{progress}", failure)


def _no_change(c: _Case) -> Classified | None:
    """No diff evidence, or nothing changed where the task requires a change."""
    if c.diff is None:
        return c.says(
            fc.VERIFICATION_FAILURE,
            "no diff evidence: whether anything changed is unknown (run lk-diff)",
            "Nothing shows what changed. Collect the diff.",
        )
    if not c.changed and not c.allow_empty:
        return c.says(
            fc.NO_OP,
            "no-op: the checks pass but nothing changed, and this task requires a change"
            + (" (the worker claimed completion)" if c.claimed else ""),
            "No file was changed. The task requires a change: the acceptance checks passing "
            "on the unchanged tree do not complete it.",
        )
    return None


def _reviewed(contract: Mapping[str, Any]) -> bool:
    """The review gate is on (``judge.review``): every task needs the judge's MET."""
    judge = contract.get("judge")
    return isinstance(judge, Mapping) and bool(judge.get("review"))


def _goal_unmet(c: _Case) -> Classified | None:
    """A goal -- or, behind the review gate, any task -- without a grounded, trusted MET
    from the judge."""
    if c.task.get("kind") != "goal" and not _reviewed(c.contract):
        return None
    judge = c.judge
    if judge is None:
        return c.says(
            fc.UNGROUNDED,
            "a goal needs the judge's verdict and there is none (run lk-judge)"
            if c.task.get("kind") == "goal"
            else "the review gate (judge.review) needs the judge's verdict and there is none",
            "The goal has not been judged."
            if c.task.get("kind") == "goal"
            else "The change has not been reviewed.",
        )
    if not judge.get("grounded") or not judge.get("trusted"):
        what = "not grounded in files it read" if not judge.get("grounded") else "not trusted"
        return c.says(
            fc.UNGROUNDED,
            f"the judge's verdict ({judge.get('verdict')}) is {what}",
            str(judge.get("feedback") or ""),
        )
    what = "the goal not met" if c.task.get("kind") == "goal" else "the change not ready (review)"
    return c.says(fc.JUDGE_NOT_MET, f"the judge found {what}", str(judge.get("feedback") or ""))


#: The rules, in the order they are asked (docs/decide.md): the run's own failure first,
#: then the evidence -- stale, out of scope, a check that cannot run, missing, failing --
#: then the change itself and, for a goal, the judge. The first that speaks decides.
RULES = (
    _run_failed,
    _stale,
    _out_of_scope,
    _cannot_run,
    _unverified,
    _checks_failed,
    _no_change,
    _goal_unmet,
)


def _classify(case: _Case) -> Classified:
    """(class, reason, feedback, extra fields) for an attempt that did not complete: what
    the first of ``RULES`` that speaks says."""
    for rule in RULES:
        found = rule(case)
        if found is not None:
            return found
    return case.says(fc.UNKNOWN, "the evidence fits no known class")


def _act(
    cls: str,
    reason: str,
    h: Mapping[str, Any],
    budgets: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    attempt_id: str | None,
    extra: JSONObject,
    backoff: Mapping[str, Any] | None = None,
) -> tuple[str, str, JSONObject]:
    """The outcome for a class, refined by the task's history."""
    outcome = fc.outcome_of(cls)
    extra = dict(extra)
    if cls == fc.TRANSIENT:
        streak = int(h.get("transient_streak") or 0)
        shape = backoff or {}
        extra["backoff"] = backoff_s(
            attempt_id,
            streak,
            attempt=int(h.get("attempts") or 0) + 1,
            base_s=float(shape.get("base_s") or BACKOFF_BASE_S),
            max_s=float(shape.get("max_s") or BACKOFF_CAP_S),
        )
        if run and run.get("resume_after"):
            extra["resume_after"] = run.get("resume_after")
        most = int(budgets.get("transient") or DEFAULT_TRANSIENT)
        reason += f" (transient failure {streak + 1} in a row; no attempt spent)"
        if streak + 1 >= most:
            outcome = "blocked"
            extra.pop("backoff", None)
            reason += f": budgets.transient ({most}) reached, a person should look"
    elif cls == fc.USAGE_LIMIT:
        resume = (run or {}).get("resume_after")
        extra["resume_after"] = resume
        reason += f"; resume after {resume}" if resume else "; the reset time is unknown"
    elif cls == fc.TIMEOUT:
        before = int(h.get("timeouts") or 0)
        limit = budgets.get("timeouts")
        if limit and before + 1 >= int(limit):
            outcome = "failed"
            reason += f" (timeout {before + 1}, the timeouts limit is {limit})"
        elif before >= 1:
            outcome = "replan"
            reason += f" (timeout {before + 1}: retried once already, replan)"
    elif cls == fc.NO_PROGRESS:
        limit = int(budgets.get("same_failure") or 2)
        if int(extra.get("repeats") or 1) >= limit:
            outcome = "failed"
            reason += f"; the same failure came back {extra.get('repeats')} times (same_failure: {limit}): park"
    elif cls == fc.UNKNOWN:
        reason += "; artifacts kept whole"
    extra.pop("repeats", None)
    return outcome, reason, extra
