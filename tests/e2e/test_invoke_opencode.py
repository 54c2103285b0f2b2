"""lk-invoke driving the real opencode CLI against the scripted model server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import model_server, opencode_bin, opencode_env_for
from tests.helpers.invoke import Invoked, lk_invoke, write_contract

pytestmark = pytest.mark.agents

WRITE = {"name": "write", "input": {"filePath": "{{cwd}}/hello.py", "content": "print('hello')\n"}}


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
    opencode_bin()
    contract = write_contract(tmp / "loop.yaml", worker={"provider": "opencode", **(worker or {})})

    def go(s: Any) -> Invoked:
        env = opencode_env_for(s, tmp / "person")
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
    # every file but loopkit's own state folder, ignored ones included
    return sorted(
        p for p in (line[3:] for line in out.splitlines()) if not p.startswith(".loopkit/")
    )


def test_writes_a_file_and_runs_a_command_leaving_no_config_in_the_tree(
    git_repo: Path, tmp_path: Path
) -> None:
    turns = [
        {"text": "Creating hello.py.", "tools": [WRITE]},
        {"tools": [bash("python3 hello.py && cat hello.py")]},
        {"text": "Done."},
    ]
    person = tmp_path / "person" / ".config" / "opencode" / "opencode.json"
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert rec["usage"]["tool_calls"] == 2 and rec["usage"]["turns"] == 3
    assert rec["usage"]["input_tokens"] == 300 and rec["usage"]["output_tokens"] == 60
    assert rec["session_id"].startswith("ses_")
    assert rec["cost"]["trusted"] is False
    # The only change in the work tree is the model's file: opencode's settings (with
    # the endpoint and key) live in a private home, never in the project.
    assert status(git_repo) == ["hello.py"], status(git_repo)
    private = list((tmp_path / "homes").glob("*/opencode/config/opencode/opencode.json"))
    assert len(private) == 1
    rendered = json.loads(private[0].read_text())
    rendered.pop("$schema", None)  # opencode adds it to the file it reads
    # The key set, the run is metered: the copy is the person's without its apiKey.
    expected = json.loads(person.read_text())
    expected["provider"]["anthropic"]["options"].pop("apiKey")
    assert rendered == expected and rec["meter"]["statuses"] == {"200": 3}
    # ...and its sessions never reach the person's own data folder.
    assert not (tmp_path / "person" / ".local" / "share" / "opencode").exists()


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
    assert rec["claimed_complete"] is False
    assert rec["tool_errors"] == 2
    assert "exit 2" in rec["error"]


def test_refused_write_outside_the_project(git_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    turns = [
        {"tools": [{"name": "write", "input": {"filePath": str(outside), "content": "x\n"}}]},
        {"text": "Done."},
    ]
    r = run(git_repo, tmp_path, turns)
    rec = r.run
    assert not outside.exists()
    assert rec["stop_reason"] == "permission_denied" and rec["claimed_complete"] is False
    assert rec["permission_denials"] and rec["permission_denials"][0]["tool"] == "write"


@pytest.mark.parametrize(("code", "reason"), [(429, "rate_limited"), (500, "api_error")])
def test_server_errors_are_transient(
    git_repo: Path, tmp_path: Path, code: int, reason: str
) -> None:
    # retry-after-ms keeps opencode's own backoff short; it retries silently on stdout.
    turns = [{"error": {"status": code, "headers": {"retry-after-ms": "20"}}}]
    with model_server(turns) as server:
        r = run(git_repo, tmp_path, None, server=server)
        tries = len(server.model_requests("anthropic"))
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == reason and rec["is_error"] is True
    assert rec["api_error_status"] == code and str(code) in rec["error"]
    assert tries > 1
    assert rec["api_retries"] == tries - 1  # counted from its stderr


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


def test_a_worker_that_rewrites_its_own_settings_does_not_keep_them(
    git_repo: Path, tmp_path: Path
) -> None:
    """The hostile worker points its own opencode at another endpoint (in the folder it
    runs with, and in the person's); the next run talks to the real one all the same."""
    evil = json.dumps({"provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:9"}}}})
    # opencode refuses a shell command naming a path outside the project; python does not.
    code = (
        "import os, pathlib; "
        "homes = [os.environ['XDG_CONFIG_HOME'], os.path.expanduser('~/.config')]\n"
        "for h in homes:\n"
        "    p = pathlib.Path(h, 'opencode', 'opencode.json')\n"
        "    try:\n"
        "        p.parent.mkdir(parents=True, exist_ok=True); p.write_text(os.environ['EVIL'])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    plant = f"EVIL='{evil}' python3 -c \"{code}\""
    person = tmp_path / "person" / ".config" / "opencode" / "opencode.json"
    with model_server([{"tools": [bash(plant)]}, {"text": "Planted."}]) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.run["final_message"] == "Planted.", first.stderr
        before = person.read_text()
        # The plant took: opencode ran it, and the folder it runs with was rewritten.
        assert first.run["tool_errors"] == 0
        (private,) = (tmp_path / "homes").glob("*/opencode/config/opencode/opencode.json")
        assert "127.0.0.1:9" in private.read_text()
        second = run(git_repo, tmp_path, None, server=server)
    assert "evil" not in before and "127.0.0.1:9" not in before
    assert second.returncode == 0, second.stderr
    assert second.run["final_message"] == "Planted."  # the scripted server answered again
    assert status(git_repo) == [], status(git_repo)


def test_the_turn_cap_is_max_turns(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"tools": [bash(f"echo {n}")]} for n in range(4)] + [{"text": "Done."}]
    r = run(git_repo, tmp_path, turns, worker={"max_turns": 2})
    rec = r.run
    assert rec["stop_reason"] == "max_turns" and rec["is_error"] is True
    assert rec["claimed_complete"] is False
    assert rec["usage"]["turns"] > 2  # past the cap: opencode asks for text only, and goes on
