"""Audit of the published surface through the installed commands, as a user drives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopkit import schema
from tests.conftest import git

BIN = Path(sys.executable).parent


def _run(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / cmd[0]), *cmd[1:]], cwd=cwd, input=stdin, capture_output=True, text=True,
        env={**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}, check=False,
    )  # fmt: skip


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


def _project(repo: Path, worker: str, *, wall_seconds: int, check_timeout: int) -> None:
    (repo / "loop.yaml").write_text(
        "version: 1\nobjective: Write notes.\nscope: {writable: [\"notes/**\"]}\n"
        f"criteria: [{{name: notes, run: \"test -f notes/a.txt\", timeout: {check_timeout}}}]\n"
        f"budgets: {{attempts: 3, wall_seconds: {wall_seconds}}}\n"
        f"worker: {{provider: command, command: \"{worker}\", timeout: 60}}\n"
        f"sandbox: {{writable: [\"{repo.parent}\"]}}\n"
    )
    (repo / "TASKS.md").write_text(
        "- [ ] Write notes {#notes}\n  budget: 5 lines / 1 file\n  scope: notes/a.txt\n  end\n"
    )
    git(repo, "add", "loop.yaml", "TASKS.md")
    git(repo, "commit", "-qm", "contract and plan")


def test_an_admitted_run_gets_only_its_granted_share(git_repo: Path) -> None:
    """lk-plan next | lk-decide --admit | lk-invoke: the worker may not eat the time that
    admission kept back for verification (wall 8 s - reserve 5 s = 3 s granted, not 60)."""
    _project(git_repo, "sleep 20; mkdir -p notes; echo hi > notes/a.txt", wall_seconds=8,
             check_timeout=5)  # fmt: skip
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    assert task.returncode == 0, task.stderr
    admitted = _run(["lk-decide", "--admit"], git_repo, task.stdout)
    assert admitted.returncode == 0, admitted.stderr
    granted = json.loads(admitted.stdout)["admission"]["granted"]["timeout_s"]
    assert 0 < granted <= 3.5
    planned = _run(["lk-invoke", "--dry-run"], git_repo, admitted.stdout)
    assert json.loads(planned.stdout)["timeout_s"] == granted
    # Not piped through admission, or with an explicit --timeout, the worker's own limit holds.
    assert json.loads(_run(["lk-invoke", "--dry-run"], git_repo, task.stdout).stdout)["timeout_s"] == 60
    explicit = _run(["lk-invoke", "--dry-run", "--timeout", "7"], git_repo, admitted.stdout)
    assert json.loads(explicit.stdout)["timeout_s"] == 7
    ran = _run(["lk-invoke"], git_repo, admitted.stdout)
    run = json.loads(ran.stdout)["run"]
    assert ran.returncode == 1 and run["stop_reason"] == "timeout", ran.stderr
    assert run["duration_s"] < 15


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


def test_a_pipe_may_start_with_any_command_run_alone(git_repo: Path) -> None:
    """`lk-invoke --contract F | lk-diff | lk-verify | lk-decide`: the section a command
    prints alone is carried on as an attempt document, not refused as bad input."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    out = _run(["lk-invoke", "--contract", "loop.yaml"], git_repo)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kind"] == "loopkit/run"
    for cmd, code in (("lk-diff", 0), ("lk-verify", 0), ("lk-decide", 0)):
        nxt = _run([cmd, "--contract", "loop.yaml"], git_repo, out.stdout)
        assert nxt.returncode == code, (cmd, nxt.stderr)
        out = nxt
    doc = json.loads(out.stdout)
    schema.validate(doc, "attempt")
    assert doc["decision"]["outcome"] == "complete"
    assert doc["attempt_id"] == doc["run"]["attempt_id"]  # one attempt, one artifacts folder
    # A section printed alone and piped on: lk-verify alone, then lk-decide.
    alone = _run(["lk-verify", "--contract", "loop.yaml"], git_repo)
    decided = _run(["lk-decide", "--contract", "loop.yaml"], git_repo, alone.stdout)
    assert decided.returncode == 10, decided.stderr  # no diff evidence: retry, not exit 3
    # Anything else is still refused.
    wrong = _run(["lk-decide"], git_repo, '{"kind": "loopkit/report", "version": 1}')
    assert wrong.returncode == 3 and "$.kind" in wrong.stderr


def test_a_worker_is_not_started_while_a_cancellation_is_in_force(git_repo: Path) -> None:
    """`lk cancel`, then the loop's next lk-invoke: the worker must not run at all (a quick
    command would otherwise finish its change before the watchdog's first look)."""
    marker = git_repo.parent / "worker-ran"
    _project(git_repo, f"touch {marker}", wall_seconds=600, check_timeout=5)
    assert _run(["lk", "cancel", "--reason", "night over"], git_repo).returncode == 0
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo).stdout
    ran = _run(["lk-invoke"], git_repo, task)
    assert ran.returncode == 1, ran.stderr
    run = json.loads(ran.stdout)["run"]
    assert run["stop_reason"] == "cancelled" and run["exit_code"] is None
    assert not marker.exists()
    decided = _run(["lk-decide"], git_repo, ran.stdout)
    assert decided.returncode == 30
    assert _run(["lk", "cancel", "--clear"], git_repo).returncode == 0
    assert _run(["lk-invoke"], git_repo, task).returncode == 0 and marker.exists()


