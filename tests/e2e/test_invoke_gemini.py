"""lk-invoke driving the real Gemini CLI against the scripted model server (the Gemini
API): a write and a command parsed, a refused write that is not done, throttles and
server errors classified (its retries show only on stderr), a resume, and a private
home that never touches the work tree or the person's own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.invoke import Invoked, invoke_agent

pytestmark = pytest.mark.agents

WRITE = {"name": "write_file", "input": {"file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}}


def shell(cmd: str) -> dict[str, Any]:
    return {"name": "run_shell_command", "input": {"command": cmd}}


def run(repo: Path, tmp: Path, turns: Any, *, timeout: int = 60, **kw: Any) -> Invoked:
    return invoke_agent("gemini", repo, tmp, turns, timeout=timeout, **kw)


def test_writes_a_file_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [WRITE]},
        {"tools": [shell("cat hello.py && git push origin main")]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print(1)\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert rec["side_effects"] == [
        {
            "tool": "run_shell_command",
            "command": "cat hello.py && git push origin main",
            "kinds": ["git_push"],
        }
    ]
    assert rec["usage"]["tool_calls"] == 2 and rec["usage"]["turns"] == 3
    assert rec["usage"]["input_tokens"] > 0 and rec["session_id"]
    assert rec["sandbox"]["used"] is True
    # the CLI's config went to the private home, none into the work tree
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=git_repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [line for line in status.splitlines() if ".loopkit" not in line] == ["?? hello.py"]
    settings = json.loads(
        (tmp_path / "homes").glob("*/gemini/.gemini/settings.json").__next__().read_text()
    )
    assert settings["telemetry"] == {"enabled": False}
    assert settings["general"]["maxAttempts"] == 1  # the person's own, carried in
    person = json.loads((tmp_path / "person" / ".gemini" / "settings.json").read_text())
    assert "telemetry" not in person  # the person's file is left as it was


def test_a_400_is_an_invalid_request_not_a_success(git_repo: Path, tmp_path: Path) -> None:
    r = run(git_repo, tmp_path, [{"error": {"status": 400, "message": "bad schema"}}])
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == "invalid_request" and rec["is_error"] is True
    assert rec["claimed_complete"] is False and rec["api_error_status"] == 400


def test_a_429_retried_on_stderr_only_is_rate_limited(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"error": {"status": 429, "headers": {"retry-after": "1"}}}]
    r = run(git_repo, tmp_path, turns, retries=1)
    rec = r.run
    assert r.returncode == 1
    assert rec["stop_reason"] == "rate_limited" and rec["api_error_status"] == 429
    assert rec["api_retries"] == 1  # said only on stderr ("Attempt 1 failed ...")


def test_a_429_still_retrying_at_the_deadline_is_rate_limited(
    git_repo: Path, tmp_path: Path
) -> None:
    """The CLI's own backoff outlives the run's deadline, its stream silent: the cause
    is the throttle, not the clock."""
    turns = [{"error": {"status": 429, "headers": {"retry-after": "1"}}}]
    r = run(git_repo, tmp_path, turns, retries=9, timeout=20)
    rec = r.run
    assert rec["stop_reason"] == "rate_limited", rec["error"]
    assert "timed out retrying" in rec["error"] and rec["api_retries"] >= 1


def test_a_500_is_an_api_error_and_one_that_clears_completes(
    git_repo: Path, tmp_path: Path
) -> None:
    r = run(git_repo, tmp_path, [{"error": 500}])
    assert r.returncode == 1 and r.run["stop_reason"] == "api_error"
    ok = run(
        git_repo, tmp_path, [{"error": {"status": 500, "times": 1}, "text": "Fine."}], retries=1
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.run["stop_reason"] == "completed" and ok.run["api_retries"] == 1
