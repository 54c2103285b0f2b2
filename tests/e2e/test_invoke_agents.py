"""lk-invoke driving every agent CLI of the registry (``providers.agents()``) against the
scripted model server: what each must do alike -- write a file and run a command, resume
its session, not claim done after a failure, refuse a write outside the project, classify
a server error that never clears -- parametrised over the registry. What one CLI alone
does is in its own ``test_invoke_NAME.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopkit.worker import providers
from tests.helpers.agents import model_server
from tests.helpers.invoke import invoke_agent, tree_status

pytestmark = pytest.mark.agents

TEXT = "print('hello')\n"
Tool = dict[str, Any]


def _write(name: str, path: str, text: str) -> Tool:
    """The tool call of the CLI ``name`` that writes ``text`` to the new file ``path``."""
    if name == "codex":  # its patch names the file relative to the work tree
        patch = f"*** Begin Patch\n*** Add File: {path.rsplit('/', 1)[-1]}\n+{text}*** End Patch\n"
        return {"name": "apply_patch", "input": patch}
    tool, path_arg, text_arg = WRITE_TOOLS[name]
    return {"name": tool, "input": {path_arg: path, text_arg: text}}


#: Each CLI's tool that writes a new file: (name, path argument, text argument).
WRITE_TOOLS = {
    "claude": ("Write", "file_path", "content"),
    "codex": ("apply_patch", "", ""),
    "gemini": ("write_file", "file_path", "content"),
    "qwen": ("write_file", "file_path", "content"),
    "opencode": ("write", "filePath", "content"),
    "pi": ("write", "path", "content"),
    "copilot": ("create", "path", "file_text"),
}
#: Each CLI's shell tool, given a command.
SHELLS: dict[str, Callable[[str], Tool]] = {
    "claude": lambda c: {"name": "Bash", "input": {"command": c}},
    "codex": lambda c: {"name": "exec_command", "input": {"cmd": c}},
    "gemini": lambda c: {"name": "run_shell_command", "input": {"command": c}},
    "qwen": lambda c: {"name": "run_shell_command", "input": {"command": c}},
    "opencode": lambda c: {"name": "bash", "input": {"command": c, "description": "run"}},
    "pi": lambda c: {"name": "bash", "input": {"command": c}},
    "copilot": lambda c: {"name": "bash", "input": {"command": c, "description": "run"}},
}
#: The answer headers that keep a CLI's own backoff short, and the retries it is given.
FAST_RETRY = {
    "opencode": ({"retry-after-ms": "20"}, 0),  # else about 100 s of silent retries
    "pi": ({}, 2),
    "copilot": ({"retry-after-ms": "20", "retry-after": "0"}, 0),  # else about a minute
}


def write(name: str) -> Tool:
    return _write(name, "{{cwd}}/hello.py" if name != "pi" else "hello.py", TEXT)


def test_every_agent_of_the_registry_is_driven_here() -> None:
    """A provider registered with a CLI of its own is driven by the tests below as soon
    as its tools are named here: the list is the registry's, not this file's."""
    assert sorted(WRITE_TOOLS) == sorted(SHELLS) == sorted(providers.agents())


def _home_kept_private(name: str, rec: dict[str, Any], tmp: Path) -> None:
    """The CLI's settings and sessions live in loopkit's private home for it: never the
    work tree, never the person's own."""
    person = tmp / "person"
    if name == "opencode":
        assert rec["usage"]["input_tokens"] == 300 and rec["usage"]["output_tokens"] == 60
        assert rec["session_id"].startswith("ses_")
        (private,) = (tmp / "homes").glob("*/opencode/config/opencode/opencode.json")
        rendered = json.loads(private.read_text())
        rendered.pop("$schema", None)  # opencode adds it to the file it reads
        # The key set, the run is metered: the copy is the person's without its apiKey.
        expected = json.loads((person / ".config" / "opencode" / "opencode.json").read_text())
        expected["provider"]["anthropic"]["options"].pop("apiKey")
        assert rendered == expected and rec["meter"]["statuses"] == {"200": 3}
        assert not (person / ".local" / "share" / "opencode").exists()
    elif name == "pi":
        assert rec["usage"]["input_tokens"] == 300 and rec["usage"]["output_tokens"] == 60
        assert rec["effective_model"] == "claude-sonnet-4-5"
        (private,) = (tmp / "homes").glob("*/pi")
        assert list(private.glob("sessions/*/*.jsonl"))
        assert not (person / "sessions").exists()
    elif name == "copilot":
        assert rec["effective_model"] == "claude-sonnet-4.5"
        assert list((tmp / "homes").glob("*/copilot/session-state/*"))
        assert not (person / ".copilot" / "session-state").exists()


