"""lk report: per-task table, JSON against its schema, a self-contained HTML page."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.report import main as report_main
from loopkit.decision import decide, ledger, records
from loopkit.views import report
from tests.helpers import decide as h
from tests.helpers.decide import TREE
from tests.helpers.evidence import lk_run as _run


def write_ledger(path: Path) -> None:
    """Three tasks: one completes after a same-failure replan, one is parked, one untrusted."""
    ldg = ledger.Ledger(path)
    untrusted = h.run(cost={"usd": 4.0, "source": "cli-price-table", "trusted": False})
    docs: list[dict[str, Any]] = [
        h.attempt(task_id="parser", run=h.run(), diff=h.diff(), verify=h.verify(False, "A")),
        h.attempt(task_id="parser", run=h.run(), diff=h.diff(), verify=h.verify(False, "A")),
        h.attempt(task_id="parser", run=h.run(), diff=h.diff(), verify=h.verify(True)),
        h.attempt(task_id="auth", run=h.run("auth_error")),
        h.attempt(
            task_id="docs",
            run=untrusted,
            diff=h.diff(),
            verify=h.verify(True),
            contract_=h.contract(tokens=130),
        ),
    ]
    for doc in docs:
        with ldg.transaction() as txn:
            hist = txn.history(decide.task_id(doc))
            d = decide.decide(doc, hist, tree_on_disk=TREE)
            txn.append(
                records.attempt_record(
                    doc,
                    hist,
                    d,
                    tree_on_disk=TREE,
                    cancel=None,
                    trigger={"kind": "manual", "source": "default"},
                    started_at=None,
                    recorded_at="2026-01-01T00:00:00.000Z",
                )
            )


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    return path


def test_json_report(ledger_path: Path) -> None:
    result = CliRunner().invoke(report_main, ["--ledger", str(ledger_path), "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    schema.validate(doc, "report")
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    assert tasks["parser"]["attempts"] == 3 and tasks["parser"]["outcome"] == "complete"
    assert tasks["parser"]["cost_usd"] == 0.75 and tasks["parser"]["tokens"] == 360
    assert [a["outcome"] for a in tasks["parser"]["timeline"]] == ["retry", "replan", "complete"]
    assert tasks["auth"]["outcome"] == "blocked" and "auth_error" in tasks["auth"]["why"]
    assert tasks["docs"]["cost_untrusted_usd"] == 4.0 and tasks["docs"]["cost_usd"] == 0
    health = doc["health"]
    assert health["termination_reasons"] == {"complete": 2, "blocked": 1}
    assert health["p95_verify_attempts"] == 3
    # cost per completed task: trusted (0.75 + 0) / 2, untrusted shown apart (4.0 / 2)
    assert health["cost_per_completed_task"] == {"trusted_usd": 0.375, "untrusted_usd": 2.0}
    # the docs run used 120 of 130 tokens (>80%); no other run came near a budget
    assert health["runs_near_budget"]["runs"] == 1
    assert health["runs_near_budget"]["share"] == 0.2


def test_terminal_table(ledger_path: Path) -> None:
    result = CliRunner().invoke(report_main, ["--ledger", str(ledger_path)])
    assert result.exit_code == 0
    out = result.stdout
    assert out.splitlines()[0].split()[:3] == ["task", "attempts", "outcome"]
    assert "parser" in out and "complete" in out and "blocked" in out
    assert "termination reasons: blocked 1, complete 2" in out
    assert "untrusted (shown apart)" in out


def test_html_page_is_self_contained(ledger_path: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = CliRunner().invoke(report_main, ["--ledger", str(ledger_path), "--html", str(page)])
    assert result.exit_code == 0
    text = page.read_text()
    assert text.startswith("<!doctype html>")
    assert "<script src" not in text and "<link" not in text and "http" not in text
    assert text.count('class="box"') >= 5 + len(report.COLOURS)  # timeline + legend
    assert report.COLOURS["replan"] in text and report.COLOURS["blocked"] in text


def test_report_html_is_readable_like_any_file_the_user_writes(git_repo: Path) -> None:
    page = git_repo.parent / "report.html"
    old = os.umask(0o022)
    try:
        r = _run(["lk", "report", "--html", str(page)], git_repo)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert page.read_text().startswith("<!doctype html>")
    assert page.stat().st_mode & 0o777 == 0o644


def test_torn_tail_is_reported_not_fatal(ledger_path: Path) -> None:
    with open(ledger_path, "ab") as f:
        f.write(b'{"kind":"loopkit/ledger-record","ver')
    result = CliRunner().invoke(report_main, ["--ledger", str(ledger_path), "--json"])
    assert result.exit_code == 0
    assert "torn" in result.stderr
    assert len(json.loads(result.stdout)["problems"]) == 1


def test_empty_and_missing(tmp_path: Path, git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert CliRunner().invoke(report_main, ["--ledger", str(tmp_path / "no.jsonl")]).exit_code == 3
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(report_main, ["--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["tasks"] == []
    both = CliRunner().invoke(report_main, ["--json", "--html", "x.html"])
    assert both.exit_code == 2


def test_reasons_from_the_ledger_reach_no_terminal_raw(ledger_path: Path, tmp_path: Path) -> None:
    # A record from an older writer or a hand edit: its reason quotes raw worker output.
    rec = json.loads(ledger_path.read_text().splitlines()[-1])
    rec["seq"] += 1
    rec["decision"]["reason"] = "\x1b]0;owned\x07\x1b[2Jgave up\x9b31m here"
    with open(ledger_path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    table = CliRunner().invoke(report_main, ["--ledger", str(ledger_path)])
    assert "gave up here" in table.stdout
    doc = json.loads(
        CliRunner().invoke(report_main, ["--ledger", str(ledger_path), "--json"]).stdout
    )
    assert {t["task_id"]: t for t in doc["tasks"]}["docs"]["why"] == "gave up here"
    page = tmp_path / "report.html"
    CliRunner().invoke(report_main, ["--ledger", str(ledger_path), "--html", str(page)])
    for shown in (table.stdout, page.read_text()):
        assert not any(c in shown for c in "\x1b\x07\x9b")
