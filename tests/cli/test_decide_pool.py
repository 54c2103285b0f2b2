"""A run's pool (contract ``pool``, named by LOOPKIT_POOL): lk-decide --admit reserves each
worker's share from it in the one ledger, the decision settles it, a worker the pool
cannot cover waits while another holds a share and is refused (22) when none does, and
lk-decide --replay re-derives every pool admission."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import git, schema
from loopkit.cli.decide import main as decide_main
from loopkit.decision import budget, ledger
from tests.helpers import decide as h

# Each worker's cost share is 0.5 (worker.max_cost_usd); the pool covers two of them.
LOOP_YAML = """\
version: 1
objective: Fix the parser.
scope: {writable: ["src/**"]}
criteria: [{name: regression, run: "true", timeout: 30}]
budgets: {attempts: 3}
worker: {provider: command, command: "true", timeout: 100, max_cost_usd: 0.5}
pool: {cost_usd: 1.2}
"""


@pytest.fixture
def repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (git_repo / "loop.yaml").write_text(LOOP_YAML)
    monkeypatch.chdir(git_repo)
    monkeypatch.setenv("LOOPKIT_POOL", "run-1")
    monkeypatch.setenv("LOOPKIT_POOL_JOBS", "4")
    return git_repo


def task(tid: str) -> dict[str, Any]:
    return {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": {"id": tid, "text": tid, "kind": "task"},
    }


def admit(tid: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(decide_main, ["--admit"], input=json.dumps(task(tid)))
    out = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.exit_code, out, result.stderr


def settle(repo: Path, tid: str, usd: float) -> int:
    """lk-decide on a complete attempt of TID that spent USD (trusted)."""
    tree = git.tree_hash(repo)
    evidence = h.verify(True, None, tree=tree)
    evidence["checks"][0]["command"] = "true"
    run = h.run(cost={"usd": usd, "source": "test", "trusted": True})
    d = h.attempt(run=run, diff=h.diff(tree=tree), verify=evidence, contract_={})
    d["task"] = task(tid)["task"]
    del d["contract"]
    record = repo / ".loopkit" / "artifacts" / d["attempt_id"] / "verify.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(evidence))
    return CliRunner().invoke(decide_main, [], input=json.dumps(d)).exit_code


def admit_soon(repo: Path, tid: str) -> subprocess.CompletedProcess[str]:
    """The installed lk-decide --admit for TID, given 20 s: waiting for a share to lapse
    would take its timeout and 300 s."""
    piped = repo.parent / f"{tid}.json"
    piped.write_text(json.dumps(task(tid)))
    with piped.open() as stdin:
        return subprocess.run(
            [str(Path(sys.executable).parent / "lk-decide"), "--admit"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=20,
        )


def records(repo: Path) -> list[dict[str, Any]]:
    recs, problems = ledger.read(repo / ".loopkit" / "ledger.jsonl")
    assert problems == []
    return [r for _, r in recs]


def pool_history(repo: Path) -> dict[str, Any]:
    return ledger.Ledger(repo / ".loopkit" / "ledger.jsonl").history(budget.pool_key("run-1"))


def test_two_shares_reserved_the_third_waits_until_one_settles(repo: Path) -> None:
    assert admit("a")[0] == 0 and admit("b")[0] == 0
    held = pool_history(repo)["reserved"]
    assert [(r["task"], r["cost_usd"]) for r in held] == [("a", 0.5), ("b", 0.5)]
    # c cannot be covered (0.2 left) while a and b run: its admission (the installed
    # lk-decide, another process) waits, recording nothing.
    piped = repo.parent / "c.json"
    piped.write_text(json.dumps(task("c")))
    with piped.open() as stdin:
        waiter = subprocess.Popen(
            [str(Path(sys.executable).parent / "lk-decide"), "--admit"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    time.sleep(2.0)
    assert waiter.poll() is None
    assert [r["task_id"] for r in records(repo) if r["type"] == "admission"] == ["a", "b"]
    # a settles having spent 0.1 of its 0.5: 0.6 left, c's share fits.
    assert settle(repo, "a", 0.1) == 0
    stdout, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    out = json.loads(stdout)
    schema.validate(out, "attempt")
    assert out["admission"]["pool"]["share"] == {"cost_usd": 0.5}
    assert "waited" in err and "run-1" in err
    pool = pool_history(repo)
    assert pool["cost_usd"] == 0.1
    assert sorted(r["task"] for r in pool["reserved"]) == ["b", "c"]
    for r in records(repo):
        schema.validate(r, "ledger-record")
    # Never more reserved and spent at once than the pool holds: folded record by record.
    h_ = budget.empty_history()
    for r in records(repo):
        if r["type"] == "pool":
            h_ = budget.fold(h_, r)
            assert h_["cost_usd"] + sum(x["cost_usd"] for x in h_["reserved"]) <= 1.2 + 1e-9
    replay = CliRunner().invoke(decide_main, ["--replay", ".loopkit/ledger.jsonl"])
    assert replay.exit_code == 0, replay.stderr


def test_a_pool_nothing_running_can_free_refuses_with_22(repo: Path) -> None:
    assert admit("a")[0] == 0
    assert settle(repo, "a", 0.5) == 0
    assert admit("b")[0] == 0
    assert settle(repo, "b", 0.5) == 0
    # 0.2 left, nothing running: c is refused at once, its task's own budgets untouched.
    code, out, err = admit("c")
    assert code == 22, err
    assert out["decision"]["outcome"] == "budget_exhausted"
    assert out["decision"]["exhausted"] == ["cost_usd"]
    assert "run's pool" in out["decision"]["reason"] and "nothing running" in err
    assert not (repo / ".loopkit" / "checkpoints" / "c.json").exists()
    assert ledger.Ledger(repo / ".loopkit" / "ledger.jsonl").history("c")["reserved"] == []


def test_no_wait_when_the_running_shares_could_not_free_enough(repo: Path) -> None:
    assert admit("a")[0] == 0 and admit("b")[0] == 0
    assert settle(repo, "a", 0.8) == 0  # a spent more than its share: 0.4 left at best
    # b still runs, but even its whole share back would not cover c's: refused at once.
    code, out, err = admit("c")
    assert code == 22, err
    assert out["admission"]["pool"]["running"] == 1
    assert out["decision"]["exhausted"] == ["cost_usd"] and "nothing running" in err


def test_a_killed_workers_share_expires(repo: Path) -> None:
    assert admit("a")[0] == 0
    assert admit("b")[0] == 0  # both never settle: their workers were killed
    history = pool_history(repo)
    at = budget.parse_time(history["reserved"][0]["at"])
    assert at is not None
    later = at.timestamp() + 100 + budget.RESERVATION_GRACE_S + 1  # past timeout + grace
    from datetime import datetime, timezone

    now = datetime.fromtimestamp(later, timezone.utc).isoformat().replace("+00:00", "Z")
    contract = {"pool": {"cost_usd": 1.2}, "worker": {"max_cost_usd": 0.5, "timeout": 100}}
    pool = {"id": "run-1", "jobs": 4, "task": "c", "history": history}
    soon = budget.admit(
        budget.empty_history(), contract, now=history["reserved"][0]["at"], pool=pool
    )
    assert soon["pool"]["wait"] and not soon["admitted"]
    late = budget.admit(budget.empty_history(), contract, now=now, pool=pool)
    assert late["admitted"] and late["pool"]["running"] == 0


def test_replay_finds_a_pool_history_someone_edited(repo: Path) -> None:
    assert admit("a")[0] == 0
    assert settle(repo, "a", 0.4) == 0
    assert admit("b")[0] == 0
    path = repo / ".loopkit" / "ledger.jsonl"
    lines = path.read_text().splitlines()
    i = max(n for n, line in enumerate(lines) if json.loads(line)["type"] == "admission")
    rec = json.loads(lines[i])
    rec["inputs"]["pool"]["history"]["cost_usd"] = 0.0  # the spend hidden from b's admission
    lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(decide_main, ["--replay", str(path)])
    assert result.exit_code == 1
    fields = {d["field"] for d in json.loads(result.stdout)["disagreements"]}
    assert "inputs.pool.history" in fields, fields


def test_a_share_its_task_settled_without_the_pool_is_returned(repo: Path) -> None:
    # lk task begin's recovery records a's interrupted attempt (its loop was killed): that
    # settles a's own reservation, not the pool's. The next admission returns a's share.
    from loopkit.ratchet.steps import settle_interrupted

    assert admit("a")[0] == 0 and admit("b")[0] == 0
    assert settle_interrupted(repo / ".loopkit", "a")
    done = admit_soon(repo, "c")
    assert done.returncode == 0, done.stderr
    assert "waited" not in done.stderr
    settles = [r for r in records(repo) if r["type"] == "pool" and r["pool"]["event"] == "settle"]
    assert [(r["pool"]["task"], r["pool"]["spent"]) for r in settles] == [("a", {})]
    assert sorted(r["task"] for r in pool_history(repo)["reserved"]) == ["b", "c"]
    replay = CliRunner().invoke(decide_main, ["--replay", ".loopkit/ledger.jsonl"])
    assert replay.exit_code == 0, replay.stderr


@pytest.mark.parametrize(
    ("pool", "jobs", "needle"),
    [
        ("{cost_usd: -1}", "4", "$.pool.cost_usd"),
        ("{tokens: 1.5}", "4", "$.pool.tokens"),
        ("{coins: 3}", "4", "$.pool.coins"),
        ("{cost_usd: 1.2}", "many", "LOOPKIT_POOL_JOBS"),
    ],
)
def test_a_bad_pool_is_one_line_and_exit_3(
    repo: Path, monkeypatch: pytest.MonkeyPatch, pool: str, jobs: str, needle: str
) -> None:
    (repo / "loop.yaml").write_text(LOOP_YAML.replace("pool: {cost_usd: 1.2}", f"pool: {pool}"))
    monkeypatch.setenv("LOOPKIT_POOL_JOBS", jobs)
    code, out, err = admit("a")
    assert code == 3, err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert out == {}
    assert not (repo / ".loopkit" / "ledger.jsonl").exists() or records(repo) == []


def test_a_share_whose_admission_was_never_written_is_returned(repo: Path) -> None:
    # Killed between the pool's share and its task's admission (the share goes first):
    # the pool holds a share no task holds. The next admission returns it; replay agrees.
    from loopkit.decision.records import pool_record

    book = ledger.Ledger(repo / ".loopkit" / "ledger.jsonl")
    with book.transaction() as txn:
        key = budget.pool_key("run-1")
        share = {"at": ledger.now_iso(), "task": "a", "attempt": 1, "wall_s": 100}
        event = {"event": "reserve", "task": "a", "attempt": 1, "reservation": share}
        share["cost_usd"] = 1.0  # all but 0.2 of the pool
        txn.append(
            pool_record(
                "run-1",
                txn.history(key),
                event,
                now=share["at"],
                trigger={"kind": "manual", "source": "test"},
            )
        )
    assert admit_soon(repo, "b").returncode == 0  # else b waits for a's share to lapse
    assert sorted(r["task"] for r in pool_history(repo)["reserved"]) == ["b"]
    replay = CliRunner().invoke(decide_main, ["--replay", ".loopkit/ledger.jsonl"])
    assert replay.exit_code == 0, replay.stderr
