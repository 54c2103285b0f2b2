"""lk-decide and lk cancel through click: decision, exit code, ledger record, admission, replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import git, schema
from loopkit.cli.cancel import main as cancel_main
from loopkit.cli.decide import main as decide_main
from loopkit.decision import ledger
from tests.helpers import decide as h
from tests.helpers.evidence import lk_run as _run

LOOP_YAML = """\
version: 1
objective: Fix the parser.
scope: {writable: ["src/**"]}
criteria: [{name: regression, run: "true", timeout: 30}]
budgets: {attempts: 3, same_failure: 2, wall_seconds: 3600}
worker: {provider: command, command: "true", timeout: 100}
"""


@pytest.fixture
def repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (git_repo / "loop.yaml").write_text(LOOP_YAML)
    monkeypatch.chdir(git_repo)
    return git_repo


def doc_for(repo: Path, *, passed: bool, fp: str = "fpA", **kw: Any) -> dict[str, Any]:
    tree = git.tree_hash(repo)
    evidence = h.verify(passed, fp, tree=tree)
    evidence["checks"][0]["command"] = "true"  # the check ./loop.yaml names
    d = h.attempt(run=h.run(**kw), diff=h.diff(tree=tree), verify=evidence, contract_={})
    del d["contract"]  # the command resolves ./loop.yaml
    # What lk-verify records beside its logs: lk-decide holds the piped section to it.
    record = repo / ".loopkit" / "artifacts" / d["attempt_id"] / "verify.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(evidence))
    return d


def decide(doc: dict[str, Any] | None, *args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(
        decide_main, list(args), input=json.dumps(doc) if doc is not None else None
    )
    out = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.exit_code, out, result.stderr


def records(repo: Path) -> list[dict[str, Any]]:
    recs, problems = ledger.read(repo / ".loopkit" / "ledger.jsonl")
    assert problems == []
    return [r for _, r in recs]


def test_complete_prints_the_document_with_its_decision(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "fix.py").write_text("x = 1\n")
    code, out, err = decide(doc_for(repo, passed=True))
    assert code == 0, err
    schema.validate(out, "attempt")
    assert out["decision"]["outcome"] == "complete"
    assert out["run"]["provider"] == "command"  # every section passes through
    assert "lk-decide: complete" in err
    (rec,) = records(repo)
    schema.validate(rec, "ledger-record")
    assert rec["decision"] == out["decision"]
    assert rec["trigger"]["kind"] in ("manual", "event", "schedule")
    assert rec["attempt_id"] == out["attempt_id"]


def test_same_failure_replans_then_parks(repo: Path) -> None:
    codes = [decide(doc_for(repo, passed=False, fp="same"))[0] for _ in range(3)]
    assert codes == [10, 11, 21]
    assert [r["decision"]["failure_class"] for r in records(repo)] == [
        "verification_failure",
        "no_progress",
        "no_progress",
    ]


def test_budget_exhaustion_writes_a_checkpoint(repo: Path) -> None:
    codes = [decide(doc_for(repo, passed=False, fp=f"fp{i}"))[0] for i in range(3)]
    assert codes == [10, 10, 22]
    cp = json.loads((repo / ".loopkit" / "checkpoints" / "fix-parser.json").read_text())
    assert cp["exhausted"] == ["attempts"] and cp["used"]["attempts"] == 3
    assert "budget exhausted" in cp["exit_reason"]


def test_stale_evidence_in_a_real_repo(repo: Path) -> None:
    doc = doc_for(repo, passed=True)
    (repo / "late-edit.txt").write_text("changed after verification\n")
    code, out, _ = decide(doc)
    assert code == 10
    assert out["decision"]["failure_class"] == "stale_evidence"


def test_trigger_option_and_ci_detection(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decide(doc_for(repo, passed=False, fp="a"), "--trigger", "schedule")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    decide(doc_for(repo, passed=False, fp="b"))
    assert [r["trigger"]["kind"] for r in records(repo)] == ["schedule", "event"]


def test_ledger_option(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "l.jsonl"
    code, _, _ = decide(doc_for(repo, passed=False), "--ledger", str(path))
    assert code == 10
    assert len(ledger.read(path)[0]) == 1
    assert not (repo / ".loopkit" / "ledger.jsonl").exists()


def test_cancel_then_clear(repo: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(cancel_main, ["--reason", "stop the night run"])
    assert r.exit_code == 0 and json.loads(r.stdout)["requested"] is True
    code, out, _ = decide(doc_for(repo, passed=True))
    assert code == 30 and "stop the night run" in out["decision"]["reason"]
    code, out, _ = decide(None, "--admit")
    assert code == 30
    assert runner.invoke(cancel_main, ["--status"]).exit_code == 0
    assert runner.invoke(cancel_main, ["--clear"]).exit_code == 0
    assert runner.invoke(cancel_main, ["--clear"]).exit_code == 1
    assert runner.invoke(cancel_main, ["--status"]).exit_code == 1
    code, _, _ = decide(doc_for(repo, passed=False))
    assert code == 10


def test_lk_cancel_prints_only_schema_valid_json(git_repo: Path) -> None:
    """stdout carries only schema-valid JSON: lk cancel's lines have a published schema."""
    seen = []
    for args, code in (
        (["--reason", "stop the night run"], 0),
        (["--status"], 0),
        (["--clear"], 0),
        (["--clear"], 1),
        (["--status"], 1),
    ):
        r = _run(["lk", "cancel", *args], git_repo)
        assert r.returncode == code, (args, r.stderr)
        doc = json.loads(r.stdout)
        schema.validate(doc, "cancel")
        seen.append(doc["requested"])
    assert seen == [True, True, False, False, False]
    assert "cancel" in _run(["lk", "schema", "--list"], git_repo).stdout.split()


