"""lk-invoke driving the real Claude Code CLI against the scripted model server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import claude_bin, claude_env_for, model_server
from tests.helpers.invoke import Invoked, invoke_agent, lk_invoke, pids_with, write_contract

pytestmark = pytest.mark.agents

WRITE = {"name": "Write", "input": {"file_path": "{{cwd}}/hello.py", "content": "print('hello')\n"}}
READ = {"name": "Read", "input": {"file_path": "{{cwd}}/hello.py"}}
EDIT = {
    "name": "Edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "hello", "new_string": "hello, world"},
}
BAD_EDIT = {
    "name": "Edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "not there", "new_string": "x"},
}


def run(repo: Path, tmp: Path, turns: Any, *, home: str = "home", **kw: Any) -> Invoked:
    return invoke_agent("claude", repo, tmp, turns, home=home, **kw)


def test_writes_and_edits_a_file(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [WRITE]},
        {"tools": [READ]},
        {"tools": [EDIT]},
        {"text": "Wrote and edited hello.py."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print('hello, world')\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Wrote and edited hello.py."
    assert rec["usage"]["turns"] == 4 and rec["usage"]["tool_calls"] == 3
    assert rec["files_read"] == ["hello.py"] and rec["files_written"] == ["hello.py"]
    assert rec["session_id"] and rec["effective_model"]
    assert rec["cost"]["source"] == "claude-code price table"
    assert rec["cost"]["trusted"] is False  # a local base URL: the price is fiction
    stream = (git_repo / rec["transcript"]).read_text()
    assert '"type":"result"' in stream
    # A person watching stderr saw the work as it happened (throttled, so at least one
    # tool line and always the end).
    assert "lk-invoke: [" in r.stderr and "hello.py" in r.stderr
    assert "the worker's run ended: completed" in r.stderr
    assert "\x1b[" not in r.stderr  # not a terminal: no colour


def test_quiet_prints_no_progress(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"text": "Creating.", "tools": [WRITE]}, {"text": "Done."}]
    r = run(git_repo, tmp_path, turns, args=("--quiet",))
    assert r.returncode == 0, r.stderr
    assert "lk-invoke: [" not in r.stderr


def test_max_turns(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"tools": [WRITE]}, {"tools": [READ]}, {"tools": [READ]}, {"text": "done"}]
    r = run(git_repo, tmp_path, turns, worker={"max_turns": 2})
    assert r.returncode == 1
    assert r.run["stop_reason"] == "max_turns" and r.run["is_error"] is True


def test_overloaded_twice_then_success(git_repo: Path, tmp_path: Path) -> None:
    r = run(
        git_repo, tmp_path, [{"error": {"status": 529, "times": 2}, "text": "Fine now."}], retries=3
    )
    assert r.returncode == 0, r.stderr
    assert r.run["stop_reason"] == "completed" and r.run["api_retries"] == 2
    assert r.run["final_message"] == "Fine now."


def test_server_error_that_never_clears(git_repo: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    r = run(git_repo, tmp_path, [{"error": {"status": 500}}], retries=1)
    assert time.monotonic() - start < 30
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == "api_error" and rec["is_error"] is True
    assert rec["api_error_status"] == 500 and rec["api_retries"] == 1
    assert rec["claimed_complete"] is False


def test_rate_limited(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"error": {"status": 429, "headers": {"x-should-retry": "false"}}}]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 1
    assert r.run["stop_reason"] == "rate_limited" and r.run["resume_after"] is None


def test_usage_limit_carries_its_reset_time(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"error": {"status": 429, "message": "Claude AI usage limit reached|1800000000"}}]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 1
    assert r.run["stop_reason"] == "usage_limit"
    assert r.run["resume_after"] == "2027-01-15T08:00:00Z"


def test_resume_continues_the_session(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [WRITE]},
        {"text": "First part done."},
        {"tools": [READ]},
        {"tools": [EDIT]},
        {"text": "Second part done."},
    ]
    with model_server(turns) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.returncode == 0, first.stderr
        assert first.run["final_message"] == "First part done."
        sid = first.run["session_id"]
        second = run(git_repo, tmp_path, None, server=server, args=("--resume", sid))
        assert second.returncode == 0, second.stderr
        picked = [r["turn"] for r in server.model_requests("anthropic")]
    assert second.run["final_message"] == "Second part done."
    assert picked[-3:] == [2, 3, 4]  # the resumed conversation carried the first two turns
    assert "--resume" in second.run["command"]
    assert (git_repo / "hello.py").read_text() == "print('hello, world')\n"


def test_timeout_leaves_no_process_behind(git_repo: Path, tmp_path: Path) -> None:
    home = "home-timeout"
    start = time.monotonic()
    r = run(git_repo, tmp_path, [{"delay": 60, "text": "late"}], args=("--timeout", "3"), home=home)
    assert time.monotonic() - start < 50  # the 60 s answer was not waited out
    assert r.returncode == 1
    assert r.run["stop_reason"] == "timeout" and r.run["exit_code"] is None
    time.sleep(0.2)
    assert pids_with(str(tmp_path / home)) == []


def test_stuck_worker_is_stopped_by_the_breaker(git_repo: Path, tmp_path: Path) -> None:
    turns = (
        [{"tools": [WRITE]}, {"tools": [READ]}]
        + [{"tools": [BAD_EDIT]}] * 8
        + [{"text": "gave up"}]
    )
    with model_server(turns) as server:
        r = run(git_repo, tmp_path, None, server=server, worker={"breaker_repeats": 3})
        requests = len(server.model_requests("anthropic"))
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == "stuck"
    assert rec["stuck"]["tool"] == "Edit" and rec["stuck"]["repeats"] == 3
    assert "String to replace not found" in rec["stuck"]["error"]
    assert rec["tool_errors"] >= 3
    assert requests < len(turns)  # stopped before the script ran out (its last turn gives up)
    assert pids_with(str(tmp_path / "home")) == []


def test_cost_is_untrusted_when_the_base_url_comes_from_claude_settings(
    git_repo: Path, tmp_path: Path
) -> None:
    # A proxy or another model's endpoint is often set in ~/.claude/settings.json, not in
    # the environment: Claude Code then prices a model it never talked to.
    claude_bin()
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "claude"})
    with model_server(["Done."]) as server:
        env = claude_env_for(server, tmp_path / "home", retries=0)
        url = env.pop("ANTHROPIC_BASE_URL")
        settings = tmp_path / "home" / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": url}}))
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
        assert server.model_requests("anthropic")  # it did talk to the scripted server
    assert r.returncode == 0, r.stderr
    assert r.run["cost"]["usd"] is not None
    assert r.run["cost"]["trusted"] is False
