"""The ruling: whether what the judge said stands, and what the next attempt is told.

Only a grounded MET from a run that ended normally and changed nothing stands; every
other outcome is NOT_MET with a reason (``REASONS``). The explanation, bounded, becomes
``judge.feedback`` for the next attempt's handoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loopkit.judge import verdict as verdicts
from loopkit.judge.observation import Observed
from loopkit.judge.prompt import Goal
from loopkit.text import bound, clean

if TYPE_CHECKING:
    from loopkit.sections import Judge

#: Why a verdict is NOT_MET (``judge.reason``); None when the judge's MET stands.
NOT_MET = "not_met"  # the judge itself said NOT MET
UNGROUNDED = "ungrounded"  # MET without a single file read
NO_VERDICT = verdicts.NO_VERDICT  # no VERDICT line at all
MALFORMED = verdicts.MALFORMED  # the last VERDICT line says something else
TRUNCATED = "truncated"  # the stream ended before the provider's final result
RUN_FAILED = "run_failed"  # the run failed: API error, max turns, timeout, cancelled, ...
TREE_CHANGED = "tree_changed"  # the working tree's hash changed while the judge ran
NOT_READ_ONLY = "not_read_only"  # the stream shows a write that succeeded
MISCITED = "miscited"  # a CITE line that does not match the tree on disk
REASONS = (
    NOT_MET,
    UNGROUNDED,
    NO_VERDICT,
    MALFORMED,
    TRUNCATED,
    RUN_FAILED,
    TREE_CHANGED,
    NOT_READ_ONLY,
    MISCITED,
)

#: The longest feedback the next attempt is handed.
MAX_FEEDBACK_CHARS = 4000


def decide(observed: Observed) -> tuple[verdicts.Reading, str | None]:
    """(what the reply says, why the verdict is NOT_MET or None when MET stands)."""
    reading = verdicts.parse(observed.reply)
    if observed.tree_before and observed.tree_after and observed.tree_before != observed.tree_after:
        return reading, TREE_CHANGED
    if observed.files_written:
        return reading, NOT_READ_ONLY
    if observed.failed:
        return reading, RUN_FAILED
    if not observed.ended:
        return reading, TRUNCATED
    if reading.reason is not None:
        return reading, reading.reason
    if reading.said == verdicts.NOT_MET:
        return reading, NOT_MET
    if any(not c.get("ok") for c in observed.citations):
        return reading, MISCITED
    if not grounded_by(observed):
        return reading, UNGROUNDED
    return reading, None


def grounded_by(observed: Observed) -> list[str]:
    """What grounds the verdict: the files the judge read, and those it cited correctly."""
    cited = [str(c["path"]) for c in observed.citations if c.get("ok")]
    return list(dict.fromkeys([*observed.files_read, *cited]))


def section(
    observed: Observed,
    *,
    goal: Goal | None = None,
    model: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Judge:
    """The ``judge`` section of the attempt document."""
    reading, reason = decide(observed)
    met = reason is None
    grounded = bool(grounded_by(observed)) and reason != MISCITED
    body: Judge = {
        "verdict": verdicts.MET if met else verdicts.NOT_MET,
        "grounded": grounded,
        "trusted": met or (reason == NOT_MET and grounded),
        "files_read": list(observed.files_read),
        "feedback": feedback(observed, reading, reason),
        "provider": observed.provider,
        "reason": reason,
        "said": reading.said,
        "verdict_line": clean(reading.line) if reading.line is not None else None,
        "model": model,
        "stop_reason": observed.stop_reason,
        "error": clean(observed.error) if observed.error is not None else None,
        "denied": [clean(d) for d in observed.denied],
        "files_written": list(observed.files_written),
        "citations": list(observed.citations),
        "read_only": {
            "checked": observed.tree_before is not None and observed.tree_after is not None,
            "tree_before": observed.tree_before,
            "tree_after": observed.tree_after,
            "changed": bool(
                observed.tree_before
                and observed.tree_after
                and observed.tree_before != observed.tree_after
            ),
            "changes": list(observed.changes),
        },
    }
    if goal is not None:
        body["goal"] = goal.text
        body["goal_source"] = goal.source
    if extra:
        body.update(extra)  # type: ignore[typeddict-item]  # session_id, transcript, ...
    return body


def feedback(observed: Observed, reading: verdicts.Reading, reason: str | None) -> str:
    """What the next attempt's handoff carries: the judge's reasons, bounded."""
    said = reading.reasons.strip()
    if reason is None:
        head = "The judge found the goal met."
    elif reason == NOT_MET:
        head = "The judge found the goal NOT met." + (" Its reasons:" if said else "")
    elif reason == UNGROUNDED:
        head = (
            "The judge said MET without opening a single file or citing one line of it; an "
            "ungrounded verdict is not trusted, so the goal still counts as not met."
        )
    elif reason == MISCITED:
        wrong = [
            f"{c['path']}:{c['line']} ({c.get('why')})" for c in observed.citations if not c["ok"]
        ]
        head = (
            "The judge cited what is not in the tree ("
            + ", ".join(wrong[:10])
            + "); a verdict that misquotes the work is not trusted."
        )
    elif reason == TREE_CHANGED:
        paths = ", ".join(f"{c['status']} {c['path']}" for c in observed.changes[:20])
        head = (
            "The judge changed the working tree"
            + (f" ({paths})" if paths else "")
            + "; its verdict is refused."
        )
    elif reason == NOT_READ_ONLY:
        head = (
            "The judge wrote "
            + ", ".join(observed.files_written[:20])
            + " although it runs read-only; its verdict is refused."
        )
    elif reason == RUN_FAILED:
        head = f"The judge's run failed ({observed.stop_reason or 'error'}"
        head += f": {observed.error})." if observed.error else ")."
    elif reason == TRUNCATED:
        head = "The judge's reply was cut short (no final result in its stream)."
    elif reason == NO_VERDICT:
        head = "The judge gave no VERDICT line, so the goal counts as not met."
    else:
        head = f"The judge's last VERDICT line is not a verdict: {reading.line!r}."
    text = head if not said else f"{head}\n{said}"
    return bound(clean(text), MAX_FEEDBACK_CHARS)  # the reply is the judge's own words


def passed(body: Mapping[str, Any]) -> bool:
    """Exit 0 material: a MET that is grounded (and so trusted)."""
    return bool(
        body.get("verdict") == verdicts.MET and body.get("grounded") and body.get("trusted")
    )
