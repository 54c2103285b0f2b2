"""The ledger under kill -9 and under 8 concurrent writers: no completed record lost or torn."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopkit.decision import ledger
from loopkit.decision.records import replay
from tests.helpers import decide as h

ROOT = Path(__file__).resolve().parents[2]
WRITER = [sys.executable, "-c", "from tests.helpers.decide import writer_main; writer_main()"]


def start_writer(path: Path, count: int, task: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [*WRITER, str(path), str(count), task],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def tokens_of(path: Path) -> list[str]:
    records, _ = ledger.read(path)
    return [r["trigger"]["source"] for _, r in records]


@pytest.mark.longest
def test_kill_9_during_500_writes_loses_no_completed_record(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    rng = random.Random(20260101)
    acknowledged: list[str] = []
    injected = 0
    kills = 0
    while len(tokens_of(path)) < 500:
        left = 500 - len(tokens_of(path))
        proc = start_writer(path, left, "crashy")
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        kills += 1
        acknowledged += [t for t in out.split() if t != "ready"]
        if kills % 4 == 1:  # a crash mid-write: half a record, no newline
            with open(path, "ab") as f:
                f.write(b'{"kind":"loopkit/ledger-record","version":1,"seq":99999,"task_')
            injected += 1
    records, problems = ledger.read(path)
    written = [r["trigger"]["source"] for _, r in records]
    assert len(written) >= 500
    assert len(set(written)) == len(written), "a record was written twice"
    missing = set(acknowledged) - set(written)
    assert not missing, f"completed records lost: {sorted(missing)[:5]}"
    assert kills >= 3
    # every torn piece is reported (none is fatal) and no whole record was glued onto one
    assert len(problems) >= injected
    assert all("skipped" in p.message for p in problems)
    # the index agrees with the ledger, and the attempts are numbered without a gap
    assert ledger.Ledger(path).history("crashy")["attempts"] == len(records)
    assert [r["attempt"] for _, r in records] == list(range(1, len(records) + 1))
    # a torn *last* record: reported as such, then the next append still lands whole
    with open(path, "ab") as f:
        f.write(b'{"kind":"loopkit/ledger-record","ver')
    _, problems = ledger.read(path)
    assert "torn last record" in problems[-1].message
    ldg = ledger.Ledger(path)
    rec = h.append_attempt(ldg, h.attempt(task_id="crashy", run=h.run()))
    assert rec["attempt"] == len(records) + 1
    assert any("torn" in p.message for p in ldg.problems)
    records2, _ = ledger.read(path)
    assert records2[-1][1]["seq"] == rec["seq"]


def test_eight_writers_at_once_every_record_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    procs = [start_writer(path, 15, "shared" if i % 2 else f"own-{i}") for i in range(8)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    records, problems = ledger.read(path)
    assert problems == []
    assert len(records) == 120
    for line in path.read_text().splitlines():
        json.loads(line)  # every line is one whole JSON record
    assert sorted(r["seq"] for _, r in records) == list(range(1, 121))
    acknowledged = {t for out in outs for t in out.split() if t != "ready"}
    assert acknowledged == {r["trigger"]["source"] for _, r in records}
    shared = [r["attempt"] for _, r in records if r["task_id"] == "shared"]
    assert shared == list(range(1, 61)), "concurrent decisions saw a stale history"
    assert ledger.Ledger(path).history("shared")["attempts"] == 60
    assert not replay(records), "every concurrent decision re-derives"


def test_eight_lk_decide_commands_at_once(git_repo: Path) -> None:
    """The real command, 8 processes started together on one task: 8 whole records, 1..8."""
    (git_repo / "loop.yaml").write_text(
        "version: 1\nobjective: x\nscope: {writable: ['**']}\n"
        "criteria: [{name: ok, run: 'true'}]\nbudgets: {attempts: 50, transient: 50}\n"
    )
    doc = h.attempt(task_id="together", run=h.run("api_error"), contract_={})
    del doc["contract"]
    lk_decide = str(Path(sys.executable).parent / "lk-decide")
    doc_file = git_repo.parent / "attempt.json"
    doc_file.write_text(json.dumps(doc))
    procs = []
    for _ in range(8):
        with open(doc_file) as stdin:
            procs.append(
                subprocess.Popen(
                    [lk_decide],
                    cwd=git_repo,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [10] * 8, [e for _, e in outs]
    records, problems = ledger.read(git_repo / ".loopkit" / "ledger.jsonl")
    assert problems == [] and len(records) == 8
    assert sorted(r["attempt"] for _, r in records) == list(range(1, 9))
    # each saw the streak before it: the backoffs grow in ledger order
    streaks = [r["inputs"]["history"]["transient_streak"] for _, r in records]
    assert streaks == list(range(8))
    printed = sorted(json.loads(o)["decision"]["attempt"] for o, _ in outs)
    assert printed == list(range(1, 9))
