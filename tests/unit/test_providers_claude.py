"""The claude adapter: argv, environment allow-list, stream parsing, error classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.worker import providers
from loopkit.worker.providers.base import Exit, RunSpec
from loopkit.worker.providers.claude import ClaudeParser, error_class

ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/x",
    "ANTHROPIC_API_KEY": "a-key",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9999",
    "OPENAI_API_KEY": "other-key",
    "CODEX_HOME": "/x",
    "AWS_SECRET_ACCESS_KEY": "nope",
    "CLAUDE_CODE_MAX_RETRIES": "2",
    "MY_TOKEN": "t",
}


def build(**kw: object) -> list[str]:
    spec = RunSpec(prompt="do it", cwd=Path("/repo"), environ=ENV, **kw)  # type: ignore[arg-type]
    return providers.get("claude").build(spec).argv


def test_argv_has_stream_json_turns_and_accept_edits() -> None:
    argv = build(max_turns=7, model="sonnet", max_cost_usd=1.5)
    assert argv[:3] == ["claude", "-p", "do it"]
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--verbose" in argv
    assert argv[argv.index("--max-turns") + 1] == "7"
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[argv.index("--max-budget-usd") + 1] == "1.5"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "--resume" not in argv


def test_resume_and_allowed_tools() -> None:
    argv = build(resume="abc-123", allowed_tools=["Bash(pytest:*)", "Edit"])
    assert argv[argv.index("--resume") + 1] == "abc-123"
    assert argv[argv.index("--allowedTools") + 1] == "Bash(pytest:*),Edit"


def test_read_only_allows_only_reading_tools() -> None:
    argv = build(read_only=True, permission_mode="acceptEdits")
    assert argv[argv.index("--allowedTools") + 1] == "Read,Glob,Grep"
    denied = argv[argv.index("--disallowedTools") + 1].split(",")
    assert {"Write", "Edit", "Bash"} <= set(denied)
    assert argv[argv.index("--permission-mode") + 1] == "default"


def test_env_is_an_allow_list_without_other_providers_keys() -> None:
    spec = RunSpec(prompt="x", environ=ENV, env_allow=["MY_TOKEN"])
    env = providers.get("claude").build(spec).env
    assert env["ANTHROPIC_API_KEY"] == "a-key"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    assert env["MY_TOKEN"] == "t"
    assert "OPENAI_API_KEY" not in env and "CODEX_HOME" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env


@pytest.mark.parametrize(
    ("base_url", "trusted"),
    [
        (None, True),
        ("https://api.anthropic.com", True),
        ("http://127.0.0.1:9", False),
        ("https://proxy.example.com/anthropic", False),
    ],
)
def test_cost_is_trusted_only_against_the_vendor(base_url: str | None, trusted: bool) -> None:
    env = {k: v for k, v in ENV.items() if k != "ANTHROPIC_BASE_URL"}
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    inv = providers.get("claude").build(RunSpec(prompt="x", environ=env))
    assert inv.cost_trusted is trusted


def lines(*objs: dict[str, object]) -> list[str]:
    return [json.dumps(o) + "\n" for o in objs]


def test_tool_calls_are_paired_with_their_results() -> None:
    p = ClaudeParser()
    events = []
    for line in lines(
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "m1"},
        {
            "type": "assistant",
            "message": {
                "id": "a1",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Read",
                        "input": {"file_path": "/r/a.py"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1\tx"}]
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "a2",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "Edit",
                        "input": {"file_path": "/r/a.py"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "is_error": True,
                        "content": "<tool_use_error>String to replace not found in file.</tool_use_error>",
                    }
                ]
            },
        },
    ):
        events += p.feed(line)
    state = p.finish()
    assert [e.kind for e in events] == [
        "init",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
    ]
    assert state.session_id == "s1" and state.turns == 2
    assert state.files_read == ["/r/a.py"]
    assert state.files_written == []  # the Edit failed
    edit = state.tool_calls[1]
    assert edit.ok is False and edit.error == "String to replace not found in file."
    assert state.tool_errors == 1 and state.tool_call_count == 2


def test_json_output_format_is_the_result_alone() -> None:
    p = ClaudeParser()
    p.feed(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": 3,
                "result": "All done.",
                "session_id": "s9",
                "total_cost_usd": 0.25,
                "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7},
                "terminal_reason": "completed",
            }
        )
    )
    state = p.finish()
    outcome = providers.get("claude").classify(state, Exit(exit_code=0))
    assert outcome.stop_reason == "completed" and outcome.claimed_complete
    assert (state.turns, state.input_tokens, state.output_tokens) == (3, 15, 7)
    assert state.cost_usd == 0.25 and state.final_message == "All done."


def test_an_api_failure_reported_as_success_subtype_is_an_error() -> None:
    p = ClaudeParser()
    p.feed(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "api_error_status": 529,
                "result": "API Error: overloaded",
            }
        )
    )
    outcome = providers.get("claude").classify(p.finish(), Exit(exit_code=1))
    assert outcome.stop_reason == "api_error" and outcome.is_error


@pytest.mark.parametrize(
    ("status", "message", "reason"),
    [
        (429, "API Error: 429 rate_limit_error", "rate_limited"),
        (429, "Claude AI usage limit reached|1800000000", "usage_limit"),
        (401, "invalid x-api-key", "auth_error"),
        (403, "forbidden", "auth_error"),
        (400, "prompt is too long", "invalid_request"),
        (500, "API Error: 500", "api_error"),
        (529, "Overloaded", "api_error"),
        (None, "Request timed out", "api_error"),
    ],
)
def test_error_classes(status: int | None, message: str, reason: str) -> None:
    got, resume_after = error_class(status, message)
    assert got == reason
    assert (resume_after == "2027-01-15T08:00:00Z") is (reason == "usage_limit")


@pytest.mark.parametrize(
    ("stopped", "reason"), [("timeout", "timeout"), ("cancelled", "cancelled"), ("stuck", "stuck")]
)
def test_loopkit_stopping_the_worker_wins(stopped: str, reason: str) -> None:
    outcome = providers.get("claude").classify(ClaudeParser().finish(), Exit(None, stopped))
    assert outcome.stop_reason == reason and outcome.is_error


def test_no_result_line_is_a_crash_or_a_bad_request() -> None:
    claude = providers.get("claude")
    state = ClaudeParser().finish()
    assert (
        claude.classify(state, Exit(1, stderr_tail="Segmentation fault")).stop_reason == "crashed"
    )
    bad = Exit(1, stderr_tail="No conversation found with session ID: nope")
    assert claude.classify(state, bad).stop_reason == "invalid_request"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.binary(max_size=80),
            st.dictionaries(
                st.sampled_from(["type", "message", "subtype", "content"]),
                st.one_of(
                    st.text(max_size=10), st.integers(), st.none(), st.lists(st.none(), max_size=2)
                ),
            ).map(json.dumps),
        ),
        max_size=20,
    )
)
def test_any_garbage_is_tolerated(items: list[object]) -> None:
    p = ClaudeParser()
    for item in items:
        p.feed(item)  # type: ignore[arg-type]
    outcome = providers.get("claude").classify(p.finish(), Exit(0))
    assert outcome.stop_reason in (
        "completed",
        "crashed",
        "api_error",
        "max_turns",
        "invalid_request",
        "auth_error",
        "rate_limited",
        "usage_limit",
        "permission_denied",
    )
