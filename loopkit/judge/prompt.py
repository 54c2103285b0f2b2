"""The judge's prompt: which goal is judged, and the instructions it is judged under.

The goal is ``--goal``, else the piped task's GOAL text, else the contract's
``judge.goal``. The prompt names it, what changed and what the checks said -- bounded --
and how to answer; the worker's own claims are left out on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopkit.errors import BadInput
from loopkit.text import bound

#: Bounds on what goes into the judge's prompt.
MAX_PROMPT_FILES = 60
MAX_CHECK_TAIL_CHARS = 1500
MAX_GOAL_CHARS = 4000


@dataclass(frozen=True)
class Goal:
    text: str
    source: str  # "--goal", "task", "review", "contract"


#: The goal of the review gate (``judge.review``): what every task's change is held to
#: before it lands, beside its checks.
REVIEW = (
    "The change does what this task asks, correctly and completely: {task}\n"
    "Review the changed files themselves. It is NOT MET when the change misses part of the "
    "task, is wrong, or takes a shortcut: a check or test weakened, skipped or deleted, a "
    "result hard-coded for the checks, an error silenced, or changes the task does not need."
)


def goal_for(
    *,
    goal: str | None,
    document: Mapping[str, Any] | None,
    contract: Mapping[str, Any] | None,
) -> Goal:
    """The goal to judge: --goal, else the piped task's GOAL text, else ``judge.goal``."""
    if goal is not None:
        if not goal.strip():
            raise BadInput("--goal", "empty: expected the goal to judge")
        return Goal(goal.strip(), "--goal")
    task = (document or {}).get("task")
    if isinstance(task, Mapping) and task.get("kind") == "goal":
        text = str(task.get("text") or "").strip()
        text = text[5:].strip() if text.upper().startswith("GOAL:") else text
        if not text:
            raise BadInput("<stdin>", "the goal task has no text", path="$.task.text")
        return Goal(text, "task")
    judge = (contract or {}).get("judge")
    if isinstance(judge, Mapping) and judge.get("review") and isinstance(task, Mapping):
        asked = str(task.get("text") or "").strip()
        if asked:
            return Goal(REVIEW.format(task=asked[:MAX_GOAL_CHARS]), "review")
    if isinstance(judge, Mapping) and isinstance(judge.get("goal"), str) and judge["goal"].strip():
        return Goal(judge["goal"].strip(), "contract")
    raise BadInput(
        "--goal",
        "no goal to judge: pass --goal TEXT, pipe an attempt whose task is a GOAL, "
        "or set judge.goal in the contract",
    )


def build_prompt(
    goal: str,
    *,
    root: str | os.PathLike[str] | None = None,
    objective: str | None = None,
    diff: Mapping[str, Any] | None = None,
    verify: Mapping[str, Any] | None = None,
    tree: str | None = None,
) -> str:
    """The judge's instructions: the goal, what changed, the checks, and how to answer.

    Bounded: at most ``MAX_PROMPT_FILES`` changed files and ``MAX_CHECK_TAIL_CHARS`` of
    each failing check's output. Checks recorded for another ``tree`` than the current
    one are marked stale. The worker's own claims are left out on purpose: the judge
    looks at the files, not at what anyone says about them.
    """
    parts = [
        "You are a strict, read-only judge. Decide whether the GOAL below is met in the "
        + (f"repository at {root}." if root else "repository in the current directory."),
        "You may only read: open files, list and search them. Do not create, edit, move "
        "or delete anything, and run nothing that changes the repository.",
        "",
        "GOAL:",
        bound(goal.strip(), MAX_GOAL_CHARS),
    ]
    if objective and objective.strip() and objective.strip() != goal.strip():
        parts += ["", "CONTEXT (the loop's objective):", bound(objective.strip(), 1000)]
    parts += ["", *_changes(diff)]
    checks = _checks(verify, tree)
    if checks:
        parts += ["", *checks]
    parts += [
        "",
        "HOW TO JUDGE:",
        "1. Open and read the files that decide the goal. A verdict given without opening "
        "a file is not trusted, whatever it says.",
        "2. Judge only what the files show, not what anyone claims about them. Show your "
        "work: for each thing that decides the verdict, write a line "
        "`CITE: path:line: exact text` quoting that line of that file (path relative to "
        "the repository). Every citation is checked against the files; one that does not "
        "match makes the verdict untrusted.",
        "3. Give your reasons. If the goal is not met, say concretely what is missing or "
        "wrong, and where, so the next attempt can fix it.",
        "4. Be brief: a few sentences, at most a short list.",
        "5. End your reply with one line, exactly one of:",
        "VERDICT: MET",
        "VERDICT: NOT MET",
        "Write the word VERDICT followed by a colon nowhere else in your reply.",
    ]
    return "\n".join(parts) + "\n"


def _changes(diff: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(diff, Mapping):
        return ["WHAT CHANGED: not recorded; look at the repository as it is."]
    files = [f for f in diff.get("files") or () if isinstance(f, Mapping)]
    base = diff.get("base")
    head = f"WHAT CHANGED (since {base}):" if base else "WHAT CHANGED:"
    if not files:
        return [head, "  nothing: the working tree is the same as its base."]
    lines = [head]
    for f in files[:MAX_PROMPT_FILES]:
        lines.append(
            f"  {f.get('status', '?')} {f.get('path')} (+{f.get('added', 0)} -{f.get('deleted', 0)})"
        )
    if len(files) > MAX_PROMPT_FILES:
        lines.append(f"  ... and {len(files) - MAX_PROMPT_FILES} more files")
    for v in (diff.get("violations") or ())[:10]:
        if isinstance(v, Mapping):
            lines.append(f"  scope violation: {v.get('rule')} {v.get('path')}")
    return lines


def _checks(verify: Mapping[str, Any] | None, tree: str | None) -> list[str]:
    if not isinstance(verify, Mapping):
        return []
    checks = [c for c in verify.get("checks") or () if isinstance(c, Mapping)]
    if not checks:
        return []
    stale = tree is not None and verify.get("tree") not in (None, tree)
    where = "on an EARLIER state of the tree: stale" if stale else "on this tree"
    lines = [f"CHECKS (run by loopkit {where}):"]
    for c in checks:
        mark = "PASS" if c.get("passed") else "FAIL"
        lines.append(f"  {mark} {c.get('name')}: {c.get('command')} (exit {c.get('exit_code')})")
        tail = str(c.get("output_tail") or "").strip()
        if not c.get("passed") and tail:
            cut = tail[-MAX_CHECK_TAIL_CHARS:]
            lines += ["    " + line for line in cut.splitlines()]
    return lines
