"""lk-decide --replay's memory on a ledger of 10,000 attempt records: <= 100 MiB.

The ledger is written once (real records: each attempt decided on the history its task's
records before it fold to, over 200 tasks, so every decision re-derives), then
``lk-decide --replay`` runs as a process of its own and its peak resident memory is read
from the kernel (``RUSAGE_CHILDREN``'s ``ru_maxrss``). Medians of three runs.

    python bench/bench_replay.py [RECORDS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopkit.decision import (  # noqa: E402
    budget,
    decide,
    ledger,
)
from loopkit.decision.records import attempt_record  # noqa: E402
from tests.helpers import decide as h  # noqa: E402

RECORDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
TASKS = 200
RUNS = 3
TARGET_MIB = 100
BIN = Path(sys.executable).parent


def fill(path: Path) -> None:
    histories: dict[str, dict[str, Any]] = {}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(RECORDS):
            tid = f"task-{i % TASKS}"
            doc = h.attempt(
                task_id=tid,
                attempt_id=f"20260101T000000Z-{i:06x}",
                run=h.run(),
                diff=h.diff(),
                verify=h.verify(False, f"fp{i % 5}"),
            )
            hist = histories.get(tid) or budget.empty_history()
            d = decide.decide(doc, hist, tree_on_disk=h.TREE)
            rec = attempt_record(
                doc,
                hist,
                d,
                tree_on_disk=h.TREE,
                cancel=None,
                trigger={"kind": "manual", "source": "bench"},
                started_at=None,
                recorded_at="2026-01-01T00:00:00.000Z",
            )
            rec = {"kind": ledger.RECORD_KIND, "version": 1, "seq": i + 1, **rec}
            histories[tid] = budget.fold(hist, rec)
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def peak_mib(path: Path) -> float:
    """The peak resident memory of one ``lk-decide --replay`` (a process of its own)."""
    code = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    argv = [sys.executable, "-c", code, str(BIN / "lk-decide"), "--replay", str(path)]
    rc, kib = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    if rc != "0":
        raise SystemExit(f"lk-decide --replay exited {rc}: the records should re-derive")
    return int(kib) / 1024


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        fill(path)
        size = os.path.getsize(path) / 2**20
        peaks = [peak_mib(path) for _ in range(RUNS)]
    peak = statistics.median(peaks)
    print(
        f"lk-decide --replay of {RECORDS} records ({size:.0f} MiB of ledger): peak "
        f"{peak:.0f} MiB resident (median of {RUNS}; target <= {TARGET_MIB} MiB)"
    )
    return 0 if peak <= TARGET_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
