"""lk-invoke driving the real GitHub Copilot CLI (offline, its own-endpoint settings)
against the scripted model server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import copilot_bin, copilot_env_for, model_server
from tests.helpers.invoke import Invoked, lk_invoke, write_contract

pytestmark = pytest.mark.agents

CREATE = {"name": "create", "input": {"path": "{{cwd}}/hello.py", "file_text": "print('hello')\n"}}
#: Copilot backs off for about a minute on a 429 unless the server says when to come back.
FAST_RETRY = {"retry-after-ms": "20", "retry-after": "0"}


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command, "description": "run"}}


def run(
    repo: Path,
    tmp: Path,
    turns: Any,
    *,
    worker: dict[str, Any] | None = None,
    args: tuple[str, ...] = (),
    server: Any = None,
) -> Invoked:
    copilot_bin()
    contract = write_contract(tmp / "loop.yaml", worker={"provider": "copilot", **(worker or {})})

    def go(s: Any) -> Invoked:
        env = copilot_env_for(s, tmp / "person")
        env["LOOPKIT_HOMES"] = str(tmp / "homes")
        return lk_invoke(["--contract", str(contract), *args], cwd=repo, env=env, timeout=180)

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


def test_creates_a_file_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating hello.py.", "tools": [CREATE]},
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
    assert rec["effective_model"] == "claude-sonnet-4.5"
    assert rec["session_id"]
    # Copilot's config and sessions are a private copy, not the work tree or the person's.
    assert status(git_repo) == ["hello.py"], status(git_repo)
    assert list((tmp_path / "homes").glob("*/copilot/session-state/*"))
    assert not (tmp_path / "person" / ".copilot" / "session-state").exists()


def test_done_after_a_failed_command_and_a_missing_tool_is_not_a_claim(
    git_repo: Path, tmp_path: Path
) -> None:
    # Copilot itself reports the command a success (exit code 2 aside) and exits 0.
    turns = [
        {"tools": [bash("exit 2")]},
        {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    rec = r.run
    assert rec["exit_code"] == 0 and rec["final_message"] == "Done."
    assert rec["claimed_complete"] is False and rec["tool_errors"] == 2
    assert "exit 2" in rec["error"]


def test_refused_write_outside_the_project(git_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    create = {"name": "create", "input": {"path": str(outside), "file_text": "x\n"}}
    r = run(git_repo, tmp_path, [{"tools": [create]}, {"text": "Done."}])
    rec = r.run
    assert not outside.exists()
    assert rec["stop_reason"] == "permission_denied" and rec["claimed_complete"] is False
    assert rec["permission_denials"][0]["tool"] == "create"


@pytest.mark.parametrize(("code", "reason"), [(429, "rate_limited"), (500, "api_error")])
def test_server_errors_are_transient(
    git_repo: Path, tmp_path: Path, code: int, reason: str
) -> None:
    turns = [{"error": {"status": code, "headers": FAST_RETRY}}]
    with model_server(turns) as server:
        r = run(git_repo, tmp_path, None, server=server)
        tries = len(server.model_requests("anthropic"))
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == reason and rec["is_error"] is True
    assert rec["api_error_status"] == code and str(code) in rec["error"]
    assert rec["api_retries"] == tries - 1 and tries > 1


def test_resume_continues_the_session(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"text": "Ready."}, {"tools": [CREATE]}, {"text": "Written after resume."}]
    with model_server(turns) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.returncode == 0, first.stderr
        sid = first.run["session_id"]
        second = run(git_repo, tmp_path, None, server=server, args=("--resume", sid))
    assert second.returncode == 0, second.stderr
    assert second.run["session_id"] == sid
    assert second.run["final_message"] == "Written after resume."
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
