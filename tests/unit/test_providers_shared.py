"""What the agent providers share through ``base``: the npm install line, the optional
flags, the tool list, and how a run that exited on its own or claimed done ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit.worker import providers
from loopkit.worker.providers.base import Exit, RunSpec, RunState, ToolCall


@pytest.mark.parametrize("name", providers.agents())
def test_every_agent_cli_is_installed_from_npm_under_its_own_name(name: str) -> None:
    provider = providers.get(name)
    assert provider.binary == name
    assert provider.install_hint.startswith("install ")
    assert " npm install -g " in provider.install_hint
    assert provider.install_hint.endswith("(or `make agents`)")


@pytest.mark.parametrize(
    ("name", "model", "session", "tools"),
    [
        ("copilot", "--model", "--resume", "--available-tools"),
        ("pi", "--model", "--session", "--tools"),
    ],
)
def test_model_session_and_tool_list_flags(
    tmp_path: Path, name: str, model: str, session: str, tools: str
) -> None:
    provider = providers.get(name)
    bare = provider.build(RunSpec(prompt="go", cwd=tmp_path, environ={}))
    assert not {model, session, tools} & set(bare.argv)
    spec = RunSpec(
        prompt="go",
        cwd=tmp_path,
        model="m1",
        resume="s1",
        allowed_tools=["read", "bash"],
        extra_args=["--x"],
        environ={},
    )
    argv = provider.build(spec).argv
    assert argv[argv.index(model) + 1] == "m1"
    assert argv[argv.index(session) + 1] == "s1"
    assert argv[argv.index(tools) + 1] == "read,bash"
    assert "--x" in argv
    judge = provider.build(RunSpec(prompt="go", cwd=tmp_path, read_only=True, environ={})).argv
    assert "bash" not in judge[judge.index(tools) + 1].split(",")


@pytest.mark.parametrize(
    ("name", "flag"), [("gemini", "--skip-trust"), ("qwen", "--max-session-turns")]
)
def test_gemini_and_qwen_share_one_command_line(tmp_path: Path, name: str, flag: str) -> None:
    argv = providers.get(name).build(RunSpec(prompt="-x", cwd=tmp_path, environ={})).argv
    assert argv[:4] == [name, "--prompt=-x", "--output-format", "stream-json"]
    assert argv[argv.index("--approval-mode") + 1] == "yolo" and flag in argv


@pytest.mark.parametrize("name", ["copilot", "pi"])
def test_an_unknown_session_is_an_invalid_request_any_other_exit_a_crash(name: str) -> None:
    provider = providers.get(name)
    gone = provider.classify(RunState(), Exit(1, stderr_tail="x\nError: session abc not found\n"))
    assert (gone.stop_reason, gone.error) == ("invalid_request", "Error: session abc not found")
    crash = provider.classify(RunState(), Exit(2, stderr_tail=""))
    assert crash.stop_reason == "crashed" and crash.error is not None
    assert crash.error.startswith(f"{name} exited 2: no ")


@pytest.mark.parametrize("name", ["copilot", "pi", "opencode"])
def test_done_after_an_unresolved_failure_is_no_claim(name: str) -> None:
    provider = providers.get(name)
    state = RunState(result_seen=True)
    assert provider.classify(state, Exit(0)).claimed_complete is True
    state.add_tool(ToolCall("1", "bash", {}, ok=False, error="exit 1", command="make"))
    end = provider.classify(state, Exit(0))
    assert (end.stop_reason, end.claimed_complete) == ("completed", False)
    assert end.error == "claimed done after a failed bash: exit 1"
