"""A pull request's body: the evidence behind its slice, for the person who reviews it.

What the checks said on the slice's exact tree, the attempts and their cost from the
ledger, the judge's verdict and citations; the stack's other pull requests; "Closes #N"
on the last slice only (the one whose merge finishes the parent issue), "Closes #C" for
a slice's own child issue.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loopkit.boundary.egress import refused_text
from loopkit.forge.stack import Slice, Stack

if TYPE_CHECKING:
    from loopkit.sections import Attempt, SliceEvidence

MARK = "<!-- loopkit:stack -->"


def from_document(doc: Attempt) -> SliceEvidence:
    """The evidence a decided attempt document carries (what it does not name left out)."""
    task, decision, judge = doc.get("task"), doc.get("decision"), doc.get("judge")
    out: SliceEvidence = {}
    if task and task.get("id") is not None:
        out["task"] = task["id"]
    if decision and decision.get("attempt") is not None:
        out["attempt"] = decision["attempt"]
    if decision and decision.get("outcome") is not None:
        out["outcome"] = decision["outcome"]
    if judge:
        out["judge"] = {
            "verdict": judge.get("verdict"),
            "grounded": judge.get("grounded"),
            "citations": [str(c) for c in judge.get("citations") or []][:20],
        }
    return out


def from_ledger(ledger: Path, task: str) -> SliceEvidence:
    """The task's attempts and cost, from the ledger (nothing when there is none)."""
    if not task or not ledger.is_file():
        return {}
    from loopkit.decision import ledger as ledgers

    records, _ = ledgers.read(ledger)
    runs = [r for _, r in records if r.get("task_id") == task and r.get("type") != "admission"]
    cost, trusted = 0.0, True
    for r in runs:
        usage = r.get("usage")
        spent = usage.get("cost_usd") if usage else None
        if usage and spent is not None:
            cost += float(spent)
            trusted = trusted and bool(usage.get("cost_trusted"))
    outcomes = [str(d.get("outcome")) for r in runs if (d := r.get("decision"))]
    refused: dict[str, int] = {}
    for r in runs:
        for host, n in ((r.get("run") or {}).get("refused_hosts") or {}).items():
            refused[host] = refused.get(host, 0) + int(n)
    return {
        "attempts": len(runs),
        "cost_usd": round(cost, 6),
        "cost_trusted": trusted,
        "outcomes": outcomes,
        "refused_hosts": refused,
    }


def render(stack: Stack, s: Slice, signed: frozenset[str] = frozenset()) -> str:
    """The body of ``s``'s pull request; ``signed``: the slices whose head carries a signed
    statement on the remote (refs/notes/loopkit-attest, docs/attest.md)."""
    live = stack.live()
    index = live.index(s)
    ev = s.evidence
    lines = [
        MARK,
        f"Slice {index + 1} of {len(live)} of stack `{stack.name}`: `{s.id}`.",
        "",
        f"Verified head `{s.head}` (tree `{s.tree}`), built on `{s.fork[:12]}`.",
        "",
    ]
    verify = ev.get("verify")
    if verify and verify.get("checks"):
        lines += ["| check | result | seconds |", "|---|---|---|"]
        for c in verify["checks"]:
            secs = c.get("duration_s")
            lines.append(
                f"| {c.get('name')} | {'pass' if c.get('passed') else 'FAIL'} | "
                f"{'' if secs is None else f'{float(secs):.1f}'} |"
            )
        lines.append("")
    if ev.get("task"):
        what = f"Task `{ev['task']}`"
        if ev.get("attempts") is not None:
            what += f": {ev['attempts']} attempt(s)"
            if ev.get("outcomes"):
                what += " (" + ", ".join(ev["outcomes"]) + ")"
        if ev.get("cost_usd") is not None:
            label = (
                "" if ev.get("cost_trusted", True) else " (untrusted: the CLI's own price table)"
            )
            what += f", cost ${float(ev['cost_usd']):.2f}{label}"
        lines += [what + ".", ""]
    if ev.get("refused_hosts"):
        lines += [f"Hosts the egress gate refused: {refused_text(ev['refused_hosts'])}.", ""]
    judge = ev.get("judge")
    if judge:
        lines.append(f"Judge: {judge.get('verdict')} (grounded: {judge.get('grounded')}).")
        lines += [f"- {c}" for c in judge.get("citations") or []]
        lines.append("")
    if s.id in signed:
        lines += [
            f"Signed statement of what verified it: the note of `{s.head[:12]}` under "
            "`refs/notes/loopkit-attest` (`git fetch origin refs/notes/loopkit-attest:"
            f"refs/notes/loopkit-attest && lk attest verify {s.head[:12]}`).",
            "",
        ]
    others = [f"#{o.pr}" if o.pr else f"`{o.branch}`" for o in live]
    lines += ["Stack: " + " → ".join(others), ""]
    if s.issue:
        lines.append(f"Closes #{s.issue}")
    if stack.issue and s is live[-1]:
        lines.append(f"Closes #{stack.issue}")
    elif stack.issue:
        lines.append(f"Part of #{stack.issue}")
    return "\n".join(lines).rstrip() + "\n"
