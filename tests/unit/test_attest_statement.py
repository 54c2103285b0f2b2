"""The statement's attempts come from the ledger's end, read backwards in chunks: every
attempt of the task, in order, whatever chunk boundary its line straddles, and a ledger
far larger than the window is never read whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit.attest import statement
from loopkit.decision.ledger import task_file_name


def _rec(task: str, n: int, pad: int) -> dict[str, object]:
    return {
        "type": "attempt",
        "task_id": task,
        "attempt": n,
        "attempt_id": f"{task}-{n}",
        "decision": {"outcome": "retry" if n < 3 else "complete", "reason": "x" * pad},
    }


def _ledger(state: Path, records: list[dict[str, object]]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "ledger.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    ids = state / "ledger.jsonl.idx" / "tasks"
    ids.mkdir(parents=True)
    for task in {str(r["task_id"]) for r in records}:
        mine = [str(r["attempt_id"]) for r in records if r["task_id"] == task]
        (ids / f"{task_file_name(task)}.attempts").write_text("\n".join(mine) + "\n")


@pytest.mark.parametrize("pad", [10, 700_000])  # lines within one chunk, lines across chunks
def test_every_attempt_of_the_task_in_order(tmp_path: Path, pad: int) -> None:
    records = []
    for n in range(1, 4):
        records += [_rec("other", n, pad), _rec("t", n, pad)]
    _ledger(tmp_path, records)
    got = statement._attempts(tmp_path, "t")
    assert [a["attempt_id"] for a in got] == ["t-1", "t-2", "t-3"]
    assert [a["outcome"] for a in got] == ["retry", "retry", "complete"]
    assert all(len(str(a["reason"])) <= 300 for a in got)


def test_a_ledger_beyond_the_window_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statement, "LEDGER_WINDOW", 4096)
    records = [_rec("t", 1, 10)] + [_rec("other", n, 500) for n in range(1, 50)]
    records.append(_rec("t", 2, 10))
    _ledger(tmp_path, records)
    # The first attempt lies beyond the window: the statement lists what it found.
    assert [a["attempt_id"] for a in statement._attempts(tmp_path, "t")] == ["t-2"]
    assert statement._attempts(tmp_path, "nobody") == []
