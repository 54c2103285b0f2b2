"""What judges the worker cannot be moved by the worker: the contract file it runs under,
the contract cache, a hand-edited document."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import BIN, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

#: Without a sandbox: what loopkit detects must hold on its own.
OFF = {"mode": "off"}

# Broken code, and loop.yaml rewritten so that its only check always passes.
REWRITE_CONTRACT = """
import json
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
data = json.loads(Path("loop.yaml").read_text())
for c in data["criteria"]:
    c["run"] = "echo ok"
Path("loop.yaml").write_text(json.dumps(data))
"""


def test_a_rewritten_contract_does_not_change_the_checks(tmp_path: Path) -> None:
    p = make_project(tmp_path, REWRITE_CONTRACT, sandbox=OFF, budgets={"attempts": 2})
    before = p.head()
    proc = loop(p)
    assert p.worker_calls() >= 1
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["checks"][0]["command"] == "grep -qx good src/value.txt"
    diff = p.docs("fix-value", "diff")[0]["diff"]
    assert any(v["rule"] == "control_file" for v in diff["violations"]), diff["violations"]


# The contract cache keyed by content: a worker that writes entries for the contract's
# exact bytes (it can compute every key) with a check that always passes.
POISON_CACHE = """
import glob, json, os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
data = json.loads(Path("loop.yaml").read_text())
for c in data["criteria"]:
    c["run"] = "echo ok"
for folder in (".loopkit/cache", ".git/loopkit/cache"):
    for entry in glob.glob(folder + "/contract-*.json"):
        Path(entry).write_text(json.dumps(data))
# and one of its own, for a key loopkit never wrote
Path(".git/loopkit/cache/contract-planted.json").write_text(json.dumps(data))
"""


def test_a_poisoned_contract_cache_does_not_change_the_checks(tmp_path: Path) -> None:
    p = make_project(tmp_path, POISON_CACHE, sandbox=OFF, budgets={"attempts": 2})
    # Fill the cache the way a commit hook would, so there is an entry to poison.
    subprocess.run([str(BIN / "lk-verify")], cwd=p.root, env=recipe_env(), capture_output=True)
    assert list((p.root / ".git/loopkit/cache").glob("contract-*.json"))
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    for doc in p.docs("fix-value", "verify"):
        assert doc["verify"]["checks"][0]["command"] == "grep -qx good src/value.txt"
    # lk-invoke puts back only what the cache held before the worker: the next command to
    # meet the contract (a commit hook, the next loop) reads the real checks.
    entries = list((p.root / ".git/loopkit/cache").glob("contract-*.json"))
    assert entries and not [e for e in entries if "echo ok" in e.read_text()]
    assert not (p.root / ".git/loopkit/cache/contract-planted.json").exists()
    after = subprocess.run([str(BIN / "lk-verify")], cwd=p.root, env=recipe_env(),
                           capture_output=True, text=True)  # fmt: skip
    assert json.loads(after.stdout)["checks"][0]["command"] == "grep -qx good src/value.txt"


def _stage(cmd: str, cwd: Path, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / cmd), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=recipe_env(),
        timeout=60,
    )


def test_a_hand_edited_verify_section_is_not_evidence(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        'Path("src").mkdir(exist_ok=True)\nPath("src/value.txt").write_text("bad\\n")\n',
        sandbox=OFF,
    )
    start = json.dumps(
        {"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "t", "kind": "task"}}
    )
    out = _stage("lk-invoke", p.root, start, "--contract", "loop.yaml")
    out = _stage("lk-diff", p.root, out.stdout, "--contract", "loop.yaml")
    out = _stage("lk-verify", p.root, out.stdout, "--contract", "loop.yaml")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    # The right tree hashes, a failing check turned into a pass by hand.
    for check in doc["verify"]["checks"]:
        check.update(passed=True, exit_code=0, fingerprint=None)
    doc["verify"]["passed"] = True
    decided = _stage("lk-decide", p.root, json.dumps(doc), "--contract", "loop.yaml")
    assert decided.returncode != 0, decided.stderr
    reason = json.loads(decided.stdout)["decision"]["reason"]
    assert "differs from the evidence lk-verify recorded" in reason
    # A check command that is not the contract's is not evidence either.
    doc = json.loads(out.stdout)
    doc["verify"]["checks"][0]["command"] = "echo ok"
    decided = _stage("lk-decide", p.root, json.dumps(doc), "--contract", "loop.yaml")
    assert decided.returncode != 0


def test_in_the_sandbox_the_contract_cannot_even_be_written(tmp_path: Path) -> None:
    p = make_project(tmp_path, REWRITE_CONTRACT, budgets={"attempts": 1})
    original = (p.root / "loop.yaml").read_text()
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert (p.root / "loop.yaml").read_text() == original
    run = p.docs("fix-value", "invoke")[0]["run"]
    assert run["sandbox"]["used"] is True
    assert (
        "Read-only file system" in (p.root / run["stderr"]).read_text()
        or run["stop_reason"] == "crashed"
    )
    assert nothing_unverified_landed(p, before, tmp_path)


# Without a sandbox the worker can reach the state folder: it rewrites the ledger (its
# attempts would count from 1 again) and removes a cancellation.
REWRITE_LEDGER = """
import os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path(".loopkit/ledger.jsonl").write_text("")
"""


def test_a_worker_that_rewrites_the_ledger_stops_the_loop(tmp_path: Path) -> None:
    p = make_project(tmp_path, REWRITE_LEDGER, sandbox=OFF)
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 20, fail_message(proc)
    decision = p.decisions("fix-value")[-1]
    assert decision["failure_class"] == "tampered", decision
    assert "ledger" in decision["reason"]
    assert p.head() == before or nothing_unverified_landed(p, before, tmp_path)


# In the sandbox (the default), the same worker finds no state folder to rewrite.
REACH_STATE = """
import os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
state = Path(".loopkit")
seen = sorted(p.name for p in state.iterdir()) if state.is_dir() else []
(STATE / "seen").write_text(" ".join(seen))
for target in (state / "ledger.jsonl", state / "cancel.json"):
    try:
        target.write_text("")
    except OSError as e:
        (STATE / "refused").write_text(e.strerror or "refused")
"""


def test_in_the_sandbox_the_worker_cannot_see_or_touch_the_state_folder(tmp_path: Path) -> None:
    p = make_project(tmp_path, REACH_STATE)
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert (p.scratch / "seen").read_text() == ""  # an empty folder in its place
    assert (p.scratch / "refused").read_text() == "Read-only file system"
    assert p.decisions("fix-value")[-1]["outcome"] == "complete"  # not tampered
    assert len(p.ledger()) >= 2 and not (p.root / ".loopkit/cancel.json").exists()
    assert p.head() != before
