"""Gemini CLI's and Qwen Code's streams and ends, line by line: what their tools did, the
retries only stderr tells, the 429s that speak of quotas, refused writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopkit.worker.providers import tools
from loopkit.worker.providers.base import Exit, RunSpec, ToolCall
from loopkit.worker.providers.gemini import GeminiParser, GeminiProvider
from loopkit.worker.providers.qwen import QwenParser, QwenProvider


def feed(parser: Any, *lines: dict[str, Any]) -> Any:
    for line in lines:
        parser.feed(json.dumps(line))
    return parser.finish()


def g(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": t, "timestamp": "2026-01-01T00:00:00Z", **kw}


def test_tools_table_reads_writes_and_commands() -> None:
    call = tools.describe(ToolCall("1", "read_file", {}), {"file_path": "/r/a.py"}, tools.GEMINI)
    assert call.files_read == ["/r/a.py"] and not call.files_written
    call = tools.describe(ToolCall("2", "edit", {}), {"file_path": "/r/b.py"}, tools.QWEN)
    assert call.files_written == ["/r/b.py"]
    call = tools.describe(
        ToolCall("3", "run_shell_command", {}), {"command": "cat x.txt | wc -l"}, tools.QWEN
    )
    assert call.command == "cat x.txt | wc -l" and call.files_read == ["x.txt"]
    unknown = tools.describe(ToolCall("4", "Write", {}), {"file_path": "/r/c"}, tools.QWEN)
    assert unknown.files_written == [] and unknown.command is None  # claude's name, not qwen's


def test_gemini_stream_turns_message_and_tools() -> None:
    st = feed(
        GeminiParser(),
        g("init", session_id="s1", model="auto"),
        g("message", role="user", content="go"),
        g("message", role="assistant", content="Writ", delta=True),
        g("message", role="assistant", content="ing.", delta=True),
        g("tool_use", tool_name="write_file", tool_id="w1", parameters={"file_path": "/r/a"}),
        g("tool_result", tool_id="w1", status="success"),
        g("tool_use", tool_name="read_file", tool_id="r1", parameters={"file_path": "/r/x"}),
        g(
            "tool_result",
            tool_id="r1",
            status="error",
            error={"type": "tool_not_registered", "message": "Tool not found"},
        ),
        g("error", severity="warning", message="loop detected?"),
        g("message", role="assistant", content="Done.", delta=True),
        g(
            "result",
            status="success",
            stats={"input_tokens": 5, "output_tokens": 2, "models": {"m": {"total_tokens": 7}}},
        ),
    )
    assert st.session_id == "s1" and st.model == "m"
    assert st.turns == 3 and st.final_message == "Done."
    assert st.files_written == ["/r/a"] and st.tool_errors == 1
    assert st.permission_denials == []  # a read not offered is no refused write
    assert st.errors == [] and (st.input_tokens, st.output_tokens) == (5, 2)
    assert GeminiProvider().classify(st, Exit(0)).stop_reason == "completed"


def test_gemini_refused_write_then_done_is_a_denial() -> None:
    st = feed(
        GeminiParser(),
        g("tool_use", tool_name="write_file", tool_id="w1", parameters={"file_path": "/r/a"}),
        g("tool_result", tool_id="w1", status="error", error={"type": "tool_not_registered"}),
        g("message", role="assistant", content="Done.", delta=True),
        g("result", status="success", stats={}),
    )
    out = GeminiProvider().classify(st, Exit(0))
    assert out.stop_reason == "permission_denied" and not out.claimed_complete


STDERR_429 = (
    "Attempt 1 failed: scripted 429 RESOURCE_EXHAUSTED\n"
    "Suggested retry after 1s.. Retrying after 5900ms...\n"
    "Attempt 2 failed with status 503. Retrying with backoff... _ApiError\n"
)


def test_gemini_retries_said_only_on_stderr_are_counted_and_decide_a_timeout() -> None:
    st = feed(GeminiParser(), g("init", session_id="s", model="gemini-x"))
    out = GeminiProvider().classify(st, Exit(None, stopped="timeout", stderr_tail=STDERR_429))
    assert st.api_retries == 2
    assert out.stop_reason == "api_error" and "timed out retrying" in (out.error or "")
    only_429 = STDERR_429.rsplit("Attempt 2", 1)[0]
    out = GeminiProvider().classify(st, Exit(None, stopped="timeout", stderr_tail=only_429))
    assert out.stop_reason == "rate_limited"
    silent = GeminiProvider().classify(st, Exit(None, stopped="timeout", stderr_tail=""))
    assert silent.stop_reason == "timeout"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            '[API Error: {"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]',
            "invalid_request",
        ),
        (
            "[API Error: scripted 429 RESOURCE_EXHAUSTED]\nPlease wait and try again later. To increase your limits, request a quota increase",
            "rate_limited",
        ),
        ("You have exhausted your daily quota on this model.", "usage_limit"),
        ('[API Error: {"error":{"code":500,"status":"INTERNAL"}}]', "api_error"),
        ('[API Error: {"error":{"code":401,"status":"UNAUTHENTICATED"}}]', "auth_error"),
    ],
)
def test_gemini_result_errors(message: str, reason: str) -> None:
    st = feed(
        GeminiParser(),
        g("result", status="error", error={"type": "unknown", "message": message}, stats={}),
    )
    out = GeminiProvider().classify(st, Exit(1))
    assert out.stop_reason == reason and out.is_error and not out.claimed_complete


@pytest.mark.parametrize(
    ("code", "reason"),
    [(41, "auth_error"), (53, "max_turns"), (55, "invalid_request"), (1, "crashed")],
)
def test_gemini_exit_codes_without_a_result(code: int, reason: str) -> None:
    out = GeminiProvider().classify(GeminiParser().finish(), Exit(code, stderr_tail="boom"))
    assert out.stop_reason == reason


def test_gemini_build_and_a_prompt_that_looks_like_a_flag(tmp_path: Any) -> None:
    inv = GeminiProvider().build(
        RunSpec("-rf everything", cwd=tmp_path, max_turns=4, environ={"GEMINI_API_KEY": "k"})
    )
    assert inv.argv[1] == "--prompt=-rf everything"
    assert "--skip-trust" in inv.argv and inv.argv[inv.argv.index("--approval-mode") + 1] == "yolo"
    assert inv.env["GEMINI_DEFAULT_AUTH_TYPE"] == "gemini-api-key"
    assert inv.settings == {"model": {"maxSessionTurns": 4}}
    judge = GeminiProvider().build(RunSpec("x", cwd=tmp_path, read_only=True, environ={}))
    assert judge.argv[judge.argv.index("--approval-mode") + 1] == "plan"


def q(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": t, "uuid": "u", "session_id": "s", **kw}


def test_qwen_retry_events_and_the_quota_advice() -> None:
    st = feed(
        QwenParser(),
        q("system", subtype="retry", data={"attempt": 1, "reason": "retry"}),
        q(
            "result",
            subtype="error_during_execution",
            is_error=True,
            num_turns=1,
            error={
                "message": "[API Error: 429 rate_limit_exceeded]\nPossible quota limitations in"
                " place or slow response times detected. Please wait and try again later."
            },
        ),
    )
    out = QwenProvider().classify(st, Exit(1))
    assert st.api_retries == 1 and st.api_error_status == 429
    assert out.stop_reason == "rate_limited" and "quota" not in (out.error or "")


def test_qwen_refused_write_beside_a_write_is_not_done() -> None:
    use = {"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "/r/a"}}
    st = feed(
        QwenParser(),
        q("assistant", message={"id": "u", "content": [use]}),
        q(
            "user",
            message={"content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": False}]},
        ),
        q(
            "result",
            subtype="success",
            is_error=False,
            result="Done.",
            permission_denials=[{"tool_name": "run_shell_command", "tool_input": {"command": "x"}}],
        ),
    )
    assert st.files_written == ["/r/a"]
    out = QwenProvider().classify(st, Exit(0))
    assert out.stop_reason == "permission_denied" and not out.claimed_complete


def test_qwen_turn_cap_said_only_on_stderr() -> None:
    tail = "Reached max session turns for this session. Increase the number of turns"
    out = QwenProvider().classify(QwenParser().finish(), Exit(53, stderr_tail=tail))
    assert out.stop_reason == "max_turns"


def test_qwen_build(tmp_path: Any) -> None:
    inv = QwenProvider().build(
        RunSpec("-x", cwd=tmp_path, max_turns=3, environ={"OPENAI_MODEL": "m"})
    )
    assert inv.argv[1] == "--prompt=-x"
    assert inv.argv[inv.argv.index("--max-session-turns") + 1] == "3"
    assert inv.model == "m" and inv.env["OPENAI_MODEL"] == "m"