def test_admission_admits_then_refuses(repo: Path) -> None:
    task = {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": {"id": "t", "text": "x", "kind": "task"},
    }
    outs = [decide(task, "--admit") for _ in range(4)]
    assert [c for c, _, _ in outs] == [0, 0, 0, 22]
    first = outs[0][1]
    schema.validate(first, "attempt")
    assert first["admission"]["admitted"] and first["admission"]["granted"]["timeout_s"] == 100
    refused = outs[3][1]
    assert refused["decision"]["outcome"] == "budget_exhausted"
    assert refused["decision"]["exit_code"] == 22
    assert (repo / ".loopkit" / "checkpoints" / "t.json").is_file()
    assert "budget exhausted" in outs[3][2]


def test_replay_agrees_then_finds_a_tampered_record(repo: Path) -> None:
    for fp in ("a", "a", "b"):
        decide(doc_for(repo, passed=False, fp=fp))
    path = repo / ".loopkit" / "ledger.jsonl"
    runner = CliRunner()
    ok = runner.invoke(decide_main, ["--replay", str(path)])
    assert ok.exit_code == 0, ok.stderr
    body = json.loads(ok.stdout)
    schema.validate(body, "replay")
    assert body["agree"] and body["records"] == 3
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["decision"]["outcome"] = "retry"  # someone rewrote history
    rec["decision"]["exit_code"] = 10
    lines[1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    bad = runner.invoke(decide_main, ["--replay", str(path)])
    assert bad.exit_code == 1
    body = json.loads(bad.stdout)
    assert {d["line"] for d in body["disagreements"]} == {2}
    assert "line 2" in bad.stderr


def test_bad_input_is_exit_3(repo: Path) -> None:
    result = CliRunner().invoke(decide_main, [], input="{not json")
    assert result.exit_code == 3 and "not JSON" in result.stderr
    result = CliRunner().invoke(decide_main, ["--replay", "missing.jsonl"])
    assert result.exit_code == 3


def test_help_lists_the_decision_codes() -> None:
    result = CliRunner().invoke(decide_main, ["--help"])
    assert result.exit_code == 0
    for code in ("10", "11", "20", "21", "22", "30"):
        assert f"  {code} " in result.stdout
