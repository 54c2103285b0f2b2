"""The checkpoint lk-decide leaves when a budget runs out: what was spent, what is left, why.

One file per task, ``<state>/checkpoints/<task>.json`` (the task's name as the ledger's
index names it), rewritten whole and synced at every exhaustion -- of a decision, or of
an admission refused before a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit.decision import budget, ledger
from loopkit.files import atomic_write

if TYPE_CHECKING:
    from typing import TypedDict

    class Checkpoint(TypedDict):
        """What an exhausted task leaves in the state folder's checkpoints/: why it
        stopped, and its budgets' state then."""

        kind: str
        version: int
        task_id: str
        at: str
        exit_reason: str
        outcome: str
        exhausted: list[str]
        used: dict[str, float | None]
        limits: dict[str, float]
        fractions: dict[str, float]
        last_fingerprint: str | None
        last_outcome: str | None
        last_class: str | None
        cost_untrusted_usd: float | None


KIND = "loopkit/checkpoint"


def build(
    task_id: str,
    decision: Mapping[str, Any],
    history: Mapping[str, Any],
    contract: Mapping[str, Any],
) -> Checkpoint:
    """The checkpoint of an exhausted task: the decision's reason, the budgets' state."""
    return {
        "kind": KIND,
        "version": 1,
        "task_id": task_id,
        "at": ledger.now_iso(),
        "exit_reason": decision["reason"],
        "outcome": decision["outcome"],
        "exhausted": decision.get("exhausted") or [],
        "used": budget.used(history),
        "limits": budget.limits(contract),
        "fractions": budget.fractions(history, contract),
        "last_fingerprint": history.get("last_fingerprint"),
        "last_outcome": history.get("last_outcome"),
        "last_class": history.get("last_class"),
        "cost_untrusted_usd": history.get("cost_untrusted_usd"),
    }


def write(state: Path, task_id: str, payload: Mapping[str, Any]) -> Path:
    """Write a task's checkpoint whole (atomic, synced); its path."""
    path = state / "checkpoints" / f"{ledger.task_file_name(task_id)}.json"
    atomic_write(path, json.dumps(dict(payload), indent=2, allow_nan=False) + "\n", sync=True)
    return path
