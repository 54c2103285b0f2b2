"""A hostile ACP agent against the scope loopkit enforces at the protocol.

The agent (tests/helpers/acp_agent.py) writes through loopkit's ``fs/write_text_file``
into every place the contract forbids -- outside the writable scope, a protected file, a
file of the base under add_only, .git, the contract, through a symlink out of the
repository -- reads through ``..``, asks permission for a write out of scope, and then
writes it anyway behind loopkit's back. Each write through loopkit is refused before it
happens; the one it makes itself is caught by lk-diff, which stays the judge.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import git
from tests.helpers.invoke import lk_invoke

AGENT = Path(__file__).resolve().parents[1] / "helpers" / "acp_agent.py"


def project(repo: Path, plan: list[dict[str, Any]]) -> None:
    (repo / "src" / "locked").mkdir(parents=True)
    (repo / "src" / "locked" / "keep.py").write_text("KEEP = 1\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    # A copy beside the repository, shown in the sandbox (the checkout's own tests/ may
    # lie under /tmp, which the sandbox makes private).
    shown = repo.parent / "acp-agent"
    shown.mkdir(exist_ok=True)
    agent = shown / AGENT.name
    agent.write_text(AGENT.read_text())
    command = shlex.join([sys.executable, str(agent), json.dumps(plan)])
    contract = {
        "version": 1,
        "objective": "Add src/ok.py.",
        "scope": {
            "writable": ["src/**"],
            "protected": ["src/locked/**"],
            "add_only": ["tests/**"],
        },
        "criteria": [{"name": "ok", "run": "test -f src/ok.py", "timeout": 10}],
        "worker": {"provider": "acp", "command": command, "timeout": 60},
        "sandbox": {"writable": [str(shown)]},
    }
    (repo / "loop.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "project")


def said(repo: Path, rec: dict[str, Any]) -> dict[int, Any]:
    """The answers the agent reported, by step."""
    out: dict[int, Any] = {}
    for line in (repo / rec["transcript"]).read_text().splitlines():
        event = json.loads(line)
        msg = event.get("msg") or {}
        update = (msg.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            text = update["content"]["text"]
            if text.startswith("{"):
                item = json.loads(text)
                out[item["step"]] = item["answer"]
    return out


def test_every_write_out_of_scope_is_refused_and_the_one_made_anyway_is_caught(
    git_repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret\n")
    repo = git_repo
    plan: list[dict[str, Any]] = [
        {"fs_write": {"path": str(repo / "src" / "ok.py"), "content": "OK = 1\n"}},
        {"fs_write": {"path": str(repo / "notes.txt"), "content": "x\n"}},
        {"fs_write": {"path": str(repo / "src" / "locked" / "keep.py"), "content": "KEEP = 2\n"}},
        {"fs_write": {"path": str(repo / "tests" / "test_a.py"), "content": "# gone\n"}},
        {"fs_write": {"path": str(repo / "tests" / "test_new.py"), "content": "# new\n"}},
        {"fs_write": {"path": str(repo / ".git" / "hooks" / "pre-commit"), "content": "exit 0\n"}},
        {"fs_write": {"path": str(repo / "loop.yaml"), "content": "version: 1\n"}},
        {"fs_write": {"path": str(repo / "src" / "link" / "evil.txt"), "content": "x\n"}},
        {"fs_read": {"path": str(repo / ".." / "outside" / "secret.txt")}},
        {
            "ask": {
                "title": "Write notes.txt",
                "kind": "edit",
                "locations": [{"path": str(repo / "notes.txt")}],
            }
        },
        {"write_anyway": {"path": str(repo / "notes.txt"), "content": "sneaky\n"}},
        {"say": "All done."},
    ]
    project(repo, plan)
    (repo / "src" / "link").symlink_to(outside)  # src/link -> a folder outside the repo
    r = lk_invoke([], cwd=repo)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert rec["stop_reason"] == "completed" and rec["final_message"] == "All done."
    answers = said(repo, rec)
    # Allowed, and written by loopkit: in the writable scope, and a new file under add_only.
    assert answers[0] == {"jsonrpc": "2.0", "id": answers[0]["id"], "result": None}
    assert (repo / "src" / "ok.py").read_text() == "OK = 1\n"
    assert (repo / "tests" / "test_new.py").read_text() == "# new\n"
    # Refused before anything was written, each with its rule.
    assert [(x["via"], x["rule"], x["path"]) for x in rec["refused"]] == [
        ("fs/write_text_file", "outside_writable", "notes.txt"),
        ("fs/write_text_file", "protected", "src/locked/keep.py"),
        ("fs/write_text_file", "add_only", "tests/test_a.py"),
        ("fs/write_text_file", "git_folder", ".git/hooks/pre-commit"),
        ("fs/write_text_file", "control_file", "loop.yaml"),
        ("fs/write_text_file", "outside_repository", str(repo / "src" / "link" / "evil.txt")),
        ("permission", "outside_writable", "notes.txt"),
    ]
    for step in (1, 2, 3, 5, 6, 7):
        assert "loopkit refused the write" in answers[step]["error"]["message"], step
    assert "outside the repository" in answers[8]["error"]["message"]
    assert answers[9] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert (repo / "src" / "locked" / "keep.py").read_text() == "KEEP = 1\n"
    assert (repo / "tests" / "test_a.py").read_text() == "def test_a():\n    assert True\n"
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (outside / "evil.txt").exists()
    # The agent ignored the refusal and wrote notes.txt itself: lk-diff catches it.
    assert (repo / "notes.txt").read_text() == "sneaky\n"
    diff = subprocess.run(
        ["lk-diff"], cwd=repo, input=r.stdout, capture_output=True, text=True, check=False
    )
    assert diff.returncode == 1, diff.stderr
    violations = {(v["rule"], v["path"]) for v in json.loads(diff.stdout)["diff"]["violations"]}
    assert ("outside_writable", "notes.txt") in violations


def test_a_read_only_run_may_write_nothing(git_repo: Path) -> None:
    """A judge over ACP: every write is refused, even inside the writable scope."""
    repo = git_repo
    plan = [
        {"fs_write": {"path": str(repo / "src" / "ok.py"), "content": "OK = 1\n"}},
        {"ask": {"title": "make", "kind": "execute", "rawInput": {"command": "make"}}},
        {"fs_read": {"path": str(repo / "README.md")}},
    ]
    project(repo, plan)
    from loopkit.worker import providers
    from loopkit.worker.invoke import execute
    from loopkit.worker.providers.base import RunSpec

    spec = RunSpec(
        prompt="Is it done?",
        cwd=repo,
        read_only=True,
        command=shlex.join([sys.executable, str(AGENT), json.dumps(plan)]),
        scope={"writable": ["src/**"]},
    )
    result = execute(providers.get("acp"), spec, artifacts=repo.parent / "artifacts")
    assert not (repo / "src" / "ok.py").exists()
    assert [(x["via"], x["rule"]) for x in result.record["refused"]] == [
        ("fs/write_text_file", "read_only"),
        ("permission", "read_only"),
    ]
    reads = said(repo.parent / "artifacts", {"transcript": "stream.jsonl"})
    assert reads[2]["result"]["content"] == "# test repo\n"
