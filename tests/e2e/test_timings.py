"""Where an attempt's time goes: each stage's timing in the ledger record, in ``lk report``
and ``lk show``, and on stderr with LOOPKIT_TIMINGS=1. Presence and structure only: no test
here asserts a duration."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from loopkit import schema
from tests.helpers.evidence import BIN, lk_run, notes_project

ORDER = ["invoke", "diff", "verify", "decide"]


def _records(repo: Path) -> list[dict[str, Any]]:
    lines = (repo / ".loopkit" / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _task(repo: Path) -> str:
    out = lk_run(["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], repo)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _check_entries(timings: list[dict[str, Any]]) -> None:
    assert [e["stage"] for e in timings] == ORDER
    for e in timings:
        assert isinstance(e["s"], float | int) and e["s"] >= 0
        assert isinstance(e["git"]["processes"], int)
    by = {e["stage"]: e for e in timings}
    assert isinstance(by["invoke"]["worker_s"], float | int)
    assert [c["name"] for c in by["verify"]["checks"]] == ["notes"]
    # lk-diff reads the change from git: its processes are counted.
    assert by["diff"]["git"]["processes"] >= 1


def test_each_stage_is_timed_in_the_record_the_report_and_show(git_repo: Path) -> None:
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    # A caller's document carrying timings of its own: not this attempt's, never recorded.
    task = json.loads(_task(git_repo))
    task["timings"] = [{"stage": "verify", "s": 0.0, "git": {"processes": 0, "s": 0.0}}]
    out = subprocess.run(
        [str(BIN / "lk"), "attempt", "--contract", "loop.yaml", "--base", "HEAD"],
        cwd=git_repo,
        input=json.dumps(task),
        capture_output=True,
        text=True,
        env={**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1", "LOOPKIT_TIMINGS": "1"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    decided = json.loads(out.stdout)
    _check_entries(decided["timings"])
    # The switch: each stage says its timing as it ends.
    for stage in ORDER:
        assert f"lk-{stage}: " in out.stderr and "git: " in out.stderr, out.stderr
    (record,) = [r for r in _records(git_repo) if r["type"] == "attempt"]
    schema.validate(record, "ledger-record")
    assert record["timings"] == decided["timings"]
    assert "timings" not in record["inputs"]["document"]  # not an input of the decision

    report = lk_run(["lk", "report", "--json"], git_repo)
    assert report.returncode == 0, report.stderr
    stages = json.loads(report.stdout)["health"]["stages"]
    assert stages["attempts"] == 1
    assert set(stages["per_stage"]) >= {*ORDER, "worker", "check notes"}
    assert "where the time goes" in lk_run(["lk", "report"], git_repo).stdout

    show = lk_run(["lk", "show", "notes", "--json"], git_repo)
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["attempts"][0]["timings"] == record["timings"]
    text = lk_run(["lk", "show", "notes"], git_repo).stdout
    assert "#1 time by stage:" in text and "lk-verify: " in text and "check notes" in text


def test_a_record_without_timings_stays_valid_and_reports(git_repo: Path) -> None:
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    out = lk_run(["lk", "attempt", "--contract", "loop.yaml", "--base", "HEAD"], git_repo,
                 _task(git_repo))  # fmt: skip
    assert out.returncode == 0, out.stderr
    ledger = git_repo / ".loopkit" / "ledger.jsonl"
    old = []
    for rec in _records(git_repo):  # as an older loopkit wrote it
        rec.pop("timings", None)
        schema.validate(rec, "ledger-record")
        old.append(json.dumps(rec))
    ledger.write_text("\n".join(old) + "\n")
    (git_repo / ".loopkit" / "index").unlink(missing_ok=True)
    report = lk_run(["lk", "report", "--json"], git_repo)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["health"]["stages"]["attempts"] == 0
    show = lk_run(["lk", "show", "notes", "--json"], git_repo)
    assert json.loads(show.stdout)["attempts"][0]["timings"] is None
    assert "time by stage" not in lk_run(["lk", "show", "notes"], git_repo).stdout
    # A hand-edited record's damaged entries: skipped, the report still made.
    damaged = [json.loads(line) for line in old]
    damaged[-1]["timings"] = ["x", {"stage": "diff", "s": "a"}, {"stage": "diff", "s": 1, "git": 2}]
    ledger.write_text("".join(json.dumps(r) + "\n" for r in damaged))
    report = lk_run(["lk", "report", "--json"], git_repo)
    assert report.returncode == 0, report.stderr
    per = json.loads(report.stdout)["health"]["stages"]["per_stage"]
    assert per == {"diff": {"attempts": 1, "median_s": 1.0, "median_git_processes": 0}}
