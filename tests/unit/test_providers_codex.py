"""The codex adapter: argv (sandbox before resume), env, JSONL parsing, error classes."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopkit.worker import providers
from loopkit.worker.providers.base import Exit, RunSpec
from loopkit.worker.providers.codex import CodexParser, _config_by_pattern, error_class, parse_reset

CONFIG = """model = "gpt-5.5"
model_provider = "local"

[model_providers.local]
name = "local"
base_url = "http://127.0.0.1:9/v1"
env_key = "MY_MODEL_KEY"
wire_api = "responses"
"""


def env_with_config(tmp_path: Path, text: str = CONFIG) -> dict[str, str]:
    (tmp_path / "config.toml").write_text(text)
    return {
        "PATH": "/usr/bin",
        "HOME": "/h",
        "CODEX_HOME": str(tmp_path),
        "MY_MODEL_KEY": "k",
        "ANTHROPIC_API_KEY": "other",
        "OPENAI_API_KEY": "o",
    }


def test_sandbox_goes_before_resume_and_the_prompt_last(tmp_path: Path) -> None:
    spec = RunSpec(
        prompt="-starts with a dash",
        resume="T1",
        sandbox="workspace-write",
        model="gpt-5.5",
        environ=env_with_config(tmp_path),
    )
    argv = providers.get("codex").build(spec).argv
    assert argv[:3] == ["codex", "exec", "--json"]
    assert argv.index("--sandbox") < argv.index("resume")
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("resume") + 1] == "T1"
    assert argv[argv.index("-m") + 1] == "gpt-5.5"
    assert argv[-2:] == ["--", "-starts with a dash"]


def test_read_only_forces_the_read_only_sandbox(tmp_path: Path) -> None:
    spec = RunSpec(
        prompt="p", sandbox="danger-full-access", read_only=True, environ=env_with_config(tmp_path)
    )
    argv = providers.get("codex").build(spec).argv
    assert argv[argv.index("--sandbox") + 1] == "read-only"


def test_env_passes_the_configured_key_not_anthropics(tmp_path: Path) -> None:
    inv = providers.get("codex").build(RunSpec(prompt="p", environ=env_with_config(tmp_path)))
    assert inv.env["MY_MODEL_KEY"] == "k" and inv.env["OPENAI_API_KEY"] == "o"
    assert "ANTHROPIC_API_KEY" not in inv.env
    assert inv.cost_trusted is False  # a local base_url
    assert inv.model == "gpt-5.5"
    assert inv.stdin is None  # /dev/null: codex waits for EOF on an open pipe


def test_config_without_tomllib_reads_the_same_keys() -> None:
    assert _config_by_pattern(CONFIG) == {
        "model": "gpt-5.5",
        "name": "local",
        "base_url": "http://127.0.0.1:9/v1",
        "env_key": "MY_MODEL_KEY",
    }


def test_vendor_endpoint_is_trusted(tmp_path: Path) -> None:
    inv = providers.get("codex").build(RunSpec(prompt="p", environ=env_with_config(tmp_path, "")))
    assert inv.cost_trusted is True


def feed(*objs: dict[str, object]) -> CodexParser:
    p = CodexParser()
    for o in objs:
        p.feed(json.dumps(o).encode() + b"\n")
    return p


def test_items_become_tool_calls_with_files() -> None:
    p = feed(
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "/bin/bash -lc 'sed -n 1,5p src/a.py'",
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "/bin/bash -lc 'sed -n 1,5p src/a.py'",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "i2",
                "type": "file_change",
                "status": "completed",
                "changes": [{"path": "/r/b.py", "kind": "add"}],
            },
        },
        {"type": "item.completed", "item": {"id": "i3", "type": "agent_message", "text": "Done."}},
        {"type": "turn.completed", "usage": {"input_tokens": 40, "output_tokens": 8}},
    )
    state = p.finish()
    assert state.session_id == "th" and state.final_message == "Done."
    assert state.tool_call_count == 2 and state.files_read == ["src/a.py"]
    assert state.files_written == ["/r/b.py"]
    assert (state.input_tokens, state.output_tokens) == (40, 8)
    outcome = providers.get("codex").classify(state, Exit(0))
    assert outcome.stop_reason == "completed" and outcome.claimed_complete


def test_a_failed_file_change_is_a_tool_error_not_an_edit() -> None:
    # codex 0.171 with its helpers refused: apply_patch fails ("Failed to write file"), the
    # item says status failed, and codex still exits 0.
    change = {"id": "i1", "type": "file_change", "changes": [{"path": "/r/b.py", "kind": "add"}]}
    p = feed(
        {"type": "item.started", "item": {**change, "status": "in_progress"}},
        {"type": "item.completed", "item": {**change, "status": "failed"}},
        {"type": "turn.completed", "usage": {"input_tokens": 4, "output_tokens": 1}},
    )
    state = p.finish()
    assert state.files_written == []  # nothing was written
    assert state.tool_errors == 1
    (call,) = state.tool_calls
    assert call.ok is False and call.error == "file_change failed"


def test_reconnect_lines_count_as_retries_and_turn_failed_decides() -> None:
    p = feed(
        {"type": "error", "message": "Reconnecting... 1/2 (stream error: 500)"},
        {"type": "error", "message": "Reconnecting... 2/2"},
        {
            "type": "turn.failed",
            "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"},
        },
    )
    state = p.finish()
    assert state.api_retries == 2
    outcome = providers.get("codex").classify(state, Exit(1))
    assert outcome.stop_reason == "rate_limited" and outcome.is_error


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("exceeded retry limit, last status: 429 Too Many Requests", "rate_limited"),
        ("You've hit your usage limit. Upgrade to Pro or try again at 3:45 PM.", "usage_limit"),
        ("unexpected status 401 Unauthorized: invalid_api_key", "auth_error"),
        ("unexpected status 400 Bad Request: invalid_request_error", "invalid_request"),
        (
            "We're currently experiencing high demand, which may cause temporary errors.",
            "api_error",
        ),
        ("stream disconnected before completion", "api_error"),
    ],
)
def test_error_classes(message: str, reason: str) -> None:
    assert error_class(message)[0] == reason


NOW = datetime(2026, 11, 29, 19, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ('"resets_in_seconds": 3600', "2026-11-29T20:00:00Z"),
        ("resets_at=1800000000", "2027-01-15T08:00:00Z"),
        ("try again in 2 hours 5 minutes.", "2026-11-29T21:05:00Z"),
        ("resets in 1d 5h", "2026-12-01T00:00:00Z"),
        ("no time here", None),
    ],
)
def test_reset_times(message: str, expected: str | None) -> None:
    assert parse_reset(message, now=NOW) == expected


def test_reset_at_a_clock_time_is_in_the_future() -> None:
    got = parse_reset("try again at 3:45 PM.", now=NOW)
    assert got is not None
    when = datetime.strptime(got, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert NOW < when <= NOW.replace(day=30, hour=23)
    dated = parse_reset("or try again at Jan 15th, 2027 8:00 AM.", now=NOW)
    assert dated is not None and dated.startswith("2027-01-1")


_values = st.one_of(st.none(), st.integers(), st.text(max_size=12), st.lists(st.none(), max_size=2))
_items = st.fixed_dictionaries(
    {"type": st.sampled_from(["command_execution", "file_change", "agent_message", "error", "x"])},
    optional={
        "id": st.one_of(st.text(max_size=3), st.integers()),
        "command": _values,
        "exit_code": _values,
        "status": _values,
        "changes": _values,
        "text": _values,
    },
)
_events = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["item.started", "item.completed", "item.updated"])},
        optional={"item": st.one_of(_items, _values)},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["turn.completed", "turn.failed", "error", "thread.started"])},
        optional={"usage": _values, "error": _values, "message": _values, "thread_id": _values},
    ),
).map(json.dumps)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_events, st.text(max_size=40), st.binary(max_size=40)), max_size=25))
@example([json.dumps({"type": "item.completed", "item": {"type": "file_change", "changes": 1}})])
def test_any_event_sequence_is_tolerated(lines: list[object]) -> None:
    p = CodexParser()
    for line in lines:
        p.feed(line)  # type: ignore[arg-type]
    state = p.finish()
    assert state.tool_errors <= state.tool_call_count
    outcome = providers.get("codex").classify(state, Exit(0))
    assert outcome.stop_reason in (
        "completed",
        "crashed",
        "api_error",
        "rate_limited",
        "usage_limit",
        "auth_error",
        "invalid_request",
    )
