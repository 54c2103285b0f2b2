"""The scripted model server over plain HTTP, and the lk-model-server console script."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopkit.testing.server import ModelServer
from tests.helpers.agents import model_server, scripted_server_fixture  # noqa: F401

SESSION = {"x-claude-code-session-id": "s-1"}


def post(
    url: str, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})}
        )
        resp = conn.getresponse()
        try:
            data = resp.read()
        except http.client.IncompleteRead as e:
            data = e.partial
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in data.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "event" in lines and "data" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def messages(*history: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "claude-test", "max_tokens": 100, "messages": list(history)}
    if stream:
        body["stream"] = True
    return body


USER = {"role": "user", "content": "go"}
ASSISTANT = {"role": "assistant", "content": [{"type": "text", "text": "earlier"}]}

WRITE = {
    "text": "Writing.",
    "tools": [{"name": "Write", "input": {"file_path": "{{cwd}}/a.txt", "content": "x"}}],
}


def test_anthropic_stream_events_in_order() -> None:
    with model_server([WRITE]) as server:
        body = messages({"role": "user", "content": "go"})
        body["system"] = [{"type": "text", "text": "Primary working directory: /work/x"}]
        status, headers, data = post(server.url, "/v1/messages?beta=true", body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = sse(data)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0][1]["message"]["model"] == "claude-test"
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "Writing."}
    tool_start = events[4][1]["content_block"]
    assert tool_start["type"] == "tool_use" and tool_start["name"] == "Write"
    partial = "".join(e["delta"]["partial_json"] for n, e in events[5:7])
    assert json.loads(partial) == {"file_path": "/work/x/a.txt", "content": "x"}
    assert events[8][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_plain_json_without_stream() -> None:
    with model_server(["Hello."]) as server:
        status, headers, data = post(server.url, "/v1/messages", messages(USER, stream=False))
    message = json.loads(data)
    assert status == 200 and headers["content-type"] == "application/json"
    assert message["content"] == [{"type": "text", "text": "Hello."}]
    assert message["stop_reason"] == "end_turn" and message["role"] == "assistant"
    assert message["usage"]["input_tokens"] == 100


def test_the_turn_comes_from_the_conversation() -> None:
    with model_server(["first", "second"]) as server:
        _, _, a = post(server.url, "/v1/messages", messages(USER, stream=False))
        _, _, b = post(server.url, "/v1/messages", messages(USER, ASSISTANT, USER, stream=False))
        _, _, again = post(server.url, "/v1/messages", messages(USER, stream=False))
        _, _, past = post(
            server.url,
            "/v1/messages",
            messages(USER, ASSISTANT, USER, ASSISTANT, USER, stream=False),
        )
    texts = [json.loads(x)["content"][0]["text"] for x in (a, b, again, past)]
    assert texts == ["first", "second", "first", "End of script."]
    assert [r["turn"] for r in server.model_requests()] == [0, 1, 0, 2]
    assert server.model_requests()[-1]["exhausted"] is True


def test_exhausted_repeat_last_and_error() -> None:
    history = messages(USER, ASSISTANT, USER, stream=False)
    with model_server({"turns": ["only"], "exhausted": "repeat_last"}) as server:
        _, _, data = post(server.url, "/v1/messages", history)
    assert json.loads(data)["content"][0]["text"] == "only"
    with model_server({"turns": ["only"], "exhausted": "error"}) as server:
        status, _, data = post(server.url, "/v1/messages", history)
    assert status == 400 and "no turn 2" in json.loads(data)["error"]["message"]


def test_error_times_then_content_and_headers() -> None:
    turns = [
        {
            "error": {
                "status": 529,
                "times": 2,
                "headers": {"x-should-retry": "true", "retry-after": "0"},
            },
            "text": "ok",
        }
    ]
    with model_server(turns) as server:
        results = [post(server.url, "/v1/messages", messages(USER, stream=False)) for _ in range(3)]
    (s1, h1, d1), (s2, _, _), (s3, _, d3) = results
    assert (s1, s2, s3) == (529, 529, 200)
    assert json.loads(d1) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "scripted 529 overloaded_error"},
    }
    assert h1["x-should-retry"] == "true" and h1["retry-after"] == "0"
    assert json.loads(d3)["content"][0]["text"] == "ok"


def test_an_error_without_times_never_clears() -> None:
    with model_server(
        [{"error": {"status": 400, "type": "invalid_request_error", "message": "bad"}}]
    ) as server:
        statuses = [post(server.url, "/v1/messages", messages(USER))[0] for _ in range(4)]
    assert statuses == [400] * 4


def test_in_stream_errors() -> None:
    turns = [{"error": {"status": 529, "in_stream": True}}]
    with model_server(turns) as server:
        status, _, data = post(server.url, "/v1/messages", messages(USER))
        status2, _, data2 = post(
            server.url, "/v1/responses", {"model": "m", "input": [], "stream": True}
        )
    assert status == 200 and sse(data) == [
        (
            "error",
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "scripted 529 overloaded_error"},
            },
        )
    ]
    assert status2 == 200
    assert [n for n, _ in sse(data2)] == ["response.created", "response.failed"]
    assert sse(data2)[1][1]["response"]["error"]["code"] == "server_error"


def test_cut_stream_closes_before_message_stop() -> None:
    with model_server([{"cut": {"after": 3, "times": 1}, "text": "whole"}]) as server:
        _, _, cut = post(server.url, "/v1/messages", messages(USER))
        _, _, whole = post(server.url, "/v1/messages", messages(USER))
    assert [n for n, _ in sse(cut)] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]
    assert [n for n, _ in sse(whole)][-1] == "message_stop"


def test_cut_plain_json_is_truncated() -> None:
    with model_server([{"cut": True, "text": "whole"}]) as server:
        status, _, data = post(server.url, "/v1/messages", messages(USER, stream=False))
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(data)


def test_openai_responses_stream() -> None:
    turns = [
        {
            "text": "Patching.",
            "tools": [
                {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
                {"name": "exec_command", "input": {"cmd": "ls {{cwd}}"}, "id": "call_fixed"},
            ],
            "usage": {"input_tokens": 7, "output_tokens": 3},
        }
    ]
    body = {
        "model": "gpt-5.5",
        "stream": True,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<cwd>/r</cwd>"}],
            }
        ],
    }
    with model_server(turns) as server:
        status, headers, data = post(server.url, "/v1/responses", body)
    events = sse(data)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert [n for n, _ in events] == [
        "response.created",
        "response.output_item.done",
        "response.output_item.done",
        "response.output_item.done",
        "response.completed",
    ]
    message, patch, command = (e["item"] for _, e in events[1:4])
    assert message["content"][0]["text"] == "Patching." and message["role"] == "assistant"
    assert patch["type"] == "custom_tool_call" and patch["name"] == "apply_patch"
    assert command["type"] == "function_call" and command["call_id"] == "call_fixed"
    assert json.loads(command["arguments"]) == {"cmd": "ls /r"}
    usage = events[-1][1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (7, 3, 10)


def test_openai_errors_use_its_envelope() -> None:
    with model_server([{"error": {"status": 429}}]) as server:
        status, _, data = post(
            server.url, "/v1/responses", {"model": "m", "input": [], "stream": True}
        )
    assert status == 429
    assert json.loads(data)["error"]["code"] == "rate_limit_exceeded"


def test_sessions_pick_a_script_per_conversation() -> None:
    script = {"sessions": [["attempt one"], ["attempt two"]]}
    with model_server(script) as server:

        def ask(session: str) -> str:
            _, _, d = post(
                server.url,
                "/v1/messages",
                messages(USER, stream=False),
                {"x-claude-code-session-id": session},
            )
            return str(json.loads(d)["content"][0]["text"])

        answers = [ask("a"), ask("b"), ask("a"), ask("c")]
    assert answers == ["attempt one", "attempt two", "attempt one", "attempt two"]
    assert [r["conversation"] for r in server.model_requests()] == [0, 1, 0, 2]


def test_head_and_unknown_paths_and_the_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with model_server(["hi"], log=log) as server:
        host, port = server.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("HEAD", "/")
        assert conn.getresponse().status == 200
        conn.close()
        status, _, _ = post(server.url, "/v2/nothing", {})
        assert status == 404
        post(
            server.url,
            "/v1/messages",
            messages(USER, stream=False),
            {"x-api-key": "secret", **SESSION},
        )
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["method"], e["served"], e["status"]) for e in logged] == [
        ("HEAD", "ok", 200),
        ("POST", "not_found", 404),
        ("POST", "turn", 200),
    ]
    assert logged == server.requests
    last = logged[-1]
    assert last["headers"]["x-api-key"] == "<redacted>" and last["session"] == "s-1"
    assert last["body"]["messages"] == [USER] and [e["seq"] for e in logged] == [1, 2, 3]


def test_delay_holds_the_answer() -> None:
    with model_server([{"delay": 0.4, "text": "late"}]) as server:
        started = time.monotonic()
        status, _, _ = post(server.url, "/v1/messages", messages(USER, stream=False))
    assert status == 200 and time.monotonic() - started >= 0.4


def test_stop_does_not_wait_for_a_long_delay() -> None:
    server_cm = model_server([{"delay": 60, "text": "never"}])
    server = server_cm.__enter__()
    import threading

    t = threading.Thread(
        target=post, args=(server.url, "/v1/messages", messages(USER, stream=False)), daemon=True
    )
    t.start()
    time.sleep(0.3)
    started = time.monotonic()
    server_cm.__exit__(None, None, None)
    # it did not wait the held answer out (how fast it stops: bench/bench_stops.py)
    assert time.monotonic() - started < 60


# -- the console script --------------------------------------------------------------------


def lk_model_server() -> str:
    found = shutil.which("lk-model-server") or shutil.which(
        "lk-model-server", path=os.path.dirname(sys.executable)
    )
    if not found:
        pytest.skip("lk-model-server is not installed (make install)")
    return found


def test_console_script_serves_until_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- text: from the console script\n")
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [
            lk_model_server(),
            str(script),
            "--log",
            str(log),
            "--env",
            "codex",
            "--home",
            str(tmp_path / "c"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["url"] == f"http://127.0.0.1:{ready['port']}" and ready["pid"] == proc.pid
        assert ready["env"]["CODEX_HOME"] == str(tmp_path / "c")
        assert (tmp_path / "c" / "config.toml").is_file()
        _, _, data = post(ready["url"], "/v1/messages", messages(USER, stream=False))
        assert json.loads(data)["content"][0]["text"] == "from the console script"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
    assert code == 0
    assert json.loads(log.read_text().splitlines()[-1])["served"] == "turn"


def test_console_script_bad_script_exit_3(tmp_path: Path) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text("- tools: [{input: {}}]\n")
    result = subprocess.run(
        [lk_model_server(), str(script)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"lk-model-server: error: {script}: $[0].tools[0]: a tool call needs a `name`"
    ]


def test_console_script_check(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"claude": ["a", "b"], "codex": ["c"]}))
    result = subprocess.run(
        [lk_model_server(), str(script), "--check"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "ok": True,
        "turns": {"anthropic": 2, "openai": 1, "chat": 0, "gemini": 0},
    }


def test_console_script_port_in_use_exit_4(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("- hi\n")
    with model_server(["x"]) as server:
        result = subprocess.run(
            [lk_model_server(), str(script), "--port", str(server.port)],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ},
        )
    assert result.returncode == 4 and "cannot listen" in result.stderr


def test_chunked_request_bodies() -> None:
    with model_server(["chunked ok"]) as server:
        host, port = server.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        body = json.dumps(messages(USER, stream=False)).encode()
        conn.request(
            "POST",
            "/v1/messages",
            iter([body[:10], body[10:]]),
            {"Content-Type": "application/json"},
            encode_chunked=True,
        )
        data = conn.getresponse().read()
        conn.close()
    assert json.loads(data)["content"][0]["text"] == "chunked ok"
    assert server.model_requests()[0]["body"]["messages"] == [USER]


def test_serve_forever_in_the_calling_thread_stops() -> None:
    import threading

    from loopkit.testing import ModelServer, from_data

    server = ModelServer(from_data(["x"]))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    time.sleep(0.1)
    assert post(server.url, "/v1/messages", messages(USER, stream=False))[0] == 200
    server.stop()
    t.join(timeout=5)
    assert not t.is_alive()


def test_console_script_reads_the_script_from_stdin() -> None:
    result = subprocess.run(
        [lk_model_server(), "-", "--check"],
        input="- a\n- b\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0 and json.loads(result.stdout)["turns"] == {
        "anthropic": 2,
        "openai": 2,
        "chat": 2,
        "gemini": 2,
    }


def test_openai_plain_json_without_stream() -> None:
    turns = [{"text": "plain", "tools": [{"name": "exec_command", "input": {"cmd": "ls"}}]}]
    with model_server(turns) as server:
        status, headers, data = post(server.url, "/v1/responses", {"model": "m", "input": "hi"})
    response = json.loads(data)
    assert status == 200 and headers["content-type"] == "application/json"
    assert response["status"] == "completed"
    assert [item["type"] for item in response["output"]] == ["message", "function_call"]
    assert response["usage"]["total_tokens"] == 120


def test_wait_for_model_requests() -> None:
    import threading

    with model_server(["a"]) as server:
        assert server.wait_for(1, timeout=0.2) is False
        threading.Timer(
            0.2, post, args=(server.url, "/v1/messages", messages(USER, stream=False))
        ).start()
        assert server.wait_for(1, api="anthropic", timeout=10) is True
        assert server.wait_for(1, api="openai", timeout=0.1) is False


def test_the_scripted_server_fixture(scripted_server: Callable[[Any], ModelServer]) -> None:
    server = scripted_server(["from the fixture"])
    _, _, data = post(server.url, "/v1/messages", messages(USER, stream=False))
    assert json.loads(data)["content"][0]["text"] == "from the fixture"


@pytest.mark.parametrize(
    ("client", "written", "var"),
    [
        ("opencode", ".config/opencode/opencode.json", "XDG_CONFIG_HOME"),
        ("pi", "models.json", "PI_CODING_AGENT_DIR"),
        ("copilot", None, "COPILOT_PROVIDER_BASE_URL"),
    ],
)
def test_console_script_env_for_the_other_clis(
    tmp_path: Path, client: str, written: str | None, var: str
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- hi\n")
    home = tmp_path / "h"
    proc = subprocess.Popen(
        [lk_model_server(), str(script), "--env", client, "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert var in ready["env"]
        if written is None:
            assert ready["env"][var] == ready["url"]
        else:
            assert ready["url"] in (home / written).read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
