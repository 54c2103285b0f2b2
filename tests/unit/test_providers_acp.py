"""The acp provider: its command, its stream's parse, and how a run ended."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.worker import providers
from loopkit.worker.providers.acp import AcpParser, classify
from loopkit.worker.providers.base import STOP_REASONS, Exit, RunSpec


def lines_for(
    stop_reason: str | None, *, stopped: str | None = None, error: str | None = None
) -> list[str]:
    return [
        json.dumps({"acp": "session", "sessionId": "s1", "resumed": False}),
        json.dumps({"acp": "end", "stop_reason": stop_reason, "stopped": stopped, "error": error}),
    ]


def ended(stop_reason: str | None, **kw: Any) -> tuple[str, bool, bool]:
    parser = AcpParser()
    for line in lines_for(stop_reason, **kw):
        parser.feed(line)
    out = classify(parser.finish(), Exit(exit_code=0 if stop_reason else 1))
    return out.stop_reason, out.is_error, out.claimed_complete


@pytest.mark.parametrize(
    ("stop", "kw", "expected"),
    [
        ("end_turn", {}, ("completed", False, True)),
        ("max_tokens", {}, ("max_turns", True, False)),
        ("max_turn_requests", {}, ("max_turns", True, False)),
        ("refusal", {}, ("permission_denied", True, False)),
        ("cancelled", {}, ("cancelled", True, False)),
        ("cancelled", {"stopped": "max_turns"}, ("max_turns", True, False)),
        (None, {"error": "session/prompt: Internal error: API Error: 429 rate"}, ("rate_limited", True, False)),
        (None, {"error": "session/prompt: Claude AI usage limit reached|1800000000"}, ("usage_limit", True, False)),
        (None, {"error": "session/prompt: the agent exited (1) before it answered"}, ("crashed", True, False)),
        # What gemini's and qwen's ACP modes answer session/new without their keys.
        (None, {"error": "session/new: Gemini API key is missing or not configured."}, ("auth_error", True, False)),
        (None, {"error": "session/new: Authentication required: Use Qwen Code CLI to authenticate first."}, ("auth_error", True, False)),
        (None, {"error": "the agent cannot resume a session (no loadSession)"}, ("invalid_request", True, False)),
    ],
)  # fmt: skip
def test_how_a_run_ended(
    stop: str | None, kw: dict[str, Any], expected: tuple[str, bool, bool]
) -> None:
    assert ended(stop, **kw) == expected


def test_no_end_line_is_a_crash() -> None:
    parser = AcpParser()
    parser.feed(json.dumps({"acp": "start", "agent": ["x"], "cwd": "/"}))
    out = classify(parser.finish(), Exit(exit_code=1, stderr_tail="Traceback\nBoom\n"))
    assert out.stop_reason == "crashed" and "Boom" in (out.error or "")


def test_history_replayed_by_a_load_is_not_this_runs_work() -> None:
    """session/load replays the old conversation as session/update before the prompt."""
    parser = AcpParser()
    old = {"sessionUpdate": "tool_call", "toolCallId": "old", "kind": "edit", "status": "completed",
           "rawInput": {"file_path": "/r/a.py"}, "title": "Write a.py"}  # fmt: skip
    parser.feed(
        json.dumps({"acp": "in", "msg": {"method": "session/update", "params": {"update": old}}})
    )
    parser.feed(json.dumps({"acp": "session", "sessionId": "s1", "resumed": True}))
    state = parser.finish()
    assert state.tool_call_count == 0 and state.files_written == []


def test_the_command_runs_the_client_with_its_settings_beside_the_handoff(tmp_path: Path) -> None:
    spec = RunSpec(
        prompt="do it",
        cwd=tmp_path,
        agent="codex",
        max_turns=4,
        scope={"writable": ["src/**"]},
        control=["loop.yaml"],
        handoff_path=tmp_path / "handoff.md",
    )
    inv = providers.get("acp").build(spec)
    assert inv.argv == [sys.executable, "-m", "loopkit.worker.acp"]
    config = json.loads(inv.files[tmp_path / "acp.json"])
    assert inv.env["LOOPKIT_ACP_CONFIG"] == str(tmp_path / "acp.json")
    assert config["agent"] == ["codex-acp"] and config["max_turns"] == 4
    assert config["scope"] == {"writable": ["src/**"]} and config["control"] == ["loop.yaml"]
    own = RunSpec(
        prompt="p", cwd=tmp_path, command="my-agent --acp 'a b'", handoff_path=tmp_path / "h"
    )
    assert json.loads(providers.get("acp").build(own).files[tmp_path / "acp.json"])["agent"] == [
        "my-agent", "--acp", "a b",
    ]  # fmt: skip


def test_an_unknown_agent_and_a_missing_one_are_named(tmp_path: Path) -> None:
    p = providers.get("acp")
    with pytest.raises(BadInput, match="no ACP agent 'nope'"):
        p.build(RunSpec(prompt="p", cwd=tmp_path, agent="nope"))
    inv = p.build(
        RunSpec(
            prompt="p", cwd=tmp_path, command="no-such-acp-agent-x", handoff_path=tmp_path / "h"
        )
    )
    with pytest.raises(EnvironmentProblem, match="no-such-acp-agent-x not found"):
        p.locate(inv)


_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_UPDATE = st.fixed_dictionaries(
    {"sessionUpdate": st.sampled_from(["agent_message_chunk", "tool_call", "tool_call_update", "usage_update", "plan"])},
    optional={
        "toolCallId": st.text(max_size=3),
        "status": st.sampled_from(["pending", "in_progress", "completed", "failed"]) | _VALUE,
        "kind": st.sampled_from(["edit", "read", "execute", "delete", "other"]) | _VALUE,
        "rawInput": _VALUE,
        "locations": _VALUE,
        "content": _VALUE,
        "title": _VALUE,
        "cost": _VALUE,
    },
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(_UPDATE | _VALUE, max_size=12), st.sampled_from([None, "end_turn", "cancelled"]))
def test_any_stream_parses_and_ends_in_a_known_reason(updates: list[Any], stop: str | None) -> None:
    parser = AcpParser()
    parser.feed(json.dumps({"acp": "session", "sessionId": "s"}))
    for u in updates:
        parser.feed(
            json.dumps({"acp": "in", "msg": {"method": "session/update", "params": {"update": u}}})
        )
        parser.feed(
            json.dumps({"acp": "gate", "allowed": False, "path": u if isinstance(u, str) else None})
        )
    parser.feed(json.dumps({"acp": "end", "stop_reason": stop}))
    out = classify(parser.finish(), Exit(exit_code=0))
    assert out.stop_reason in STOP_REASONS


def test_the_contract_names_a_wrong_agent_where_it_is() -> None:
    from loopkit import contract

    base = {
        "version": 1,
        "objective": "o",
        "scope": {"writable": ["src/**"]},
        "criteria": [{"name": "c", "run": "true"}],
    }
    assert contract.validate({**base, "worker": {"provider": "acp", "agent": "codex"}}) == []
    assert contract.validate({**base, "worker": {"provider": "acp", "command": "x --acp"}}) == []
    problems = contract.validate({**base, "worker": {"provider": "acp", "agent": "nope"}})
    assert [p.path for p in problems] == ["$.worker.agent"]
    assert "claude" in problems[0].message and "opencode" in problems[0].message
