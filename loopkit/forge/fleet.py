"""The fleet: loops run side by side as CI jobs, each with its own ledger.

``share``: the budgets that span runs (cost, tokens, wall-clock) divided between the jobs
when the plan is made, so each job's own admission holds it to its share and the fleet
together cannot spend more than the contract allows -- no job needs to see another's
ledger while it runs. ``fold``: the records the jobs sent back as artifacts (each job's
ledger) appended to one ledger, in the order they were recorded, each record once -- a
job's ledger folded twice adds nothing the second time. A record's identity is its
content less its sequence number, which each ledger numbers on its own."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from loopkit import git
from loopkit.attest import store
from loopkit.digest import sha256
from loopkit.errors import BadInput

if TYPE_CHECKING:
    from loopkit.sections import Contract, LedgerFold, Record, SliceResult

#: The budgets one run's admission reserves from and a fleet shares: divided by the jobs.
SHARED_BUDGETS: Final[tuple[Literal["cost_usd", "tokens", "wall_seconds"], ...]] = (
    "cost_usd",
    "tokens",
    "wall_seconds",
)


def share(contract: Contract, jobs: int) -> Contract:
    """The contract each of ``jobs`` jobs runs under: the spanning budgets divided (a
    whole-number budget rounded down, never below 1); everything else as it was."""
    if jobs < 1:
        raise BadInput("--jobs", f"{jobs}: at least one job")
    out = contract.copy()
    budgets = (out.get("budgets") or {}).copy()
    for key in SHARED_BUDGETS:
        value = budgets.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if key == "tokens":
            budgets[key] = max(1, int(value) // jobs)
        else:
            budgets[key] = round(value / jobs, 6)
    if budgets:
        out["budgets"] = budgets
    return out


def _identity(record: Mapping[str, object]) -> str:
    body = {k: v for k, v in record.items() if k != "seq"}
    return sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def fold(into: Path, sources: Sequence[Path]) -> LedgerFold:
    from loopkit.decision import ledger as ledgers  # fold's alone: lk stack starts without it

    incoming: list[tuple[str, Record]] = []
    problems = 0
    for source in sources:
        if not source.is_file():
            raise BadInput(str(source), "no such ledger file")
        records, bad = ledgers.read(source)
        problems += len(bad)
        incoming += [(str(r.get("recorded_at") or ""), r) for _, r in records]
    incoming.sort(key=lambda pair: pair[0])  # stable: one job's records keep their order
    added = known = 0
    book = ledgers.Ledger(into)
    with book.transaction() as txn:
        seen = {_identity(r) for _, r in ledgers.read(into)[0]} if into.is_file() else set()
        for _, record in incoming:
            key = _identity(record)
            if key in seen:
                known += 1
                continue
            seen.add(key)
            txn.append({k: v for k, v in record.items() if k != "seq"})
            added += 1
    return {
        "kind": "loopkit/ledger-fold",
        "version": 1,
        "ledger": str(into),
        "sources": [str(s) for s in sources],
        "added": added,
        "known": known,
        "skipped_lines": problems,
    }


def pack(root: Path, out: Path, *, task: str, base: str, code: int, state: Path) -> SliceResult:
    """What a fan-out job sends back, into ``out``: ``result.json`` (the task, the loop's
    exit code, the base it was pinned to, the commit it ended on), ``slice.bundle`` (that
    commit and the attempts saved under refs/loopkit/, as a git bundle: no push, no
    credential), ``ledger.jsonl`` (the job's ledger) and ``decided.json`` (the last
    decided document: its evidence)."""
    out.mkdir(parents=True, exist_ok=True)
    head = git.out(["rev-parse", "HEAD"], cwd=root)
    base = git.out(["rev-parse", f"{base}^{{commit}}"], cwd=root)
    saved = [
        r
        for r in git.out(
            ["for-each-ref", "--format=%(refname)", f"refs/loopkit/{git.ref_component(task)}/"],
            cwd=root,
        ).splitlines()
        if r
    ]
    revs = (["HEAD"] if head != base else []) + saved
    if revs and git.git(["rev-parse", "-q", "--verify", store.REF], cwd=root, check=False).stdout:
        revs.append(store.REF)  # the statements of what landed (lk attest)
    if revs:
        git.out(["bundle", "create", "-q", str(out / "slice.bundle"), *revs, f"^{base}"], cwd=root)
    ledger = state / "ledger.jsonl"
    if ledger.is_file():
        shutil.copyfile(ledger, out / "ledger.jsonl")
    runs = state / "runs" / git.ref_component(task)
    decided = sorted(runs.glob("*/*-decide.json"), key=lambda p: p.stat().st_mtime)
    if decided:
        shutil.copyfile(decided[-1], out / "decided.json")
    result: SliceResult = {
        "kind": "loopkit/slice-result",
        "version": 1,
        "task": task,
        "code": code,
        "base": base,
        "head": head,
        "bundle": bool(revs),
        "saved": saved,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def read_result(folder: Path) -> SliceResult:
    path = folder / "result.json"
    try:
        data: SliceResult = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(str(path), "no such file: not a folder lk stack pack wrote") from None
    except ValueError as e:
        raise BadInput(str(path), f"not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("kind") != "loopkit/slice-result":
        raise BadInput(str(path), "expected a loopkit/slice-result document")
    for key, kind in (("task", str), ("code", int), ("base", str), ("head", str)):
        if not isinstance(data.get(key), kind):
            raise BadInput(str(path), f"$.{key}: expected a {kind.__name__}")
    return data
