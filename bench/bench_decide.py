"""Decide's cost as the ledger grows: 100,000 recorded attempts within 1.2x of 100.

Two ledgers are filled with real attempt records (100 and 100,000; half of them for the
task being decided, the rest spread over 1,000 other tasks) and their indexes built once.
Then the decision path lk-decide runs -- open the ledger, take the lock, catch the index
up, read the task's history, decide, build the record, append it with fsync, update the
index -- is timed on each, alternating between the two so machine noise hits both alike.
The figure is the median of the per-pair ratios (large/small, timed back to back). The whole command (a process per decision) is
timed too, for information.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopkit.decision import decide, ledger  # noqa: E402
from loopkit.decision.records import attempt_record  # noqa: E402
from tests.helpers import decide as h  # noqa: E402

SMALL, LARGE = 100, 100_000
ROUNDS = 400
CLI_ROUNDS = 8
TARGET = 1.2


def fill(path: Path, n: int) -> None:
    """n records written in bulk (the same bytes a real append writes), then indexed once."""
    doc = h.attempt(task_id="hot", run=h.run(), diff=h.diff(), verify=h.verify(False, "fpA"))
    hist = ledger.Ledger(path.with_name("scratch.jsonl")).history("hot")
    d = decide.decide(doc, hist, tree_on_disk=h.TREE)
    template = attempt_record(
        doc,
        hist,
        d,
        tree_on_disk=h.TREE,
        cancel=None,
        trigger={"kind": "manual", "source": "bench"},
        started_at=None,
        recorded_at="2026-01-01T00:00:00.000Z",
    )
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            rec: dict[str, Any] = {
                "kind": ledger.RECORD_KIND,
                "version": 1,
                "seq": i + 1,
                **template,
            }
            rec["seq"] = i + 1
            rec["task_id"] = "hot" if i % 2 == 0 else f"task-{i % 1000}"
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    ledger.Ledger(path).history("hot")  # builds the index (once, like a first run would)


def one_decision(path: Path, i: int) -> float:
    doc = h.attempt(
        task_id="hot",
        attempt_id=f"bench-{i}",
        run=h.run(),
        diff=h.diff(),
        verify=h.verify(False, f"fp{i % 5}"),
    )
    t0 = time.perf_counter()
    h.append_attempt(ledger.Ledger(path), doc)
    return time.perf_counter() - t0


def cli_decision(repo: Path, path: Path) -> float:
    # A failed check: a decision every round (a transient failure would stop being one
    # after budgets.transient in a row: blocked).
    doc = h.attempt(task_id="hot", run=h.run(), diff=h.diff(), verify=h.verify(False, "fpA"),
                    contract_={})  # fmt: skip
    del doc["contract"]
    t0 = time.perf_counter()
    p = subprocess.run(
        [str(Path(sys.executable).parent / "lk-decide"), "--ledger", str(path)],
        input=json.dumps(doc),
        cwd=repo,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    if p.returncode not in (0, 10, 11, 20, 21, 22, 30):  # a decision, whichever
        raise SystemExit(f"lk-decide failed ({p.returncode}): {p.stderr}")
    return elapsed


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="loopkit-bench-decide-") as tmp:
        base = Path(tmp)
        small, large = base / "small" / "ledger.jsonl", base / "large" / "ledger.jsonl"
        for p, n in ((small, SMALL), (large, LARGE)):
            p.parent.mkdir()
            t0 = time.perf_counter()
            fill(p, n)
            print(
                f"filled {n:>7} records ({p.stat().st_size / 1e6:.1f} MB, indexed) in "
                f"{time.perf_counter() - t0:.1f}s"
            )
        os.sync()  # the bulk fill's dirty pages must not slow the large ledger's fsyncs
        times: dict[str, list[float]] = {"small": [], "large": []}
        cpu: dict[str, list[float]] = {"small": [], "large": []}
        for i in range(ROUNDS):
            for key, p in (("small", small), ("large", large)):
                c0 = time.process_time()
                times[key].append(one_decision(p, i))
                cpu[key].append(time.process_time() - c0)
        med = {k: statistics.median(v) for k, v in times.items()}
        # The median of pair ratios: each pair ran back to back, so a burst of disk or CPU
        # contention from elsewhere hits both sides of a pair alike.
        ratio = statistics.median(
            a / b for a, b in zip(times["large"], times["small"], strict=True)
        )
        cpu_ratio = statistics.mean(cpu["large"]) / statistics.mean(cpu["small"])
        print(
            f"decide (core path, median of {ROUNDS}): {SMALL} records {med['small'] * 1e3:.2f} ms, "
            f"{LARGE} records {med['large'] * 1e3:.2f} ms; CPU time ratio {cpu_ratio:.2f}"
        )

        repo = base / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        (repo / "loop.yaml").write_text(
            "version: 1\nobjective: bench\nscope: {writable: ['**']}\n"
            "criteria: [{name: ok, run: 'true'}]\n"
        )
        env_before = os.environ.get("LOOPKIT_STATE_DIR")
        cli: dict[str, list[float]] = {"small": [], "large": []}
        for _ in range(CLI_ROUNDS):
            cli["small"].append(cli_decision(repo, small))
            cli["large"].append(cli_decision(repo, large))
        assert os.environ.get("LOOPKIT_STATE_DIR") == env_before
        cmed = {k: statistics.median(v) for k, v in cli.items()}
        print(
            f"lk-decide (whole command, median of {CLI_ROUNDS}): {SMALL} records "
            f"{cmed['small'] * 1e3:.0f} ms, {LARGE} records {cmed['large'] * 1e3:.0f} ms "
            f"(ratio {cmed['large'] / cmed['small']:.2f}, for information)"
        )
    ok = ratio <= TARGET
    print(f"ratio {LARGE}/{SMALL}: {ratio:.2f} (target <= {TARGET}) {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
