"""Reopening a parked task: a new budget epoch, whether a person ran ``lk-plan mark
--status open`` or set the line back to ``- [ ]`` by hand (found by ``lk-plan next``).

Kept apart from ``marking`` so ``lk-plan next``, run at every turn of a loop, loads only
this when it asks.
"""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import git
from loopkit.errors import EnvironmentProblem
from loopkit.workspace import for_state_only

#: The outcomes that park a task (``ratchet.steps``' park codes).
PARKED_OUTCOMES = ("blocked", "failed", "budget_exhausted")


def reopen(
    tasks_file: str, task_id: str, *, reason: str = "", by_hand: bool = False
) -> dict[str, object] | None:
    """Start a new budget epoch for a task a person reopened: a ``reopen`` record in the
    ledger of the repository TASKS.md is in (None outside a repository: nothing spent).

    ``by_hand``: the task's line is open and nobody ran ``lk-plan mark``; it is a reopen
    only when its history ends in a park (since its last reopen) and that park's commit
    ("loopkit: park ID (...)", which marked the line parked) is on HEAD -- so a park
    whose mark never landed (a loop without --tasks, another branch's) is not one, and
    a recipe never gives a parked task a new budget by itself. The record says which.
    """
    try:
        ws = for_state_only(Path(tasks_file).resolve().parent)
    except EnvironmentProblem:
        return None
    if by_hand and not (ws.state / "ledger.jsonl").is_file():
        return None  # nothing ever ran here (ledger.DEFAULT_NAME, asked without loading it)
    from loopkit.decision import ledger, records

    book = ledger.Ledger(ws.state / ledger.DEFAULT_NAME)
    with book.transaction() as txn:
        history = txn.history(task_id)
        if by_hand:
            if history.get("last_outcome") not in PARKED_OUTCOMES:
                return None
            park = git.out(
                ["log", "-1", "--format=%H", "--fixed-strings",
                 f"--grep=loopkit: park {task_id} (", "HEAD", "--"],
                cwd=ws.root, check=False,
            )  # fmt: skip
            if not park:
                return None
        source = f"{os.path.basename(tasks_file)}: set back to '- [ ]'" if by_hand else None
        record = records.reopen_record(
            task_id,
            history,
            reason=reason,
            now=ledger.now_iso(),
            **({"source": source} if source else {}),
        )
        txn.append(record)
    return {**record, "ledger": str(book.path)}
