"""The Anthropic Messages API (``POST /v1/messages``), as Claude Code speaks it.

A turn becomes one assistant message: a ``text`` block, then a ``tool_use`` block per
tool call. Streamed, it is ``message_start``, a start, delta(s) and stop per block,
``message_delta`` and ``message_stop``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Error, Turn
from loopkit.testing.server import wire
from loopkit.testing.server.wire import DEFAULT_USAGE, SIDE_TEXT, Event, fill, new_id

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: A cut without ``after`` comes after ``message_start`` and the first block's start.
DEFAULT_CUT = 2

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


wants_turn = wire.every_request_a_turn


def side_answer(body: Mapping[str, Any], *, model: str) -> JSONObject:  # pragma: no cover
    return answer(Turn(text=SIDE_TEXT), model=model, cwd=None)


def assistant_turns(body: Mapping[str, Any], *, said: Iterable[str] = ()) -> int:
    """The assistant messages in the request (Claude Code seeds none: ``said`` is not
    needed)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def answer(turn: Turn, *, model: str, cwd: str | None) -> JSONObject:
    """The assistant message for a turn."""
    blocks: list[JSONObject] = []
    if turn.text is not None:
        blocks.append({"type": "text", "text": fill(turn.text, cwd)})
    for call in turn.tools:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or new_id("toolu"),
                "name": call.name,
                "input": fill(call.input, cwd)
                if isinstance(call.input, dict)
                else {"input": call.input},
            }
        )
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": turn.stop_reason or ("tool_use" if turn.tools else "end_turn"),
        "stop_sequence": None,
        "usage": {**DEFAULT_USAGE, **(turn.usage or {})},
    }


def events(message: JSONObject) -> list[Event]:
    """The message as a stream; a tool call's input arrives in two halves."""
    usage = message["usage"]
    out: list[Event] = [
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
    for i, block in enumerate(message["content"]):
        start: JSONObject
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
        out.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        for delta in deltas:
            out.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
            )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
        )
    )
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def error_body(error: Error) -> JSONObject:
    etype = error.type or _ERROR_TYPES.get(
        error.status, "api_error" if error.status >= 500 else "invalid_request_error"
    )
    return {
        "type": "error",
        "error": {
            "type": etype,
            "message": error.message or f"scripted {error.status} {etype}",
        },
    }


def error_events(payload: Any, *, model: str) -> list[Event]:
    """One ``error`` event."""
    return [("error", payload)]