def test_cancel_and_report_find_the_state_folder_the_contract_names(git_repo: Path) -> None:
    """A contract with `state_dir`: lk-decide keeps its ledger and looks for the
    cancellation there, so lk cancel must write it there and lk report read it there."""
    _project(git_repo, "true", wall_seconds=600, check_timeout=5)
    with (git_repo / "loop.yaml").open("a") as f:
        f.write("state_dir: var/lk\n")
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo).stdout
    assert _run(["lk-decide"], git_repo, task).returncode == 10
    assert (git_repo / "var/lk/ledger.jsonl").is_file()
    report = _run(["lk", "report", "--json"], git_repo)
    assert [t["task_id"] for t in json.loads(report.stdout)["tasks"]] == ["notes"]
    assert _run(["lk", "cancel", "--reason", "stop"], git_repo).returncode == 0
    assert (git_repo / "var/lk/cancel.json").is_file()
    assert _run(["lk-decide", "--admit"], git_repo, task).returncode == 30
    assert _run(["lk-decide"], git_repo, task).returncode == 30
    assert _run(["lk", "cancel", "--clear"], git_repo).returncode == 0
    assert _run(["lk-decide", "--admit"], git_repo, task).returncode == 0
    # A contract that cannot be read does not stop anyone from asking to stop.
    (git_repo / "loop.yaml").write_text("version: [\n")
    assert _run(["lk", "cancel"], git_repo).returncode == 0


def test_a_check_that_writes_a_protected_file_does_not_complete(git_repo: Path) -> None:
    """The diff is taken before the checks; a check that then rewrites a protected file
    leaves that change on disk. Completion needs scope held on the tree on disk."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    text = (git_repo / "loop.yaml").read_text()
    text = text.replace("scope: {writable: [\"notes/**\"]}",
                        "scope: {writable: [\"notes/**\"], protected: [\"conf/**\"]}")  # fmt: skip
    text = text.replace("run: \"test -f notes/a.txt\"",
                        "run: \"test -f notes/a.txt && mkdir -p conf debris && echo x > conf/db"
                        " && echo y > debris/cache\"")  # fmt: skip
    (git_repo / "loop.yaml").write_text(text)
    git(git_repo, "commit", "-qam", "protected conf")
    out = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    for cmd in ("lk-invoke", "lk-diff"):
        out = _run([cmd], git_repo, out.stdout)
    # In the clean room a check's new files are its debris, never on disk nor committed.
    room = _run(["lk-verify"], git_repo, out.stdout)
    assert json.loads(room.stdout)["verify"]["debris"] == ["conf/db", "debris/cache"]
    assert not (git_repo / "conf").exists()
    # In place (a commit hook), the check's writes land in the working tree.
    for cmd in (["lk-verify", "--in-place"], ["lk-decide"]):
        out = _run(cmd, git_repo, out.stdout)
    doc = json.loads(out.stdout)
    assert doc["verify"]["changed_by_checks"] == ["conf/db", "debris/cache"]
    assert out.returncode == 10, out.stderr
    assert doc["decision"]["failure_class"] == "scope_violation"
    assert {"rule": "protected_changed_by_check", "path": "conf/db"} in doc["decision"]["violations"]
    # Debris outside the protected scope (caches a check leaves) still lets it complete.
    (git_repo / "loop.yaml").write_text(text.replace("echo x > conf/db && ", ""))
    git(git_repo, "commit", "-qam", "no conf write")
    for path in ("conf/db", "debris/cache"):
        (git_repo / path).unlink()
    out = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    for cmd in ("lk-diff", "lk-verify", "lk-decide"):
        out = _run([cmd], git_repo, out.stdout)
    assert out.returncode == 0, out.stderr


def test_evidence_from_lk_verify_only_does_not_complete(git_repo: Path) -> None:
    """`lk-verify --only lint` runs one check of two: a pass there is not "verification
    passed" -- the check that did not run may well fail."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    text = (git_repo / "loop.yaml").read_text()
    text = text.replace("criteria: [", "criteria: [{name: lint, run: \"true\"}, ")
    text = text.replace("test -f notes/a.txt", "grep -q bye notes/a.txt")  # will fail
    (git_repo / "loop.yaml").write_text(text)
    git(git_repo, "commit", "-qam", "two checks")
    planned = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    invoked = _run(["lk-invoke"], git_repo, planned.stdout)
    diffed = _run(["lk-diff"], git_repo, invoked.stdout)
    assert diffed.returncode == 0, diffed.stderr
    partial = _run(["lk-verify", "--only", "lint"], git_repo, diffed.stdout)
    assert partial.returncode == 0, partial.stderr
    decided = _run(["lk-decide"], git_repo, partial.stdout)
    assert decided.returncode == 10, decided.stderr
    assert "notes did not run" in json.loads(decided.stdout)["decision"]["reason"]
    assert _run(["lk-decide", "--replay", ".loopkit/ledger.jsonl"], git_repo).returncode == 0
