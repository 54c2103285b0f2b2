"""The in-toto Statement a landing makes: its subject the landed commit and its tree, its
predicate what verified it (schemas/attest-statement.json), built from the decided
attempt document and the task's records in the ledger."""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopkit import __version__, git, loader
from loopkit.digest import sha256
from loopkit.files import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from loopkit.sections import AttestCheck, AttestPredicate

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://loopkit.dev/attest/landing/v1"


def canonical(value: object) -> bytes:
    """The one byte form loopkit hashes and signs: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def criteria_digest(criteria: Sequence[Mapping[str, Any]]) -> str:
    """The digest of what a contract's checks run: each criterion's name and command."""
    pairs = [[str(c.get("name")), str(c.get("run"))] for c in criteria]
    return sha256(canonical(pairs)).hexdigest()


def repository(root: Path, commit: str, *, parent: str = "") -> list[str]:
    """The repository's identity at ``commit``: its root commits, sorted. A statement made
    in another repository names other roots (a fork shares them: its history is this
    one's). The last answer is kept (``<git common dir>/loopkit/attest/roots.json``): from
    a descendant of that commit, only the history since is walked. ``parent``: the
    commit's one parent, when the caller made it so (a landing's ``commit-tree -p``): its
    roots are the commit's, so a kept answer for it (or for the commit it was kept with)
    needs no git call at all."""
    cache = git.git_dirs(root).common / "loopkit" / "attest" / "roots.json"
    known: dict[str, Any] = {}
    try:
        known = loader.json_loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError, loader.LoadError):
        pass
    since, roots = known.get("commit"), known.get("roots")
    same = {since, known.get("parent")} - {None, ""}
    args = ["rev-list", "--max-parents=0", commit]
    if isinstance(roots, list) and (commit in same or (parent and parent in same)):
        found = sorted(map(str, roots))
    else:
        if (
            isinstance(since, str)
            and git.is_object_id(since)
            and isinstance(roots, list)
            and git.git(
                ["merge-base", "--is-ancestor", since, commit], cwd=root, check=False
            ).exit_code
            == 0
        ):
            args.append(f"^{since}")
        else:
            roots = []
        found = sorted({*map(str, roots or []), *git.out(args, cwd=root).split()})
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache, json.dumps({"commit": commit, "parent": parent, "roots": found}))
    except OSError:
        pass  # a cache: the next call walks the whole history again
    return found


def _get(doc: Mapping[str, Any], *path: str) -> Any:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _check(c: Mapping[str, Any], runner: str) -> AttestCheck:
    tests = c.get("tests")
    return {
        "name": str(c.get("name")),
        "command": str(c.get("command")),
        "runner": runner,
        "exit_code": c.get("exit_code"),
        "passed": bool(c.get("passed")),
        "duration_s": c.get("duration_s"),
        "output_sha256": c.get("output_sha256"),
        "tests_sha256": sha256(canonical(tests)).hexdigest() if tests else None,
    }


#: How far back from the ledger's end the task's attempts are looked for (bytes).
LEDGER_WINDOW = 64 << 20


def _attempts(state: Path, task: str) -> list[dict[str, Any]]:
    """The task's attempts and their decisions, read from the ledger's end backwards until
    each attempt its index lists is found (the ledger is never read whole)."""
    from loopkit.decision import ledger

    path = state / "ledger.jsonl"
    wanted = set(ledger.Ledger(path).attempt_ids(task))
    found: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below, read in chunks
    except OSError:
        return []
    with f:
        end = f.seek(0, os.SEEK_END)
        floor, tail = max(0, end - LEDGER_WINDOW), b""
        while end > floor and not (wanted and wanted <= found.keys()):
            start = max(floor, end - (1 << 20))
            f.seek(start)
            lines = (f.read(end - start) + tail).split(b"\n")
            tail = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                rec = _record(line)
                if rec is None or rec.get("type") != "attempt" or rec.get("task_id") != task:
                    continue
                key = str(rec.get("attempt_id") or len(order))
                if key not in found:
                    decision = rec.get("decision") or {}
                    found[key] = {
                        "attempt": rec.get("attempt"),
                        "attempt_id": rec.get("attempt_id"),
                        "outcome": decision.get("outcome"),
                        "reason": str(decision.get("reason") or "")[:300],
                    }
                    order.append(key)
            end = start
    return [found[k] for k in reversed(order)]


def _record(line: bytes) -> dict[str, Any] | None:
    if b'"attempt"' not in line:
        return None
    try:
        rec = loader.json_loads(line.decode("utf-8"))
    except (UnicodeDecodeError, loader.LoadError):
        return None
    return rec if isinstance(rec, dict) else None


def _runner(doc: Mapping[str, Any]) -> str:
    sandbox = _get(doc, "verify", "sandbox") or {}
    where = "clean room" if _get(doc, "verify", "clean_room") else "in place"
    return f"{where}; sandbox {sandbox.get('mode', 'off')}{'' if sandbox.get('used') else ' (not used)'}"


def build(
    document: Mapping[str, Any],
    *,
    root: Path,
    commit: str,
    tree: str,
    base: str,
    state: Path,
    contract_path: str | None,
    bookkeeping: Sequence[str] = (),
) -> dict[str, Any]:
    """The statement for ``commit`` (whose tree is ``tree``), landed from ``document``;
    ``bookkeeping``: the paths loopkit's mark commit right after it may change."""
    task = _get(document, "task") or {}
    run = _get(document, "run") or {}
    judge = _get(document, "judge")
    cost = _get(run, "cost") or {}
    runner = _runner(document)
    checks = [_check(c, runner) for c in _get(document, "verify", "checks") or []]
    criteria = _get(document, "contract", "criteria") or []
    predicate: AttestPredicate = {
        "base": base,
        "task": {"id": str(task.get("id") or ""), "text": str(task.get("text") or "")[:500]},
        "contract": {
            "path": contract_path,
            "sha256": _get(document, "contract_source", "sha256"),
            "criteria_sha256": criteria_digest(criteria),
        },
        "checks": checks,
        "attempts": _attempts(state, str(task.get("id") or "")),
        "decision": {
            "outcome": _get(document, "decision", "outcome"),
            "attempt": _get(document, "decision", "attempt"),
            "attempt_id": _get(document, "attempt_id"),
        },
        "worker": {
            "agent": run.get("provider"),
            "model": run.get("effective_model"),
            "version": run.get("version"),
        },
        "judge": None
        if not isinstance(judge, dict)
        else {
            "verdict": judge.get("verdict"),
            "model": judge.get("model"),
            "citations": judge.get("citations") or [],
        },
        "cost": {"usd": cost.get("usd"), "trusted": bool(cost.get("trusted"))},
        "loopkit": {"version": __version__},
        "repository": {"roots": repository(root, commit, parent=base)},
        "bookkeeping": sorted(set(bookkeeping)),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "commit", "digest": {"gitCommit": commit}},
            {"name": "tree", "digest": {"gitTree": tree}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
