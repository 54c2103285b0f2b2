"""Builders for attempt documents and ledgers used by the decide, budget, ledger and report tests."""

from __future__ import annotations

import copy
from typing import Any

TREE = "a" * 40
OTHER_TREE = "b" * 40
SHA = "0" * 64

CONTRACT: dict[str, Any] = {
    "version": 1,
    "objective": "Fix blank-line handling in parse_headers.",
    "scope": {"writable": ["src/**", "tests/**"], "protected": [], "always_allowed": []},
    "criteria": [{"name": "regression", "run": "pytest -q", "timeout": 60}],
    "budgets": {"attempts": 6, "same_failure": 2},
    "worker": {"provider": "command", "command": "true", "timeout": 600},
    "allow_empty_change": False,
}


def contract(**budgets: Any) -> dict[str, Any]:
    c = copy.deepcopy(CONTRACT)
    c["budgets"].update(budgets)
    return c


def run(stop_reason: str = "completed", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "provider": "command",
        "command": ["worker"],
        "stop_reason": stop_reason,
        "is_error": stop_reason != "completed",
        "claimed_complete": False,
        "effective_model": "scripted-model",
        "usage": {"input_tokens": 100, "output_tokens": 20, "turns": 3, "tool_calls": 2},
        "cost": {"usd": 0.25, "source": "provider", "trusted": True},
        "duration_s": 12.5,
    }
    out.update(kw)
    return out


def diff(
    files: int = 1, lines: int = 4, *, tree: str = TREE, violations: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "base": "HEAD",
        "tree": tree,
        "files": [
            {"path": f"src/parser/f{i}.py", "status": "M", "added": lines, "deleted": 0}
            for i in range(files)
        ],
        "totals": {"files": files, "lines": lines * files},
        "violations": violations or [],
        "within_policy": not violations,
    }


def verify(
    passed: bool, fingerprint: str | None = None, *, tree: str = TREE, tail: str = ""
) -> dict[str, Any]:
    fp = None if passed else (fingerprint or "fp-default")
    return {
        "tree": tree,
        "passed": passed,
        "fingerprint": fp,
        "checks": [
            {
                "name": "regression",
                "command": "pytest -q",
                "exit_code": 0 if passed else 1,
                "passed": passed,
                "duration_s": 1.5,
                "output_tail": tail or ("1 passed" if passed else "ValueError: not enough values"),
                "output_sha256": SHA,
                "fingerprint": fp,
            }
        ],
    }


def judge(verdict: str = "MET", *, grounded: bool = True, trusted: bool = True) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "grounded": grounded,
        "trusted": trusted,
        "files_read": ["src/parser/headers.py"],
        "feedback": "looked at headers.py" if verdict == "MET" else "the body is still parsed",
        "provider": "command",
    }


def attempt(
    *,
    kind: str = "task",
    task_id: str = "fix-parser",
    allow_empty: bool = False,
    attempt_id: str = "20260101T000000Z-abc123",
    contract_: dict[str, Any] | None = None,
    **sections: Any,
) -> dict[str, Any]:
    """A decision-input view (what ``loopkit.decision.decide.inputs`` produces)."""
    task: dict[str, Any] = {"id": task_id, "text": "fix the parser", "kind": kind}
    if allow_empty:
        task["allow_empty"] = True
    doc: dict[str, Any] = {
        "kind": "loopkit/attempt",
        "version": 1,
        "attempt_id": attempt_id,
        "task": task,
        "contract": contract_ if contract_ is not None else contract(),
    }
    doc.update({k: v for k, v in sections.items() if v is not None})
    return doc


def append_attempt(
    ldg: Any, doc: dict[str, Any], *, tree: str = TREE, token: str = ""
) -> dict[str, Any]:
    """What lk-decide does under the ledger's lock: history, decision, record, append."""
    from loopkit.decision import decide, records

    with ldg.transaction() as txn:
        history = txn.history(decide.task_id(doc))
        d = decide.decide(doc, history, tree_on_disk=tree)
        rec = records.attempt_record(
            doc,
            history,
            d,
            tree_on_disk=tree,
            cancel=None,
            trigger={"kind": "manual", "source": token or "default"},
            started_at=None,
            recorded_at="2026-01-01T00:00:00.000Z",
        )
        out: dict[str, Any] = txn.append(rec)
        return out


def writer_main() -> None:
    """A child process for the crash and concurrency tests.

    argv: LEDGER COUNT TASK. Appends COUNT attempt records for TASK; after each durable
    append prints its token (pid-i) on stdout, so the parent knows which were completed.
    """
    import os
    import sys

    from loopkit.decision.ledger import Ledger

    path, count, task = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ldg = Ledger(path)
    print("ready", flush=True)
    for i in range(count):
        token = f"{os.getpid()}-{i}"
        doc = attempt(task_id=task, run=run(), diff=diff(), verify=verify(False, f"fp{i % 3}"))
        append_attempt(ldg, doc, token=token)
        print(token, flush=True)
