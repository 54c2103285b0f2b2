"""lk-invoke driving the real pi coding agent against the scripted model server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import model_server, pi_bin, pi_env_for
from tests.helpers.invoke import Invoked, lk_invoke, write_contract

pytestmark = pytest.mark.agents

WRITE = {"name": "write", "input": {"path": "hello.py", "content": "print('hello')\n"}}


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command}}


def run(
    repo: Path,
    tmp: Path,
    turns: Any,
    *,
    worker: dict[str, Any] | None = None,
    args: tuple[str, ...] = (),
    server: Any = None,
    retries: int = 0,
) -> Invoked:
    pi_bin()
    contract = write_contract(tmp / "loop.yaml", worker={"provider": "pi", **(worker or {})})

    def go(s: Any) -> Invoked:
        env = pi_env_for(s, tmp / "person-pi", retries=retries)
        env["LOOPKIT_HOMES"] = str(tmp / "homes")
        return lk_invoke(["--contract", str(contract), *args], cwd=repo, env=env)

    if server is not None:
        return go(server)
    with model_server(turns) as s:
        return go(s)


def status(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = (line[3:] for line in out.splitlines())
    return sorted(p for p in paths if not p.startswith(".loopkit/"))


def test_writes_a_file_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating hello.py.", "tools": [WRITE]},
        {"tools": [bash("python3 hello.py && cat hello.py")]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert rec["usage"]["tool_calls"] == 2 and rec["usage"]["turns"] == 3
    assert rec["usage"]["input_tokens"] == 300 and rec["usage"]["output_tokens"] == 60
    assert rec["effective_model"] == "claude-sonnet-4-5"
    assert rec["session_id"] and rec["cost"]["trusted"] is False
    # pi's folder (settings, models with the endpoint, sessions) is a private copy.
    assert status(git_repo) == ["hello.py"], status(git_repo)
    private = list((tmp_path / "homes").glob("*/pi"))
    assert len(private) == 1 and list(private[0].glob("sessions/*/*.jsonl"))
    assert not (tmp_path / "person-pi" / "sessions").exists()


def test_done_after_a_failed_command_and_a_missing_tool_is_not_a_claim(
    git_repo: Path, tmp_path: Path
) -> None:
    turns = [
        {"tools": [bash("exit 2")]},
        {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    rec = r.run
    assert rec["final_message"] == "Done."
    assert rec["claimed_complete"] is False and rec["tool_errors"] == 2
    assert "exit" in rec["error"] and "2" in rec["error"]


def test_done_after_a_refused_write_is_not_a_claim(git_repo: Path, tmp_path: Path) -> None:
    # Without the write tool (allowed_tools), pi answers "Tool write not found".
    r = run(
        git_repo,
        tmp_path,
        [{"tools": [WRITE]}, {"text": "Done."}],
        worker={"allowed_tools": ["read", "bash"]},
    )
    rec = r.run
    assert not (git_repo / "hello.py").exists()
    assert rec["claimed_complete"] is False and rec["files_written"] == []
    assert "--tools" in rec["command"]


@pytest.mark.parametrize(("code", "reason"), [(429, "rate_limited"), (500, "api_error")])
def test_server_errors_are_transient(
    git_repo: Path, tmp_path: Path, code: int, reason: str
) -> None:
    with model_server([{"error": {"status": code}}]) as server:
        r = run(git_repo, tmp_path, None, server=server, retries=2)
        tries = len(server.model_requests("anthropic"))
    # pi exits 0 after an API failure; the stream's last message says error.
    assert r.returncode == 1
    rec = r.run
    assert rec["exit_code"] == 0
    assert rec["stop_reason"] == reason and rec["is_error"] is True
    assert rec["api_error_status"] == code and str(code) in rec["error"]
    assert rec["api_retries"] == 2 and tries == 3


def test_resume_continues_the_session(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"text": "Ready."}, {"tools": [WRITE]}, {"text": "Written after resume."}]
    with model_server(turns) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.returncode == 0, first.stderr
        sid = first.run["session_id"]
        second = run(git_repo, tmp_path, None, server=server, args=("--resume", sid))
    assert second.returncode == 0, second.stderr
    assert second.run["session_id"] == sid
    assert second.run["final_message"] == "Written after resume."
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
