"""The scripted model server over real HTTP, and the real claude / codex CLIs against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents_helpers import model_server, run_claude, run_codex
from tests.conftest import git

pytestmark = pytest.mark.agents


def write_then_edit() -> list[dict[str, object]]:
    return [
        {
            "text": "Creating the file.",
            "tools": [
                {
                    "name": "Write",
                    "input": {"file_path": "{{cwd}}/hello.py", "content": "print('hello')\n"},
                }
            ],
        },
        {"tools": [{"name": "Read", "input": {"file_path": "{{cwd}}/hello.py"}}]},
        {
            "tools": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": "{{cwd}}/hello.py",
                        "old_string": "hello",
                        "new_string": "hello, world",
                    },
                }
            ]
        },
        {"text": "Wrote and edited hello.py."},
    ]


def test_claude_writes_then_edits_a_file(git_repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    with model_server(write_then_edit(), log=log) as server:
        run = run_claude(server, git_repo, "create hello.py", home=tmp_path / "h")
    assert run.returncode == 0, run.stderr
    assert run.result["is_error"] is False
    assert run.result["result"] == "Wrote and edited hello.py."
    assert run.result["num_turns"] == 4
    assert (git_repo / "hello.py").read_text() == "print('hello, world')\n"
    assert "?? hello.py" in git(git_repo, "status", "--porcelain")
    turns = [r["turn"] for r in server.model_requests("anthropic")]
    assert turns == [0, 1, 2, 3]
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e.get("turn") for e in logged if e.get("api") == "anthropic"] == turns
    # the Write's tool result came back in the next request
    second = server.model_requests("anthropic")[1]["body"]["messages"]
    assert any(
        block.get("type") == "tool_result"
        for m in second
        if isinstance(m.get("content"), list)
        for block in m["content"]
    )


def test_codex_patches_then_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {
            "text": "Creating the file.",
            "tools": [
                {
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n",
                }
            ],
        },
        {"tools": [{"name": "exec_command", "input": {"cmd": "cat hello.txt"}}]},
        {"text": "Done."},
    ]
    with model_server(turns) as server:
        run = run_codex(server, git_repo, "create hello.txt", home=tmp_path / "codex")
    assert run.returncode == 0, run.stderr
    assert (git_repo / "hello.txt").read_text() == "hello\n"
    kinds = [e["item"]["type"] for e in run.of_type("item.completed")]
    assert kinds == ["agent_message", "file_change", "command_execution", "agent_message"]
    command = run.of_type("item.completed")[2]["item"]
    assert command["exit_code"] == 0 and "hello" in command["aggregated_output"]
    assert run.of_type("turn.completed")[0]["usage"]["input_tokens"] == 300
    assert [r["turn"] for r in server.model_requests("openai")] == [0, 1, 2]
