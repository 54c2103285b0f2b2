"""lk-invoke driving the real Codex CLI against the scripted model server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import model_server
from tests.helpers.invoke import Invoked, invoke_agent, pids_with

pytestmark = pytest.mark.agents

PATCH = {
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** Add File: hello.py\n+print('hello')\n*** End Patch\n",
}


def shell(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd}}


def run(repo: Path, tmp: Path, turns: Any, *, home: str = "codex-home", **kw: Any) -> Invoked:
    return invoke_agent("codex", repo, tmp, turns, home=home, **kw)


def test_patches_a_file_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [PATCH]},
        {"tools": [shell("cat hello.py")]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["usage"]["tool_calls"] == 2 and rec["usage"]["input_tokens"] > 0
    assert rec["files_read"] == ["hello.py"] and rec["files_written"] == ["hello.py"]
    assert rec["effective_model"] == "gpt-5.5"
    assert rec["cost"] == {"usd": None, "source": "not reported by codex", "trusted": False}
    assert "--sandbox" in rec["command"]


def test_server_error_that_never_clears(git_repo: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    r = run(git_repo, tmp_path, [{"error": {"status": 500}}])
    assert time.monotonic() - start < 30
    assert r.returncode == 1
    assert r.run["stop_reason"] == "api_error" and r.run["is_error"] is True


def test_rate_limited(git_repo: Path, tmp_path: Path) -> None:
    r = run(git_repo, tmp_path, [{"error": {"status": 429}}])
    assert r.returncode == 1
    assert r.run["stop_reason"] == "rate_limited" and r.run["resume_after"] is None
    assert "429" in r.run["error"]


def test_usage_limit_is_not_a_throttle(git_repo: Path, tmp_path: Path) -> None:
    body = {
        "error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": 1800000000,
        }
    }
    r = run(git_repo, tmp_path, [{"error": {"status": 429, "body": body}}])
    assert r.returncode == 1
    assert r.run["stop_reason"] == "usage_limit"
    assert r.run["resume_after"] is not None and r.run["resume_after"].startswith("2027-01-1")


def test_timeout_leaves_no_process_behind(git_repo: Path, tmp_path: Path) -> None:
    home = "codex-timeout"
    start = time.monotonic()
    r = run(
        git_repo,
        tmp_path,
        [{"tools": [shell("sleep 120")]}, {"text": "late"}],
        args=("--timeout", "4"),
        home=home,
    )
    assert time.monotonic() - start < 100  # the 120 s sleep was not waited out
    assert r.returncode == 1
    assert r.run["stop_reason"] == "timeout"
    time.sleep(0.3)
    assert pids_with(str(tmp_path / home)) == []


def test_stuck_command_is_stopped_by_the_breaker(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"tools": [shell("python3 -c 'import not_a_module'")]}] * 8 + [{"text": "gave up"}]
    with model_server(turns) as server:
        r = run(git_repo, tmp_path, None, server=server)
        requests = len(server.model_requests("openai"))
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == "stuck" and rec["stuck"]["repeats"] == 3
    assert "No module named" in rec["stuck"]["error"]
    assert requests < len(turns)  # stopped before the script ran out (its last turn gives up)
