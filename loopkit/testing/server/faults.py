"""The faults a script's turn injects into its answer: an API error and a cut connection.

``error`` sends the API's error envelope (or the script's own ``body``) with the scripted
status -- or, with ``in_stream``, a 200 stream that carries the error as an event. ``cut``
breaks the answer: a JSON answer stops halfway through its promised length, a stream is
closed after ``after`` events (each wire format has its default point). Whether a fault is
served again is counted per API, conversation and turn (``ModelServer.take``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Cut, Error

if TYPE_CHECKING:
    from loopkit.testing.server.http import Handler
    from loopkit.testing.server.wire import Wire


def send_error(reply: Handler, wire: Wire, error: Error, *, model: str) -> None:
    payload = error.body if error.body is not None else wire.error_body(error)
    if not error.in_stream:
        reply.send_json(error.status, payload, dict(error.headers))
        return
    reply.start_sse(dict(error.headers))
    for name, data in wire.error_events(payload, model=model):
        reply.send_event(name, data)


def send_truncated(reply: Handler, payload: Any) -> None:
    """A JSON answer cut in half: the promised length, half the bytes, then a close."""
    data = json.dumps(payload).encode()
    reply.send_response(200)
    reply.send_header("Content-Type", "application/json")
    reply.send_header("Content-Length", str(len(data)))
    reply.end_headers()
    reply.wfile.write(data[: len(data) // 2])
    reply.cut_now()


def events_before_cut(cut: Cut | None, *, default: int, total: int) -> int | None:
    """How many of a stream's ``total`` events are sent before the cut (never all of
    them); None when the stream is not cut."""
    if cut is None:
        return None
    return min(default if cut.after is None else cut.after, total - 1)
