"""The scripted model server over real HTTP, and the real claude / codex CLIs against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import git
from tests.helpers.agents import model_server, run_claude, run_codex

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


def test_codex_writes_edits_and_runs_a_command(git_repo: Path, tmp_path: Path) -> None:
    add = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
    edit = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hello\n+hello, world\n*** End Patch\n"
    turns = [
        {"text": "Creating the file.", "tools": [{"name": "apply_patch", "input": add}]},
        {"tools": [{"name": "apply_patch", "input": edit}]},
        {"tools": [{"name": "exec_command", "input": {"cmd": "cat hello.txt"}}]},
        {"text": "Done."},
    ]
    with model_server(turns) as server:
        run = run_codex(server, git_repo, "create hello.txt", home=tmp_path / "codex")
    assert run.returncode == 0, run.stderr
    assert "Refusing to create helper binaries" not in run.stderr  # its home is not in /tmp
    assert not any(
        i.get("status") == "failed" for i in (e["item"] for e in run.of_type("item.completed"))
    )
    assert (git_repo / "hello.txt").read_text() == "hello, world\n"
    assert "?? hello.txt" in git(git_repo, "status", "--porcelain")
    items = [e["item"] for e in run.of_type("item.completed")]
    assert [i["type"] for i in items] == [
        "agent_message",
        "file_change",
        "file_change",
        "command_execution",
        "agent_message",
    ]
    assert [c["kind"] for i in items[1:3] for c in i["changes"]] == ["add", "update"]
    assert items[3]["exit_code"] == 0 and "hello, world" in items[3]["aggregated_output"]
    assert run.of_type("turn.completed")[0]["usage"]["input_tokens"] == 400
    assert [r["turn"] for r in server.model_requests("openai")] == [0, 1, 2, 3]
    # the patch result came back as the custom tool's output
    last = server.model_requests("openai")[-1]["body"]["input"]
    assert any(i.get("type") == "custom_tool_call_output" for i in last)


# -- claude: faults ------------------------------------------------------------------------


def test_claude_529_twice_then_success(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"error": {"status": 529, "times": 2}, "text": "Recovered."}]) as server:
        run = run_claude(server, git_repo, "hi", home=tmp_path / "h", retries=2)
    assert run.returncode == 0, run.stderr
    retries = [e for e in run.of_type("system") if e.get("subtype") == "api_retry"]
    assert [(e["attempt"], e["error_status"]) for e in retries] == [(1, 529), (2, 529)]
    assert run.result["is_error"] is False and run.result["result"] == "Recovered."
    assert [r["served"] for r in server.model_requests()] == ["error", "error", "turn"]


def test_claude_error_that_never_clears_stops_at_the_retry_cap(
    git_repo: Path, tmp_path: Path
) -> None:
    with model_server([{"error": {"status": 529}}]) as server:
        run = run_claude(server, git_repo, "hi", home=tmp_path / "h", retries=1)
    assert run.returncode == 1
    assert run.result["is_error"] is True and run.result["subtype"] == "success"
    assert run.result["api_error_status"] == 529
    assert len(server.model_requests()) == 2  # the first try and one retry


def test_claude_429_with_should_retry_false_is_not_retried(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"error": {"status": 429, "headers": {"x-should-retry": "false"}, "message": "slow down"}}
    ]
    with model_server(turns) as server:
        run = run_claude(server, git_repo, "hi", home=tmp_path / "h", retries=3)
    assert run.returncode == 1
    assert run.result["api_error_status"] == 429 and "slow down" in run.result["result"]
    assert len(server.model_requests()) == 1
    assert not [e for e in run.of_type("system") if e.get("subtype") == "api_retry"]


def test_claude_cut_stream_is_resent_without_stream(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"cut": True, "text": "Whole answer."}]) as server:
        run = run_claude(server, git_repo, "hi", home=tmp_path / "h")
    assert run.returncode == 0, run.stderr
    assert run.result["result"] == "Whole answer."
    served = [(r["served"], r["stream"]) for r in server.model_requests()]
    assert served == [("cut", True), ("turn", False)]


def test_claude_resume_continues_the_script(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "First session."},
        {
            "tools": [
                {"name": "Write", "input": {"file_path": "{{cwd}}/later.txt", "content": "x\n"}}
            ]
        },
        {"text": "Resumed and wrote later.txt."},
    ]
    with model_server(turns) as server:
        first = run_claude(server, git_repo, "start", home=tmp_path / "h")
        assert first.returncode == 0 and first.result["result"] == "First session."
        assert first.session_id
        second = run_claude(server, git_repo, "go on", home=tmp_path / "h", resume=first.session_id)
    assert second.returncode == 0, second.stderr
    assert second.result["result"] == "Resumed and wrote later.txt."
    assert (git_repo / "later.txt").read_text() == "x\n"
    assert [r["turn"] for r in server.model_requests()] == [0, 1, 2]
    assert {r["session"] for r in server.model_requests()} == {first.session_id}


# -- codex: faults -------------------------------------------------------------------------


def test_codex_500_forever_is_retried_per_the_config(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"error": {"status": 500}}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c", retries=1)
    assert run.returncode == 1
    assert run.of_type("turn.failed")
    # one request retry inside each of two stream attempts
    assert len(server.model_requests()) == 4


def test_codex_500_once_then_success(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"error": {"status": 500, "times": 1}, "text": "Recovered."}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c", retries=1)
    assert run.returncode == 0, run.stderr
    assert run.of_type("item.completed")[-1]["item"]["text"] == "Recovered."
    assert [r["served"] for r in server.model_requests()] == ["error", "turn"]


def test_codex_429_is_not_retried(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"error": {"status": 429}}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c", retries=2)
    assert run.returncode == 1
    assert "429" in run.of_type("turn.failed")[0]["error"]["message"]
    assert len(server.model_requests()) == 1


def test_codex_usage_limit_body(git_repo: Path, tmp_path: Path) -> None:
    body = {"error": {"type": "usage_limit_reached", "message": "limit", "resets_at": 1900000000}}
    with model_server([{"error": {"status": 429, "body": body}}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c")
    assert run.returncode == 1
    assert "usage limit" in run.of_type("turn.failed")[0]["error"]["message"]


def test_codex_cut_stream_reconnects(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"cut": True, "text": "Whole answer."}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c", retries=1)
    assert run.returncode == 0, run.stderr
    assert any("Reconnecting" in e.get("message", "") for e in run.of_type("error"))
    assert [e["item"]["text"] for e in run.of_type("item.completed")] == ["Whole answer."]
    assert [r["served"] for r in server.model_requests()] == ["cut", "turn"]


def test_codex_cut_stream_without_retries_fails(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"cut": True, "text": "never"}]) as server:
        run = run_codex(server, git_repo, "hi", home=tmp_path / "c", retries=0)
    assert run.returncode == 1
    assert "stream" in run.of_type("turn.failed")[0]["error"]["message"]
    assert len(server.model_requests()) == 1


def test_codex_resume_continues_with_write_access(git_repo: Path, tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: later.txt\n+x\n*** End Patch\n"
    turns = [
        {"text": "First session."},
        {"tools": [{"name": "apply_patch", "input": patch}]},
        {"text": "Resumed."},
    ]
    with model_server(turns) as server:
        first = run_codex(server, git_repo, "start", home=tmp_path / "c")
        assert first.returncode == 0 and first.session_id
        second = run_codex(server, git_repo, "go on", home=tmp_path / "c", resume=first.session_id)
    assert second.returncode == 0, second.stderr
    assert (git_repo / "later.txt").read_text() == "x\n"
    assert [r["turn"] for r in server.model_requests()] == [0, 1, 2]
    assert second.session_id == first.session_id


def test_sessions_give_each_fresh_claude_run_its_own_script(git_repo: Path, tmp_path: Path) -> None:
    def write(name: str) -> dict[str, object]:
        file = {"file_path": "{{cwd}}/" + name, "content": "x\n"}
        return {"tools": [{"name": "Write", "input": file}]}

    script = {"sessions": [[write("one.txt"), "Attempt one."], [write("two.txt"), "Attempt two."]]}
    with model_server(script) as server:
        one = run_claude(server, git_repo, "fix it", home=tmp_path / "h")
        assert (git_repo / "one.txt").is_file() and not (git_repo / "two.txt").exists()
        two = run_claude(server, git_repo, "fix it again", home=tmp_path / "h")
    assert (one.result["result"], two.result["result"]) == ("Attempt one.", "Attempt two.")
    assert (git_repo / "two.txt").is_file()
    assert one.session_id != two.session_id
    assert [r["conversation"] for r in server.model_requests()] == [0, 0, 1, 1]
