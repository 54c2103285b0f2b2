"""A slice's task run again with what the forge asks of it (``lk stack address``).

The review comments, the reviews and the failing checks on the slice's pull request
become notes under its task, and the previous attempt's feedback says to address them;
``lk attempt`` runs the task -- the recipes' own attempt path, so the worker reads them in
its handoff -- in a detached worktree at the slice's head, round after round while the
decision is a retry (each retry's decided document the next round's input, as the
recipes pipe it). A complete attempt's verified tree becomes the slice's new commit on
its old head, exactly that tree; anything else leaves the slice as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loopkit import git, proc
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.forge.clients import Remark
from loopkit.forge.proof import console
from loopkit.forge.stack import Slice, Unverified
from loopkit.sections import Task

if TYPE_CHECKING:
    from loopkit.sections import Attempt, Decision

#: Rounds of one address at most (the contract's budgets may stop it sooner).
ROUNDS = 4
#: The notes a task carries at most (the handoff shows 20).
NOTES = 20
#: lk-decide's exits that run another round.
_AGAIN = (10, 11)


@dataclass(frozen=True)
class Fix:
    """A slice's task run again and complete: its new commit, exactly the verified tree."""

    commit: str
    tree: str
    decided: Attempt  # the decided attempt document
    rounds: int


def task_for(s: Slice, remarks: list[Remark], pr: int, *, text: str = "") -> Task:
    """The slice's task (``text`` when given, else the one recorded from its decided
    document), the forge's remarks first among its notes."""
    if text:
        task: Task = {"kind": "task", "id": str(s.evidence.get("task") or s.id), "text": text}
    elif s.task:
        task = Task(**s.task)
    else:
        raise BadInput(
            "--task",
            f"{s.id} has no task recorded (added without --doc): say it with --task TEXT",
        )
    notes = [r.note(pr) for r in remarks] + [str(n) for n in task.get("notes") or []]
    task["notes"] = notes[:NOTES]
    return task


def first(s: Slice, task: Task, pr: int) -> Attempt:
    """The first round's input: the task, and the review as the previous attempt's
    feedback (a retry, as lk-decide would hand it on)."""
    return {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": task,
        "decision": {
            "outcome": "retry",
            "reason": f"review: #{pr} asks for changes",
            "failure_class": "judge_not_met",
            "attempt": int(s.evidence.get("attempt") or 1),
            "feedback": (
                f"The reviewers and the checks of pull request #{pr} ask for changes to this "
                "change: each is a note under the task. Address every one of them, and keep "
                "every check passing."
            ),
        },
    }


def broke(decided: Attempt, why: str) -> Attempt:
    """The next round's input when a complete attempt broke a slice above it: its decided
    document, a retry whose feedback is that slice's failure."""
    decision: Decision = {
        **decided["decision"],  # a complete attempt's: lk-decide wrote it
        "outcome": "retry",
        "reason": "review: the change breaks a slice above it",
        "failure_class": "verification_failure",
        "feedback": (
            "Your change passed this slice's checks, but the slice stacked above it fails "
            f"its checks on top of it: {why}\nAddress the review without breaking it."
        ),
        "backoff_s": None,
    }
    decision.pop("exit_code", None)
    # A fresh worktree at the slice's head: what the last run found in its own is not carried.
    fresh = decided.copy()
    fresh.pop("run", None)
    fresh.pop("diff", None)
    fresh["decision"] = decision
    return fresh


def rerun(
    root: Path,
    s: Slice,
    document: Attempt,
    pr: int,
    *,
    contract: Path,
    state: Path,
    rounds: int = ROUNDS,
) -> Fix:
    """The task of ``document`` (``first``'s, or ``broke``'s) run in a detached worktree at
    ``s.head`` through ``lk attempt`` until its decision is not a retry; its verified tree
    committed on ``s.head``. Unverified (exit 1) when no round completes: nothing of it is
    recorded."""
    if not contract.is_file():
        raise EnvironmentProblem(f"{contract}: no loop contract to run {s.id}'s task with")
    task = document["task"]
    runs = state / "runs" / git.ref_component(task["id"]) / f"address-{os.getpid()}"
    runs.mkdir(parents=True, exist_ok=True)
    done_before = len(list(runs.glob("*.log")))
    holder = Path(tempfile.mkdtemp(prefix="lk-address-"))
    room = holder / "tree"
    env = {**os.environ, "LOOPKIT_STATE_DIR": str(state)}
    try:
        git.out(["worktree", "add", "-q", "--detach", str(room), s.head], cwd=root)
        for n in range(done_before + 1, done_before + rounds + 1):
            keep = runs / str(n)
            argv = [*console("lk"), "attempt", "--contract", str(contract), "--base", s.head]
            done = proc.run(
                [*argv, "--keep", str(keep)],
                cwd=room,
                env=env,
                input=json.dumps(document).encode(),
                output=runs / f"{n}.log",
            )
            decided = _read(keep)
            if done.exit_code == 0 and decided is not None:
                return _commit(root, s, decided, pr, rounds=n - done_before)
            if done.exit_code not in _AGAIN or decided is None:
                said = decided.get("decision") if decided else None
                why = (said.get("reason") if said else None) or _last_line(runs / f"{n}.log")
                raise Unverified(
                    f"{s.id}: its task did not complete with #{pr}'s review (lk attempt exited "
                    f"{done.exit_code}: {why}); nothing recorded or pushed; see {runs}"
                )
            document = decided
        raise Unverified(
            f"{s.id}: its task did not complete with #{pr}'s review in {rounds} round(s); "
            f"nothing recorded or pushed; see {runs}"
        )
    finally:
        git.git(["worktree", "remove", "--force", str(room)], cwd=root, check=False)
        git.git(["worktree", "prune"], cwd=root, check=False)
        shutil.rmtree(holder, ignore_errors=True)


def _read(keep: Path) -> Attempt | None:
    path = keep.parent / f"{keep.name}-decide.json"
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        got: Attempt | None = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def _last_line(log: Path) -> str:
    try:
        said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        said = []
    return said[-1][:300] if said else "no decision"


def _commit(root: Path, s: Slice, decided: Attempt, pr: int, *, rounds: int) -> Fix:
    """The complete attempt's verified tree, committed on the slice's head."""
    verify = decided.get("verify")
    tree = str((verify.get("tree") if verify else None) or "")
    if not (verify and verify.get("passed")) or not tree:
        raise Unverified(f"{s.id}: the attempt completed without a verified tree")
    message = f"{s.title}: address the review of #{pr}"
    commit = git.out(["commit-tree", tree, "-p", s.head, "-m", message], cwd=root)
    return Fix(commit=commit, tree=tree, decided=decided, rounds=rounds)
