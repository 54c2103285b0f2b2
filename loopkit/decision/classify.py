"""Failure classes: what went wrong with an attempt, named so the controller can act on it.

Every class maps to one default action (``ACTIONS``); ``loopkit.decision.decide`` refines a few of
them with the task's history (a timeout retries once, then replans; the same fingerprint
replans, then parks). The table is published: docs/decide.md renders it for the README.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRANSIENT = "transient"
USAGE_LIMIT = "usage_limit"
INVALID_INPUT = "invalid_input"
PERMISSION = "permission"
AUTH = "auth"
TIMEOUT = "timeout"
STUCK = "stuck"
UNSUPPORTED_COMPLETION = "unsupported_completion"
NO_OP = "no_op"
SCOPE_VIOLATION = "scope_violation"
VERIFICATION_FAILURE = "verification_failure"
NO_PROGRESS = "no_progress"
STALE_EVIDENCE = "stale_evidence"
UNGROUNDED = "ungrounded"
JUDGE_NOT_MET = "judge_not_met"
BUDGET = "budget"
CANCELLED = "cancelled"
#: The worker's process crashed (a non-zero exit nothing else explains).
CRASHED = "crashed"
#: A check could not run at all (its program missing, nothing collected): not the
#: worker's failure, and no attempt is spent on it.
ENVIRONMENT = "environment"
#: The worker changed loopkit's own record (the ledger, its index, the cancellation).
TAMPERED = "tampered"
UNKNOWN = "unknown"

#: class -> (default outcome, one line on why). Order is the README table's order.
ACTIONS: dict[str, tuple[str, str]] = {
    TRANSIENT: (
        "retry",
        "overloaded, 5xx or throttled: retry after an exponential backoff with jitter",
    ),
    USAGE_LIMIT: ("blocked", "a usage limit: blocked until resume_after, never hammered"),
    AUTH: ("blocked", "credentials missing or refused: a person must fix them"),
    PERMISSION: ("blocked", "the worker was denied a permission it needs: a person decides"),
    INVALID_INPUT: ("failed", "the request itself is invalid: retrying the same input cannot help"),
    TIMEOUT: ("retry", "the run hit its time limit: retry once, then replan"),
    STUCK: ("replan", "the same tool call kept failing the same way: change the approach"),
    UNSUPPORTED_COMPLETION: (
        "retry",
        "the worker claimed done but the checks fail: retry with the evidence",
    ),
    NO_OP: ("replan", "checks pass but nothing changed where a change is required"),
    SCOPE_VIOLATION: (
        "retry",
        "the change touched files outside its scope or over its size: retry with the violations",
    ),
    VERIFICATION_FAILURE: (
        "retry",
        "a check failed with a new fingerprint (progress): retry with the failure",
    ),
    NO_PROGRESS: (
        "replan",
        "the same failure fingerprint came back: the hypothesis failed; parked after same_failure repeats",
    ),
    STALE_EVIDENCE: (
        "retry",
        "the evidence is for another tree than the one on disk: collect it again",
    ),
    UNGROUNDED: ("retry", "the judge's verdict is not grounded in files it read, or not trusted"),
    JUDGE_NOT_MET: ("retry", "the judge found the goal not met: retry with its feedback"),
    BUDGET: ("budget_exhausted", "a budget across runs is spent: checkpoint and stop"),
    CANCELLED: ("cancelled", "a person asked the loop to stop"),
    CRASHED: (
        "retry",
        "the worker crashed: retried with the tail of its output as feedback; the same crash "
        "again is no progress (replan, then park); parked otherwise only by the budgets",
    ),
    ENVIRONMENT: (
        "blocked",
        "a check could not run at all (its program is missing or not executable, its runner "
        "collected nothing) on the attempt and at the base: a person must fix the "
        "environment or the criterion; no attempt spent",
    ),
    TAMPERED: (
        "blocked",
        "loopkit's state folder (ledger, index, cancellation) changed while the worker ran: "
        "a person must look before the loop goes on",
    ),
    UNKNOWN: (
        "failed",
        "an unrecognised failure (e.g. the worker crashed): park, artifacts kept whole",
    ),
}

CLASSES: tuple[str, ...] = tuple(ACTIONS)

#: run.stop_reason -> failure class. ``completed`` and ``max_turns`` are not failures of
#: the run itself: the evidence decides those.
STOP_REASONS: dict[str, str | None] = {
    "completed": None,
    "max_turns": None,
    "timeout": TIMEOUT,
    "api_error": TRANSIENT,
    "rate_limited": TRANSIENT,
    "usage_limit": USAGE_LIMIT,
    "auth_error": AUTH,
    "invalid_request": INVALID_INPUT,
    "permission_denied": PERMISSION,
    "stuck": STUCK,
    "cancelled": CANCELLED,
    "crashed": CRASHED,
}


def classify_run(run: Mapping[str, Any] | None) -> str | None:
    """The failure class the worker's own run shows, or None when the run ended normally.

    An unknown stop reason, or a run that says it errored without a reason we know, is
    ``unknown``: never guessed into a retry.
    """
    if not run:
        return None
    reason = run.get("stop_reason")
    if reason in STOP_REASONS:
        return STOP_REASONS[reason]
    return UNKNOWN if run.get("is_error") else None


def outcome_of(failure_class: str) -> str:
    return ACTIONS[failure_class][0]
