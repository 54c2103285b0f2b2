"""The scripted model server: the Anthropic Messages API and the OpenAI Responses API
answered from a script, on 127.0.0.1, with the standard library alone.

    from loopkit.testing import ModelServer, script
    with ModelServer(script.from_data([{"text": "Hello"}])) as server:
        ...  # point ANTHROPIC_BASE_URL (claude) or a codex provider at server.url
        server.requests  # every request, decoded

The turn is chosen from the conversation in the request -- the number of assistant
turns it already holds -- so a client that re-sends a request (a retry, a resume, a
cut stream re-sent without ``stream``) gets the same turn again, and a resumed session
continues the script. Fault counters (``error.times``, ``cut.times``) are kept per API,
conversation and turn for the server's lifetime. A request without ``stream`` gets one
JSON answer (Claude Code re-sends a cut stream that way).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loopkit.testing.script import Cut, Error, Script, ToolCall, Turn

#: Default token counts reported per response (a script turn's ``usage`` overrides them).
DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 20}

#: The text served past the script's last turn (``exhausted: end``).
END_TEXT = "End of script."

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_OPENAI_ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}

#: Item types a Responses API client sends back for what the model said or did.
_MODEL_ITEMS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "web_search_call",
    "tool_search_call",
}
_REDACT = {"authorization", "x-api-key", "api-key"}
_CWD_PATTERNS = (
    re.compile(r"<cwd>([^<\n]+)</cwd>"),
    re.compile(r"Primary working directory: *([^\n]+)"),
    re.compile(r"Working directory: *([^\n]+)"),
)


def assistant_turns(api: str, body: Any) -> int:
    """How many model turns the conversation in a request already holds."""
    if not isinstance(body, dict):
        return 0
    if api == "anthropic":
        messages = body.get("messages")
        if not isinstance(messages, list):
            return 0
        return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    turns, inside = 0, False
    for item in items:
        mine = isinstance(item, dict) and (
            item.get("type") in _MODEL_ITEMS
            or (item.get("role") == "assistant" and item.get("type", "message") == "message")
        )
        if mine and not inside:
            turns += 1
        inside = mine
    return turns


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, dict):
        for key in ("text", "content", "system", "instructions", "input"):
            if key in value:
                yield from _texts(value[key])


def client_cwd(body: Any) -> str | None:
    """The working directory the client announces in its prompt, if any."""
    if not isinstance(body, dict):
        return None
    parts = [body.get("system"), body.get("instructions"), body.get("messages"), body.get("input")]
    for text in _texts(parts):
        for pattern in _CWD_PATTERNS:
            m = pattern.search(text)
            if m:
                return m.group(1).strip()
    return None


def _fill(value: Any, cwd: str | None) -> Any:
    if isinstance(value, str):
        return value.replace("{{cwd}}", cwd or ".")
    if isinstance(value, list):
        return [_fill(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, cwd) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Pick:
    """The turn chosen for a request."""

    session: int  # which of the script's conversations (0 unless it has ``sessions``)
    index: int  # the turn's index: assistant turns already in the conversation
    turn: Turn
    exhausted: bool  # past the end of the script


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class ModelServer:
    """A scripted model API on 127.0.0.1; ``start()`` serves in a background thread."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log: str | Path | None = None,
    ) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[dict[str, Any]] = []
        self._counters: dict[tuple[str, int, int, str], int] = {}
        self._sessions: dict[tuple[str, str], int] = {}
        self._stopping = threading.Event()
        self._serving = threading.Event()
        self._log_path = Path(log) if log is not None else None
        self._log_file = self._log_path.open("a", encoding="utf-8") if self._log_path else None
        self._started = time.monotonic()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def url(self) -> str:
        """The base URL: ``ANTHROPIC_BASE_URL`` as is; a Responses client adds ``/v1``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> ModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="loopkit-model-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until ``stop()`` is called from another."""
        self._serving.set()
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        finally:
            self._serving.clear()

    def stop(self) -> None:
        """Stop serving (waiting answers are released), close the port and the log."""
        self._stopping.set()
        if self._thread is not None or self._serving.is_set():
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the request log -------------------------------------------------------------
    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    def model_requests(self, api: str | None = None) -> list[dict[str, Any]]:
        """The requests that asked for a model turn (optionally of one API)."""
        return [
            r
            for r in self.requests
            if r.get("turn") is not None and (api is None or r.get("api") == api)
        ]

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            entry["seq"] = len(self._requests) + 1
            entry["t"] = round(time.monotonic() - self._started, 3)
            self._requests.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry, separators=(",", ":")) + "\n")
                self._log_file.flush()
            self._arrived.notify_all()

    def wait_for(self, count: int = 1, *, api: str | None = None, timeout: float = 30.0) -> bool:
        """Block until ``count`` model requests (of ``api``) have arrived; False on timeout."""

        def enough() -> bool:
            return (
                sum(
                    1
                    for r in self._requests
                    if r.get("turn") is not None and (api is None or r.get("api") == api)
                )
                >= count
            )

        with self._arrived:
            return self._arrived.wait_for(enough, timeout=timeout)

    # -- the script ------------------------------------------------------------------
    def session_index(self, api: str, session: str | None) -> int:
        """Which of the script's conversations a client session is (0 without sessions)."""
        if not self.script.more or not session:
            return 0
        with self._lock:
            key = (api, session)
            if key not in self._sessions:
                self._sessions[key] = sum(1 for a, _ in self._sessions if a == api)
            return self._sessions[key]

    def pick(self, api: str, body: Any, *, session: str | None = None) -> Pick:
        """The turn that answers a request."""
        conversation = self.session_index(api, session)
        turns = self.script.turns(api, conversation)
        index = assistant_turns(api, body)
        if index < len(turns):
            return Pick(conversation, index, turns[index], exhausted=False)
        if self.script.exhausted == "repeat_last" and turns:
            return Pick(conversation, index, turns[-1], exhausted=True)
        if self.script.exhausted == "error":
            error = Error(status=400, message=f"the model script has no turn {index + 1}")
            return Pick(conversation, index, Turn(error=error), exhausted=True)
        return Pick(conversation, index, Turn(text=END_TEXT), exhausted=True)

    def take(self, api: str, pick: Pick, what: str, times: int | None) -> bool:
        """Count one fault of a turn; False once it has been served ``times`` times."""
        with self._lock:
            key = (api, pick.session, pick.index, what)
            n = self._counters.get(key, 0)
            if times is not None and n >= times:
                return False
            self._counters[key] = n + 1
            return True

    def wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        model = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    model: ModelServer
    server_version = "loopkit-model-server"
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # the JSON log is the log
        pass

    # -- plumbing --------------------------------------------------------------------
    def _entry(self, body: Any = None) -> dict[str, Any]:
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _REDACT else v)
            for k, v in self.headers.items()
        }
        session = (
            headers.get("x-claude-code-session-id")
            or headers.get("session-id")
            or headers.get("session_id")
        )
        return {
            "method": self.command,
            "path": self.path,
            "session": session,
            "headers": headers,
            "body": body,
        }

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_sse(self, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", _new_id("req"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _send_truncated(self, payload: Any) -> None:
        """A JSON answer cut in half: the promised length, half the bytes, then a close."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._cut_now()

    def _cut_now(self) -> None:
        """Close the connection abruptly, mid-response."""
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _read_body(self) -> Any:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raw = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            import gzip

            raw = gzip.decompress(raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    # -- verbs -----------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.model.record({**self._entry(), "served": "ok", "status": 200})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.model.record({**self._entry(), "served": "not_found", "status": 404})
        self._send_json(
            404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}}
        )

    def do_POST(self) -> None:
        body = self._read_body()
        path = urlsplit(self.path).path.rstrip("/")
        entry = self._entry(body)
        if path.endswith("/messages/count_tokens"):
            entry.update(api="anthropic", served="count_tokens", status=200)
            self.model.record(entry)
            self._send_json(200, {"input_tokens": DEFAULT_USAGE["input_tokens"]})
            return
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "openai"
        else:
            entry.update(served="not_found", status=404)
            self.model.record(entry)
            self._send_json(
                404, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
            )
            return
        stream = bool(isinstance(body, dict) and body.get("stream"))
        pick = self.model.pick(api, body, session=entry["session"])
        turn = pick.turn
        entry.update(
            api=api,
            conversation=pick.session,
            turn=pick.index,
            stream=stream,
            exhausted=pick.exhausted,
        )
        if turn.delay:
            self.model.wait(turn.delay)
        if turn.error is not None and self.model.take(api, pick, "error", turn.error.times):
            status = 200 if turn.error.in_stream else turn.error.status
            entry.update(served="error", status=status, error_status=turn.error.status)
            self.model.record(entry)
            model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
            try:
                self._send_error(api, turn.error, model=str(model))
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        cut = turn.cut if turn.cut and self.model.take(api, pick, "cut", turn.cut.times) else None
        served = "cut" if cut else ("exhausted" if pick.exhausted else "turn")
        entry.update(served=served, status=200)
        self.model.record(entry)
        cwd = client_cwd(body)
        model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        try:
            if api == "anthropic":
                self._anthropic(turn, model=str(model), cwd=cwd, stream=stream, cut=cut)
            else:
                self._openai(turn, model=str(model), cwd=cwd, stream=stream, cut=cut)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- errors ----------------------------------------------------------------------
    def _send_error(self, api: str, error: Error, *, model: str = "scripted") -> None:
        payload = error.body if error.body is not None else _error_payload(api, error)
        if not error.in_stream:
            self._send_json(error.status, payload, dict(error.headers))
            return
        self._start_sse(dict(error.headers))
        if api == "anthropic":
            self._event("error", payload)
            return
        base = {"id": _new_id("resp"), "object": "response", "model": model}
        self._event("response.created", {"type": "response.created", "response": base})
        detail = payload.get("error", payload) if isinstance(payload, dict) else payload
        self._event(
            "response.failed",
            {
                "type": "response.failed",
                "response": {**base, "status": "failed", "error": detail},
            },
        )

    # -- Anthropic Messages API --------------------------------------------------------
    def _anthropic(
        self, turn: Turn, *, model: str, cwd: str | None, stream: bool, cut: Cut | None
    ) -> None:
        blocks: list[dict[str, Any]] = []
        if turn.text is not None:
            blocks.append({"type": "text", "text": _fill(turn.text, cwd)})
        for call in turn.tools:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id or _new_id("toolu"),
                    "name": call.name,
                    "input": _fill(call.input, cwd)
                    if isinstance(call.input, dict)
                    else {"input": call.input},
                }
            )
        stop = turn.stop_reason or ("tool_use" if turn.tools else "end_turn")
        usage = {**DEFAULT_USAGE, **(turn.usage or {})}
        message = {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not stream:
            if cut is not None:
                self._send_truncated(message)
            else:
                self._send_json(200, message)
            return
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            )
        ]
        for i, block in enumerate(blocks):
            start: dict[str, Any]
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": block["text"]}]
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                raw = json.dumps(block["input"])
                half = len(raw) // 2
                deltas = [
                    {"type": "input_json_delta", "partial_json": raw[:half]},
                    {"type": "input_json_delta", "partial_json": raw[half:]},
                ]
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start},
                )
            )
            for delta in deltas:
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": delta},
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 0)},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        self._stream(events, cut, default_cut=2)

    def _stream(
        self, events: list[tuple[str, dict[str, Any]]], cut: Cut | None, *, default_cut: int
    ) -> None:
        self._start_sse()
        after = (default_cut if cut.after is None else cut.after) if cut is not None else 0
        for n, (name, data) in enumerate(events):
            if cut is not None and n >= min(after, len(events) - 1):
                self._cut_now()
                return
            self._event(name, data)

    # -- OpenAI Responses API ------------------------------------------------------------
    def _openai(
        self, turn: Turn, *, model: str, cwd: str | None, stream: bool, cut: Cut | None
    ) -> None:
        response_id = _new_id("resp")
        items: list[dict[str, Any]] = []
        if turn.text is not None:
            items.append(
                {
                    "type": "message",
                    "id": _new_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": _fill(turn.text, cwd), "annotations": []}
                    ],
                }
            )
        for call in turn.tools:
            items.append(_openai_call(call, cwd))
        usage = {**DEFAULT_USAGE, **(turn.usage or {})}
        inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        full_usage = {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
            "total_tokens": inp + out,
        }
        base = {"id": response_id, "object": "response", "model": model}
        if not stream:
            response = {**base, "status": "completed", "output": items, "usage": full_usage}
            if cut is not None:
                self._send_truncated(response)
            else:
                self._send_json(200, response)
            return
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "response.created",
                {"type": "response.created", "response": {**base, "status": "in_progress"}},
            )
        ]
        for i, item in enumerate(items):
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": i, "item": item},
                )
            )
        events.append(
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {
                        **base,
                        "status": "completed",
                        "output": items,
                        "usage": full_usage,
                    },
                },
            )
        )
        self._stream(events, cut, default_cut=1)


def _error_payload(api: str, error: Error) -> dict[str, Any]:
    """The API's usual error envelope for a scripted error."""
    if api == "anthropic":
        etype = error.type or _ANTHROPIC_ERROR_TYPES.get(
            error.status, "api_error" if error.status >= 500 else "invalid_request_error"
        )
        return {
            "type": "error",
            "error": {
                "type": etype,
                "message": error.message or f"scripted {error.status} {etype}",
            },
        }
    etype = error.type or _OPENAI_ERROR_TYPES.get(
        error.status, "server_error" if error.status >= 500 else "invalid_request_error"
    )
    return {
        "error": {
            "type": etype,
            "code": error.code or _OPENAI_ERROR_CODES.get(error.status, etype),
            "message": error.message or f"scripted {error.status} {etype}",
            "param": None,
        }
    }


def _openai_call(call: ToolCall, cwd: str | None) -> dict[str, Any]:
    call_id = call.id or _new_id("call")
    if isinstance(call.input, str):  # a freeform tool such as apply_patch
        return {
            "type": "custom_tool_call",
            "id": _new_id("ctc"),
            "call_id": call_id,
            "name": call.name,
            "input": _fill(call.input, cwd),
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": _new_id("fc"),
        "call_id": call_id,
        "name": call.name,
        "arguments": json.dumps(_fill(call.input, cwd)),
        "status": "completed",
    }
