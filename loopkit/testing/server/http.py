"""The HTTP side of the model server: reading requests, routing them, sending answers.

``POST .../messages`` is the Anthropic Messages API, ``POST .../responses`` the OpenAI
Responses API, ``POST .../chat/completions`` the OpenAI Chat Completions API,
``POST .../models/M:generateContent`` and ``...:streamGenerateContent`` the Gemini API,
``POST .../messages/count_tokens`` and ``...:countTokens`` a fixed count; anything else is
a 404. Every request is recorded (credentials redacted) before it is answered.
"""

from __future__ import annotations

import gzip
import json
import socket
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from loopkit.testing.server import anthropic, chat, faults, gemini, openai
from loopkit.testing.server.wire import DEFAULT_USAGE, Event, Wire, client_cwd, new_id

if TYPE_CHECKING:
    from loopkit.sections import JSONObject
    from loopkit.testing.script import Error
    from loopkit.testing.server import ModelServer

_REDACT = {"authorization", "x-api-key", "api-key", "x-goog-api-key"}


def handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Bound(Handler):
        model = server

    return Bound


class Handler(BaseHTTPRequestHandler):
    model: ModelServer
    server_version = "loopkit-model-server"
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # the JSON log is the log
        pass

    # -- plumbing --------------------------------------------------------------------
    def entry(self, body: Any = None) -> JSONObject:
        """The request as the log records it."""
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _REDACT else v)
            for k, v in self.headers.items()
        }
        session = (
            headers.get("x-claude-code-session-id")
            or headers.get("session-id")
            or headers.get("session_id")
            or headers.get("x-session-id")
        )
        return {
            "method": self.command,
            "path": self.path,
            "session": session,
            "headers": headers,
            "body": body,
        }

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", new_id("req"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def start_sse(self, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", new_id("req"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def send_event(self, name: str, data: Any) -> None:
        """One event: ``event:`` only when it has a name; string data sent as it is."""
        text = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        self.wfile.write(f"{head}data: {text}\n\n".encode())
        self.wfile.flush()

    def send_stream(self, events: list[Event], *, cut_after: int | None = None) -> None:
        """The events as a stream; with ``cut_after`` the connection closes before that event."""
        self.start_sse()
        for n, (name, data) in enumerate(events):
            if cut_after is not None and n >= cut_after:
                self.cut_now()
                return
            self.send_event(name, data)

    def send_fault(self, wire: Wire, error: Error, *, model: str) -> None:
        """A scripted API error: its status and envelope, or a 200 stream carrying it."""
        payload = error.body if error.body is not None else wire.error_body(error)
        if not error.in_stream:
            self.send_json(error.status, payload, dict(error.headers))
            return
        self.start_sse(dict(error.headers))
        for name, data in wire.error_events(payload, model=model):
            self.send_event(name, data)

    def send_truncated(self, payload: Any) -> None:
        """A JSON answer cut in half: the promised length, half the bytes, then a close."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.cut_now()

    def cut_now(self) -> None:
        """Close the connection abruptly, mid-response."""
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def read_body(self) -> Any:
        """The request body: JSON decoded, else text; chunked and gzip bodies too."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raw = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
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
        self.model.record({**self.entry(), "served": "ok", "status": 200})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.model.record({**self.entry(), "served": "not_found", "status": 404})
        self.send_json(
            404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}}
        )

    def do_POST(self) -> None:
        body = self.read_body()
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        entry = self.entry(body)
        if path.endswith("/messages/count_tokens") or path.endswith(":countTokens"):
            api = "anthropic" if path.endswith("/count_tokens") else "gemini"
            entry.update(api=api, served="count_tokens", status=200)
            self.model.record(entry)
            count = DEFAULT_USAGE["input_tokens"]
            self.send_json(200, {"input_tokens": count, "totalTokens": count})
            return
        wire: Wire
        stream = bool(isinstance(body, dict) and body.get("stream"))
        sse = True
        model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        if path.endswith("/messages"):
            api, wire = "anthropic", anthropic
        elif path.endswith("/responses"):
            api, wire = "openai", openai
        elif path.endswith("/chat/completions"):
            api, wire = "chat", chat
        elif path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
            api, wire = "gemini", gemini
            stream = path.endswith(":streamGenerateContent")
            sse = "sse" in parse_qs(url.query).get("alt", [])
            model = gemini.model_of(path) or "scripted"
        else:
            entry.update(served="not_found", status=404)
            self.model.record(entry)
            self.send_json(
                404, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
            )
            return
        if isinstance(body, dict) and not wire.wants_turn(body):
            entry.update(api=api, served="side", status=200, stream=stream)
            self.model.record(entry)
            self.send_answer(wire, wire.side_answer(body, model=str(model)), stream, sse)
            return
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
            try:
                self.send_fault(wire, turn.error, model=str(model))
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        cut = turn.cut if turn.cut and self.model.take(api, pick, "cut", turn.cut.times) else None
        served = "cut" if cut else ("exhausted" if pick.exhausted else "turn")
        entry.update(served=served, status=200)
        self.model.record(entry)
        answer = wire.answer(turn, model=str(model), cwd=client_cwd(body))
        if cut is not None and not (stream and sse):
            try:
                payload = answer if not stream else [d for _, d in wire.events(answer)]
                self.send_truncated(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        cut_after = None
        if cut is not None:
            total = len(wire.events(answer))
            cut_after = faults.events_before_cut(cut, default=wire.DEFAULT_CUT, total=total)
        self.send_answer(wire, answer, stream, sse, cut_after=cut_after)

    def send_answer(
        self,
        wire: Wire,
        answer: JSONObject,
        stream: bool,
        sse: bool,
        *,
        cut_after: int | None = None,
    ) -> None:
        """The answer as one JSON document, as a stream, or (a Gemini stream without
        ``alt=sse``) as one JSON array of the stream's pieces."""
        try:
            if not stream:
                self.send_json(200, answer)
            elif not sse:
                self.send_json(200, [d for _, d in wire.events(answer) if not isinstance(d, str)])
            else:
                self.send_stream(wire.events(answer), cut_after=cut_after)
        except (BrokenPipeError, ConnectionResetError):
            pass