@pytest.mark.parametrize("name", ["opencode", "pi", "copilot"])
def test_writes_a_file_and_runs_a_command_leaving_nothing_else_in_the_tree(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    turns = [
        {"text": "Creating hello.py.", "tools": [write(name)]},
        {"tools": [SHELLS[name]("python3 hello.py && cat hello.py")]},
        {"text": "Done."},
    ]
    r = invoke_agent(name, git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == TEXT
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Done."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert rec["usage"]["tool_calls"] == 2 and rec["usage"]["turns"] == 3
    assert rec["session_id"] and rec["cost"]["trusted"] is False
    assert tree_status(git_repo) == ["hello.py"], tree_status(git_repo)
    _home_kept_private(name, rec, tmp_path)


@pytest.mark.parametrize("name", ["codex", "gemini", "qwen", "opencode", "pi", "copilot"])
def test_resume_continues_the_session(git_repo: Path, tmp_path: Path, name: str) -> None:
    turns = [{"text": "Ready."}, {"tools": [write(name)]}, {"text": "Written after resume."}]
    with model_server(turns) as server:
        first = invoke_agent(name, git_repo, tmp_path, None, server=server)
        assert first.returncode == 0, first.stderr
        sid = first.run["session_id"]
        second = invoke_agent(name, git_repo, tmp_path, None, server=server, args=["--resume", sid])
        served = [r["turn"] for r in server.model_requests()]
    assert second.returncode == 0, second.stderr
    assert second.run["final_message"] == "Written after resume."
    assert (git_repo / "hello.py").read_text() == TEXT  # written: not read-only
    argv = second.run["command"]
    if name == "gemini":
        assert argv[argv.index("--resume") + 1] == sid
    else:
        assert second.run["session_id"] == sid
    if name == "codex":  # the sandbox before `resume` keeps write access
        assert argv.index("--sandbox") < argv.index("resume")
    if name in ("gemini", "qwen"):
        assert served == [0, 1, 2]


@pytest.mark.parametrize("name", ["opencode", "pi", "copilot"])
def test_done_after_a_failed_command_and_a_missing_tool_is_not_a_claim(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    # Copilot itself reports the command a success (exit code 2 aside) and exits 0.
    turns = [
        {"tools": [SHELLS[name]("exit 2")]},
        {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
        {"text": "Done."},
    ]
    rec = invoke_agent(name, git_repo, tmp_path, turns).run
    assert rec["final_message"] == "Done."
    assert rec["claimed_complete"] is False and rec["tool_errors"] == 2
    assert "exit" in rec["error"] and "2" in rec["error"]
    if name != "pi":
        assert "exit 2" in rec["error"]
    if name == "copilot":
        assert rec["exit_code"] == 0


#: How each CLI is made to refuse a write: its approval mode, or no write tool (pi
#: answers "Tool write not found").
REFUSING = {
    "gemini": {"permission_mode": "default"},
    "qwen": {"permission_mode": "default"},
    "pi": {"allowed_tools": ["read", "bash"]},
}


@pytest.mark.parametrize("name", list(REFUSING))
def test_a_refused_write_then_done_is_not_completed(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    turns = [{"tools": [write(name)]}, {"text": "Done."}]
    rec = invoke_agent(name, git_repo, tmp_path, turns, worker=REFUSING[name], timeout=60).run
    assert not (git_repo / "hello.py").exists()
    assert rec["final_message"] == "Done."
    assert rec["claimed_complete"] is False and rec["files_written"] == []
    if name == "pi":
        assert "--tools" in rec["command"]
    else:
        assert rec["stop_reason"] == "permission_denied"
    if name == "qwen":
        assert rec["permission_denials"][0]["tool"] == "write_file"
    if name == "gemini":
        assert rec["tool_errors"] == 1


@pytest.mark.parametrize("name", ["opencode", "copilot"])
def test_refused_write_outside_the_project(git_repo: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside.txt"
    turns = [{"tools": [_write(name, str(outside), "x\n")]}, {"text": "Done."}]
    rec = invoke_agent(name, git_repo, tmp_path, turns).run
    assert not outside.exists()
    assert rec["stop_reason"] == "permission_denied" and rec["claimed_complete"] is False
    assert rec["permission_denials"][0]["tool"] == WRITE_TOOLS[name][0]


@pytest.mark.parametrize("name", list(FAST_RETRY))
@pytest.mark.parametrize(("code", "reason"), [(429, "rate_limited"), (500, "api_error")])
def test_server_errors_are_transient(
    git_repo: Path, tmp_path: Path, name: str, code: int, reason: str
) -> None:
    headers, retries = FAST_RETRY[name]
    with model_server([{"error": {"status": code, "headers": headers}}]) as server:
        r = invoke_agent(name, git_repo, tmp_path, None, server=server, retries=retries)
        tries = len(server.model_requests())
    assert r.returncode == 1
    rec = r.run
    assert rec["stop_reason"] == reason and rec["is_error"] is True
    assert rec["api_error_status"] == code and str(code) in rec["error"]
    assert rec["api_retries"] == tries - 1 and tries > 1  # counted from its own signals
    if name == "pi":  # pi exits 0 after an API failure; the stream's last message says error
        assert rec["exit_code"] == 0 and tries == 3
