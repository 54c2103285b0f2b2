"""The handoff: the prompt a worker starts from, built from evidence and bounded in size.

It says what to do (the task, the contract's objective), where (writable scope, what is
protected), how success is judged (the named checks), what went wrong last time (failing
check tails, scope violations, the judge's and the decision's feedback) and the project's
memory (short retrospectives of earlier parks, when the contract names a memory file).

Every part has its own byte budget, so a 268 KB test log becomes a tail of a few hundred
bytes and the whole handoff stays under ``MAX_BYTES`` however much evidence there is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loopkit.boundary.secrets import scrub
from loopkit.text import clean, cut

#: The whole handoff is cut to this many bytes (UTF-8).
MAX_BYTES = 8 * 1024
TAIL_BYTES = 700  # per failing check
MAX_CHECKS = 4
MAX_VIOLATIONS = 12
FEEDBACK_BYTES = 900  # judge / decision feedback each
MEMORY_BYTES = 1800
TEXT_BYTES = 1500  # task text, objective

#: Sections of a previous attempt carried as feedback (and dropped from a new attempt).
PREVIOUS_SECTIONS = ("run", "diff", "verify", "judge", "decision")


def _globs(items: Any) -> str:
    if not items:
        return "(none)"
    return ", ".join(f"`{g}`" for g in items)


def _task(task: Mapping[str, Any] | None) -> list[str]:
    if not task:
        return []
    head = "# Goal" if task.get("kind") == "goal" else "# Task"
    tid = f" ({task['id']})" if task.get("id") else ""
    out = [f"{head}{tid}", cut(str(task.get("text", "")).strip(), TEXT_BYTES), ""]
    if task.get("kind") == "goal":
        out += ["A reviewer will check this goal by reading the code: make it true.", ""]
    notes = [str(n).strip() for n in task.get("notes") or [] if str(n).strip()]
    if notes:
        out += ["## Notes", *(f"- {cut(n, TEXT_BYTES)}" for n in notes[:20]), ""]
    return out


def _contract(contract: Mapping[str, Any] | None, task: Mapping[str, Any] | None) -> list[str]:
    if not contract:
        return []
    out: list[str] = []
    if contract.get("objective"):
        out += ["## Objective", cut(str(contract["objective"]).strip(), TEXT_BYTES), ""]
    scope = contract.get("scope") or {}
    writable = list(scope.get("writable") or [])
    if task and task.get("scope"):
        writable = list(task["scope"])
    out += ["## Scope", f"- You may change: {_globs(writable)}"]
    if scope.get("always_allowed"):
        out.append(f"- Also allowed: {_globs(scope['always_allowed'])}")
    if scope.get("add_only"):
        out.append(
            f"- Add new files, never change or delete existing ones: {_globs(scope['add_only'])}"
        )
    if scope.get("protected"):
        out.append(f"- Never touch: {_globs(scope['protected'])}")
    out.append("- Changes outside this scope are rejected and undone.")
    out.append("")
    checks = contract.get("criteria") or []
    if checks:
        out.append("## How the change is checked")
        for c in checks[:20]:
            out.append(f"- {c.get('name')}: `{cut(str(c.get('run', '')), 300)}`")
        out.append(
            "Done means: the task's own checks pass, and no check or test that passed "
            "before your change fails. What already failed before the task started does "
            "not block it, unless the task names it."
        )
        if (contract.get("verify") or {}).get("prove_new_tests"):
            out.append(
                "A fix must come with a test that fails without your change and passes with "
                "it: a test that passes on the unfixed code is no evidence."
            )
        out.append("")
    return out


def _feedback(previous: Mapping[str, Any] | None) -> list[str]:
    if not previous:
        return []
    verify = previous.get("verify") or {}
    out = _checks(verify)
    if out and verify.get("hint"):
        out.append(f"(Note: {cut(str(verify['hint']), 400)})")
    diff = previous.get("diff") or {}
    out += _rules("### Scope violations (these changes were not allowed)", diff.get("violations"))
    judge = previous.get("judge") or {}
    if judge and (judge.get("verdict") != "MET" or not judge.get("grounded", True)):
        out.append(f"### Reviewer: {judge.get('verdict', 'NOT_MET')}")
        if judge.get("feedback"):
            out.append(cut(str(judge["feedback"]).strip(), FEEDBACK_BYTES))
    run = previous.get("run") or {}
    refused = [r for r in run.get("refused") or [] if isinstance(r, Mapping)]
    out += _rules("### Writes refused before they happened (outside the scope)", refused)
    if run.get("stuck"):
        st = run["stuck"]
        out.append(
            f"### You were stopped for repeating a failing `{st.get('tool')}` call "
            f"{st.get('repeats')} times: {cut(str(st.get('error', '')), 200)}. "
            "Try a different approach."
        )
    elif run.get("stop_reason") in ("timeout", "max_turns"):
        out.append(f"### The previous attempt ran out of time or turns ({run['stop_reason']}).")
    decision = previous.get("decision") or {}
    text = str(decision.get("feedback") or "")
    if out and _TAIL_MARK in text:
        text = text.split(_TAIL_MARK, 1)[0]  # the check's tail is shown above already
    if text.strip():
        out.append("### What to do differently")
        out.append(cut(str(text).strip(), FEEDBACK_BYTES))
    if not out:
        return []
    return ["## Feedback from the previous attempt", *out, ""]


#: Where lk-decide's feedback carries a failing check's output (loopkit.decision.decide).
_TAIL_MARK = "\n--- output of "
MAX_TESTS = 15


def _rules(title: str, broken: Sequence[Mapping[str, object]] | None) -> list[str]:
    """``title`` over the paths and the rules they broke (the first MAX_VIOLATIONS)."""
    if not broken:
        return []
    out = [title, *(f"- {b.get('path')}: {b.get('rule')}" for b in broken[:MAX_VIOLATIONS])]
    if len(broken) > MAX_VIOLATIONS:
        out.append(f"- ... and {len(broken) - MAX_VIOLATIONS} more")
    return out


def _checks(verify: Mapping[str, Any]) -> list[str]:
    """The failing checks: first what this task must fix (its own checks, what passed at
    the base, the tests it broke or names), then -- marked as such, without their
    output -- what already failed on the untouched tree before it started."""
    failing = [c for c in verify.get("checks") or [] if not c.get("passed")]
    required = verify.get("required")
    mine = [c for c in failing if required is None or c.get("name") in required]
    known = {
        str(k.get("name")): list(k.get("tests") or []) for k in verify.get("known_failures") or []
    }
    out: list[str] = []
    for c in mine[:MAX_CHECKS]:
        out.append(f"### Check `{c.get('name')}` failed (exit {c.get('exit_code')})")
        worse = c.get("blocking_tests") or []
        if c.get("judged") == "per_test":  # its other failing tests failed at the base
            others = [t for t in (c.get("tests") or {}).get("failed") or [] if t not in worse]
            if others:
                known[str(c.get("name"))] = others
        if worse:
            broke = set(c.get("regressions") or [])
            out.append("These tests must pass:")
            for t in worse[:MAX_TESTS]:
                why = "passed before your change" if t in broke else "named by the task"
                out.append(f"- `{t}` ({why})")
            if len(worse) > MAX_TESTS:
                out.append(f"- ... and {len(worse) - MAX_TESTS} more")
        tail = str(c.get("output_tail") or "").rstrip()
        if tail:
            out += ["```", cut(tail, TAIL_BYTES, keep="tail"), "```"]
    if len(mine) > MAX_CHECKS:
        out.append(f"({len(mine) - MAX_CHECKS} more failing checks not shown)")
    for c in (verify.get("whole_tree") or {}).get("checks") or []:
        if c.get("blocking_tests"):
            shown = ", ".join(f"`{t}`" for t in c["blocking_tests"][:MAX_TESTS])
            out.append(f"### Check `{c.get('name')}` with your new tests: failing: {shown}")
    proof = verify.get("proof") or {}
    if proof and not proof.get("proven"):
        out.append("### Not proven by a test")
        out += [f"- {cut(str(w), 300)}" for w in proof.get("why") or []]
    if known:
        out.append(
            "### Already failing before this task started (not caused by your change; "
            "they do not block it)"
        )
        for name, tests in list(known.items())[: MAX_CHECKS * 2]:
            shown = ", ".join(f"`{t}`" for t in tests[:MAX_TESTS])
            more = f" and {len(tests) - MAX_TESTS} more" if len(tests) > MAX_TESTS else ""
            out.append(f"- check `{name}`" + (f": {shown}{more}" if shown else ""))
    return out


def _memory(memory: str | None, limit: int = MEMORY_BYTES) -> list[str]:
    if not memory or not memory.strip():
        return []
    return [
        "## Lessons from earlier attempts (memory)",
        cut(memory.strip(), limit, keep="tail"),
        "",
    ]


CLOSING = [
    "## How to finish",
    "- Make the smallest change that does the task; keep every passing check and test "
    "passing; stay inside the scope.",
    "- Do not commit, push, or install packages: loopkit verifies and commits.",
    "- End with one short line saying what you changed, or what blocked you.",
]


def read_memory(root: Path, name: str | None) -> str | None:
    """The memory file the contract names (relative to the repository root), if present."""
    if not name:
        return None
    path = Path(name) if Path(name).is_absolute() else root / name
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 4 * MEMORY_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def previous_attempt(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The sections of a finished attempt in a piped document (None for a fresh one)."""
    if not document:
        return None
    found = {k: document[k] for k in PREVIOUS_SECTIONS if isinstance(document.get(k), Mapping)}
    return found or None


