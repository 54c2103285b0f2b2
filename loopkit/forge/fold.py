"""Folding ledgers back into one: the records CI jobs sent back as artifacts (each job's
own ledger) appended to one ledger, in the order they were recorded, each record once --
a job's ledger folded twice adds nothing the second time. A record's identity is its
content less its sequence number, which each ledger numbers on its own."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopkit.digest import sha256
from loopkit.errors import BadInput


def _identity(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "seq"}
    return sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def fold(into: Path, sources: Sequence[Path]) -> dict[str, Any]:
    from loopkit.state import ledger as ledgers

    incoming: list[tuple[str, dict[str, Any]]] = []
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
