"""The scripted model server's Chat Completions and Gemini dialects over plain HTTP: the
same script answered in each API's own shapes, side requests that take no turn, turns a
client seeds that do not move the script, and errors in each dialect's envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopkit.testing.server import client_cwd
from loopkit.testing.server.wire import json_for
from tests.e2e.test_model_server_http import post
from tests.helpers.agents import model_server

TOOL = {"type": "function", "function": {"name": "write_file", "parameters": {}}}
GEMINI_TOOLS = [{"functionDeclarations": [{"name": "write_file", "parameters": {}}]}]
WRITE = {
    "text": "Writing.",
    "tools": [{"name": "write_file", "input": {"file_path": "{{cwd}}/a.txt", "content": "x"}}],
}
QWEN_SYSTEM = "I'm currently working in the directory: /work/q\nHere is the folder structure"
GEMINI_CONTEXT = (
    "<session_context>\n- **Workspace Directories:**\n  - /work/g\n- **Directory Structure:**"
)


def chat(*history: dict[str, Any], stream: bool = True, tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "qwen-test",
        "messages": [{"role": "system", "content": QWEN_SYSTEM}, *history],
        "stream": stream,
    }
    if tools:
        body["tools"] = [TOOL]
    return body


def gemini(*contents: dict[str, Any], tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": GEMINI_CONTEXT}]}, *contents]
    }
    if tools:
        body["tools"] = GEMINI_TOOLS
    return body


def data_lines(raw: bytes) -> list[Any]:
    """The data of each server-sent event; no event of these dialects has a name."""
    out: list[Any] = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        lines = chunk.splitlines()
        assert all(not line.startswith("event:") for line in lines), chunk
        data = "".join(line[6:] for line in lines if line.startswith("data: "))
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def assemble_chat(chunks: list[Any]) -> dict[str, Any]:
    """What a Chat Completions client builds from the chunks."""
    assert chunks[-1] == "[DONE]"
    text, calls, finish, usage = "", {}, None, None
    for c in chunks[:-1]:
        if c.get("usage"):
            usage = c["usage"]
        for choice in c["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or ():
                call = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                call["name"] += tc.get("function", {}).get("name", "")
                call["arguments"] += tc.get("function", {}).get("arguments", "")
            finish = choice["finish_reason"] or finish
    return {
        "text": text,
        "calls": [calls[i] for i in sorted(calls)],
        "finish": finish,
        "usage": usage,
    }


# -- Chat Completions -----------------------------------------------------------------


def test_chat_stream_assembles_to_the_turn_with_the_clients_cwd() -> None:
    with model_server({"chat": [WRITE, "Done."]}) as server:
        status, headers, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
    assert status == 200 and headers["content-type"] == "text/event-stream"
    got = assemble_chat(data_lines(raw))
    assert got["text"] == "Writing."
    assert [c["name"] for c in got["calls"]] == ["write_file"]
    assert json.loads(got["calls"][0]["arguments"]) == {
        "file_path": "/work/q/a.txt",
        "content": "x",
    }
    assert got["calls"][0]["id"].startswith("call_")
    assert got["finish"] == "tool_calls"
    assert got["usage"]["prompt_tokens"] == 100 and got["usage"]["completion_tokens"] == 20


def test_chat_without_stream_is_one_completion_and_history_moves_the_script() -> None:
    with model_server(
        [WRITE, {"text": "Done.", "usage": {"input_tokens": 7, "output_tokens": 3}}]
    ) as server:
        history = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "Writing.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
        status, _, raw = post(server.url, "/v1/chat/completions", chat(*history, stream=False))
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Done."}
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == 7 and body["usage"]["total_tokens"] == 10


def test_chat_side_request_takes_no_turn_and_json_fits_its_schema() -> None:
    with model_server({"chat": [WRITE, "Done."]}) as server:
        side = chat({"role": "user", "content": "title?"}, stream=False, tools=False)
        status, _, raw = post(server.url, "/v1/chat/completions", side)
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == "Scripted session"
        side["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "schema": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}},
                    "required": ["title"],
                }
            },
        }
        _, _, raw = post(server.url, "/v1/chat/completions", side)
        assert json.loads(json.loads(raw)["choices"][0]["message"]["content"]) == {
            "title": "scripted"
        }
        _, _, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
        served = [r["served"] for r in server.requests]
        turns = [r.get("turn") for r in server.requests]
    assert assemble_chat(data_lines(raw))["calls"][0]["name"] == "write_file"
    assert served == ["side", "side", "turn"] and turns == [None, None, 0]


def test_chat_a_turn_the_client_seeded_does_not_move_the_script() -> None:
    seeded = {"role": "assistant", "content": "Got it. Thanks for the context!"}
    with model_server({"chat": [WRITE, "Done."]}) as server:
        body = chat(
            {"role": "user", "content": "context"}, seeded, {"role": "user", "content": "go"}
        )
        _, _, raw = post(server.url, "/v1/chat/completions", body)
        first = assemble_chat(data_lines(raw))
        # a resumed conversation: the script's own "Done." counts, and the next turn is past it
        resumed = chat(
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "Writing.",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": "more"},
        )
        _, _, raw = post(server.url, "/v1/chat/completions", resumed)
        turns = [r["turn"] for r in server.model_requests("chat")]
    assert first["calls"] and turns == [0, 2]
    assert assemble_chat(data_lines(raw))["text"] == "End of script."


def test_chat_errors_in_the_openai_envelope() -> None:
    script = [
        {"error": {"status": 429, "headers": {"retry-after": "3"}, "times": 1}, "text": "ok"},
    ]
    with model_server({"chat": script}) as server:
        status, headers, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
        assert status == 429 and headers["retry-after"] == "3"
        err = json.loads(raw)["error"]
        assert err["type"] == "rate_limit_exceeded" and err["code"] == "rate_limit_exceeded"
        assert set(err) == {"message", "type", "param", "code"}
        status, _, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
        assert status == 200 and assemble_chat(data_lines(raw))["text"] == "ok"
    for code, etype in ((500, "server_error"), (400, "invalid_request_error")):
        with model_server({"chat": [{"error": code}]}) as server:
            status, _, raw = post(
                server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
            )
        assert status == code and json.loads(raw)["error"]["type"] == etype


def test_chat_error_in_stream_and_cut() -> None:
    with model_server({"chat": [{"error": {"status": 500, "in_stream": True}}]}) as server:
        status, _, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
    chunks = data_lines(raw)
    assert status == 200 and chunks[0]["error"]["type"] == "server_error" and chunks[-1] == "[DONE]"
    with model_server({"chat": [{"text": "whole answer", "cut": True}]}) as server:
        _, _, raw = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
        _, _, again = post(
            server.url, "/v1/chat/completions", chat({"role": "user", "content": "go"})
        )
    assert "[DONE]" not in data_lines(raw) and len(data_lines(raw)) == 1
    assert assemble_chat(data_lines(again))["text"] == "whole answer"


# -- Gemini ---------------------------------------------------------------------------


def assemble_gemini(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    text, calls, finish, usage = "", [], None, None
    for p in pieces:
        cand = p["candidates"][0]
        for part in cand["content"]["parts"]:
            text += part.get("text", "")
            if "functionCall" in part:
                calls.append(part["functionCall"])
        finish = cand.get("finishReason") or finish
        usage = p.get("usageMetadata") or usage
    return {"text": text, "calls": calls, "finish": finish, "usage": usage}


def test_gemini_sse_stream_assembles_to_the_turn_with_the_clients_cwd() -> None:
    with model_server({"gemini": [WRITE, "Done."]}) as server:
        status, headers, raw = post(
            server.url,
            "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
            gemini({"role": "user", "parts": [{"text": "go"}]}),
        )
    assert status == 200 and headers["content-type"] == "text/event-stream"
    pieces = data_lines(raw)
    assert len(pieces) > 1 and all(p["modelVersion"] == "gemini-test" for p in pieces)
    got = assemble_gemini(pieces)
    assert got["text"] == "Writing."
    assert got["calls"][0]["name"] == "write_file"
    assert got["calls"][0]["args"] == {"file_path": "/work/g/a.txt", "content": "x"}
    assert got["finish"] == "STOP"
    assert got["usage"] == {
        "promptTokenCount": 100,
        "candidatesTokenCount": 20,
        "totalTokenCount": 120,
    }


def test_gemini_generate_content_and_a_stream_without_sse() -> None:
    call = {
        "role": "model",
        "parts": [{"text": "Writing."}, {"functionCall": {"name": "write_file", "args": {}}}],
    }
    result = {
        "role": "user",
        "parts": [{"functionResponse": {"name": "write_file", "response": {"output": "ok"}}}],
    }
    with model_server([WRITE, "Done."]) as server:
        status, _, raw = post(
            server.url,
            "/v1beta/models/m:generateContent",
            gemini({"role": "user", "parts": [{"text": "go"}]}, call, result),
        )
        assert status == 200
        body = json.loads(raw)
        assert body["candidates"][0]["content"] == {"role": "model", "parts": [{"text": "Done."}]}
        status, headers, raw = post(
            server.url,
            "/v1beta/models/m:streamGenerateContent",
            gemini({"role": "user", "parts": [{"text": "go"}]}),
        )
        assert headers["content-type"] == "application/json"
        assert assemble_gemini(json.loads(raw))["calls"][0]["name"] == "write_file"
        assert [r["turn"] for r in server.model_requests("gemini")] == [1, 0]


def test_gemini_side_request_with_a_json_schema_takes_no_turn() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
        },
        "required": ["complexity_reasoning", "complexity_score"],
    }
    side = gemini({"role": "user", "parts": [{"text": "how hard?"}]}, tools=False)
    side["generationConfig"] = {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    with model_server({"gemini": [WRITE]}) as server:
        status, _, raw = post(server.url, "/v1beta/models/flash:generateContent", side)
        answer = json.loads(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])
        _, _, raw = post(server.url, "/v1beta/models/pro:streamGenerateContent?alt=sse", gemini())
        assert [r["served"] for r in server.requests] == ["side", "turn"]
    assert status == 200 and answer == {"complexity_reasoning": "scripted", "complexity_score": 1}
    assert assemble_gemini(data_lines(raw))["calls"]


def test_gemini_seeded_model_turn_and_thoughts_do_not_move_the_script() -> None:
    seeded = {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]}
    thought = {"role": "model", "parts": [{"text": "thinking...", "thought": True}]}
    with model_server({"gemini": [WRITE]}) as server:
        post(
            server.url,
            "/v1beta/models/m:generateContent",
            gemini(seeded, thought, {"role": "user", "parts": [{"text": "go"}]}),
        )
        assert [r["turn"] for r in server.model_requests("gemini")] == [0]


@pytest.mark.parametrize(
    ("status", "rpc"),
    [
        (429, "RESOURCE_EXHAUSTED"),
        (500, "INTERNAL"),
        (400, "INVALID_ARGUMENT"),
        (503, "UNAVAILABLE"),
    ],
)
def test_gemini_errors_in_the_google_rpc_envelope(status: int, rpc: str) -> None:
    error = (
        {"status": status, "headers": {"retry-after": "2"}} if status == 429 else {"status": status}
    )
    with model_server({"gemini": [{"error": error}]}) as server:
        got, headers, raw = post(
            server.url, "/v1beta/models/m:streamGenerateContent?alt=sse", gemini()
        )
    err = json.loads(raw)["error"]
    assert got == status and err["code"] == status and err["status"] == rpc
    if status == 429:
        assert headers["retry-after"] == "2"
        assert err["details"] == [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}
        ]


def test_gemini_error_inside_a_200_stream() -> None:
    with model_server({"gemini": [{"error": {"status": 500, "in_stream": True}}]}) as server:
        status, _, raw = post(
            server.url, "/v1beta/models/m:streamGenerateContent?alt=sse", gemini()
        )
    assert status == 200 and data_lines(raw) == [
        {"error": {"code": 500, "message": "scripted 500 INTERNAL", "status": "INTERNAL"}}
    ]


# -- {{cwd}} in every wording ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "cwd"),
    [
        ({"system": "Primary working directory: /r/claude\n"}, "/r/claude"),
        ({"input": [{"content": [{"text": "<cwd>/r/codex</cwd>"}]}]}, "/r/codex"),
        ({"messages": [{"role": "system", "content": QWEN_SYSTEM}]}, "/work/q"),
        ({"contents": [{"role": "user", "parts": [{"text": GEMINI_CONTEXT}]}]}, "/work/g"),
        (
            {"systemInstruction": {"parts": [{"text": "Working directory: `/r/ticks/`."}]}},
            "/r/ticks",
        ),
        (
            {
                "messages": [
                    {"role": "system", "content": "Your current working directory is: src/app\n"}
                ]
            },
            "src/app",
        ),
    ],
)
def test_client_cwd_in_each_wording(body: dict[str, Any], cwd: str) -> None:
    assert client_cwd(body) == cwd


def test_cwd_unannounced_or_relative_still_makes_a_path() -> None:
    turn = {"tools": [{"name": "write_file", "input": {"file_path": "{{cwd}}/a.txt"}}]}
    with model_server({"chat": [turn]}) as server:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "go"}],
            "tools": [TOOL],
            "stream": True,
        }
        _, _, raw = post(server.url, "/v1/chat/completions", body)
        rel = {
            **body,
            "messages": [
                {"role": "system", "content": "I'm currently working in the directory: work/"}
            ],
        }
        _, _, raw2 = post(server.url, "/v1/chat/completions", rel)
    assert json.loads(assemble_chat(data_lines(raw))["calls"][0]["arguments"]) == {
        "file_path": "./a.txt"
    }
    assert json.loads(assemble_chat(data_lines(raw2))["calls"][0]["arguments"]) == {
        "file_path": "work/a.txt"
    }


def test_json_for_a_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"enum": ["x", "y"]},
            "c": {"type": "array"},
            "d": {"type": "boolean"},
            "e": {"anyOf": [{"type": "number", "minimum": 5}]},
            "f": {"type": "object", "properties": {"g": {"type": "null"}}, "required": ["g"]},
        },
        "required": ["a", "b", "c", "d", "e", "f"],
    }
    assert json_for(schema) == {
        "a": "scripted",
        "b": "x",
        "c": [],
        "d": False,
        "e": 5,
        "f": {"g": None},
    }


@pytest.mark.parametrize(
    ("client", "settings", "var"),
    [
        ("gemini", ".gemini/settings.json", "GOOGLE_GEMINI_BASE_URL"),
        ("qwen", ".qwen/settings.json", "OPENAI_BASE_URL"),
    ],
)
def test_console_script_env_for_gemini_and_qwen(
    tmp_path, client: str, settings: str, var: str
) -> None:
    import signal
    import subprocess

    from tests.e2e.test_model_server_http import lk_model_server

    script = tmp_path / "script.yaml"
    script.write_text("- text: hello\n")
    proc = subprocess.Popen(
        [lk_model_server(), str(script), "--env", client, "--home", str(tmp_path / "h")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["env"]["HOME"] == str(tmp_path / "h")
        assert ready["env"][var].startswith(ready["url"])
        assert json.loads((tmp_path / "h" / settings).read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