def build(
    *,
    task: Mapping[str, Any] | None = None,
    contract: Mapping[str, Any] | None = None,
    previous: Mapping[str, Any] | None = None,
    memory: str | None = None,
    extra: Sequence[str] = (),
    limit: int = MAX_BYTES,
) -> str:
    """The handoff text. Parts are dropped from the end of the priority list if over ``limit``."""
    parts = [
        _task(task),
        _contract(contract, task),
        _feedback(previous),
        list(extra),
        CLOSING,
        _memory(memory),
    ]
    text = _join(parts)
    # Over budget: shrink the memory first (its newest part stays), then the feedback;
    # drop the memory only if that is still not enough; then cut the whole.
    if len(text.encode("utf-8")) > limit:
        parts[5] = _memory(memory, MEMORY_BYTES // 3)
        text = _join(parts)
    if len(text.encode("utf-8")) > limit:
        parts[2] = [cut("\n".join(parts[2]), limit // 3, keep="head"), ""]
        text = _join(parts)
    if len(text.encode("utf-8")) > limit:
        parts[5] = []
        text = _join(parts)
    return str(scrub(cut(text, limit)))


def _join(parts: Sequence[Sequence[str]]) -> str:
    # Feedback, tails and memory come from worker and check output: no control sequences
    # reach the prompt file or a person reading it.
    return clean("\n".join(line for part in parts for line in part)).strip() + "\n"
