"""lk-invoke driving the real Qwen Code CLI against the scripted model server (Chat
Completions): a write and a command parsed by Qwen's own tool names, a refused write that
is not done, throttles and server errors classified, the turn cap, a resume, and a
private home that never touches the work tree or the person's own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.invoke import Invoked, invoke_agent

pytestmark = pytest.mark.agents

WRITE = {"name": "write_file", "input": {"file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}}
EDIT = {
    "name": "edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "print(1)", "new_string": "print(2)"},
}


def shell(cmd: str) -> dict[str, Any]:
    return {"name": "run_shell_command", "input": {"command": cmd}}


def run(repo: Path, tmp: Path, turns: Any, *, timeout: int = 60, **kw: Any) -> Invoked:
    return invoke_agent("qwen", repo, tmp, turns, timeout=timeout, **kw)


def test_writes_edits_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [WRITE]},
        {"tools": [EDIT]},
        {"tools": [shell("cat hello.py; git push origin main || true")]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print(2)\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert [e["kinds"] for e in rec["side_effects"]] == [["git_push"]]
    assert rec["usage"]["tool_calls"] == 3 and rec["usage"]["input_tokens"] > 0
    assert rec["effective_model"] == "qwen3-coder-plus" and rec["session_id"]
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=git_repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [line for line in status.splitlines() if ".loopkit" not in line] == ["?? hello.py"]
    private = next((tmp_path / "homes").glob("*/qwen/settings.json"))
    settings = json.loads(private.read_text())
    assert settings["telemetry"] == {"enabled": False}
    assert settings["model"]["generationConfig"]["maxRetries"] == 0  # the person's, carried in
    assert "telemetry" not in json.loads(
        (tmp_path / "person" / ".qwen" / "settings.json").read_text()
    )


def test_one_refused_write_among_others_is_still_not_completed(
    git_repo: Path, tmp_path: Path
) -> None:
    """A write that went through does not hide one the approval mode refused."""
    turns = [
        {"tools": [WRITE]},
        {"tools": [shell("echo x > other.txt")]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns, worker={"permission_mode": "auto-edit"})
    rec = r.run
    assert (git_repo / "hello.py").exists() and not (git_repo / "other.txt").exists()
    assert rec["stop_reason"] == "permission_denied" and rec["claimed_complete"] is False


def test_a_400_is_an_invalid_request(git_repo: Path, tmp_path: Path) -> None:
    r = run(git_repo, tmp_path, [{"error": 400}])
    assert r.returncode == 1
    assert r.run["stop_reason"] == "invalid_request" and r.run["api_error_status"] == 400


def test_a_429_is_rate_limited_not_a_usage_limit(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"error": {"status": 429, "headers": {"retry-after": "1"}}}]
    r = run(git_repo, tmp_path, turns, timeout=40)
    rec = r.run
    # Qwen Code's own advice after a 429 speaks of a quota: still a throttle
    assert rec["stop_reason"] == "rate_limited", rec["error"]
    assert rec["api_error_status"] == 429 and "quota" not in rec["error"]


def test_a_500_that_clears_completes_after_a_retry(git_repo: Path, tmp_path: Path) -> None:
    r = run(
        git_repo, tmp_path, [{"error": {"status": 500, "times": 1}, "text": "Fine."}], retries=1
    )
    assert r.returncode == 0, r.stderr
    assert r.run["stop_reason"] == "completed" and r.run["final_message"] == "Fine."


def test_the_turn_cap_is_max_turns(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"tools": [WRITE]}, {"tools": [EDIT]}, {"text": "Done."}]
    r = run(git_repo, tmp_path, turns, worker={"max_turns": 1})
    assert r.returncode == 1
    assert r.run["stop_reason"] == "max_turns"
    assert "--max-session-turns" in r.run["command"]
