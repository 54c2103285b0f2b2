"""The OpenAI Responses API (``POST /v1/responses``), as codex speaks it.

A turn becomes one response: a ``message`` item for the text, then a ``function_call``
item per tool call (a ``custom_tool_call`` when the input is a string, such as
``apply_patch``). Streamed, it is ``response.created``, one ``response.output_item.done``
per item and ``response.completed``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Error, ToolCall, Turn
from loopkit.testing.server import wire
from loopkit.testing.server.wire import DEFAULT_USAGE, SIDE_TEXT, Event, fill, new_id

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: A cut without ``after`` comes right after ``response.created``.
DEFAULT_CUT = 1

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}

#: Item types a Responses API client sends back for what the model said or did.
_MODEL_ITEMS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "web_search_call",
    "tool_search_call",
}


wants_turn = wire.every_request_a_turn


def side_answer(body: Mapping[str, Any], *, model: str) -> JSONObject:  # pragma: no cover
    return answer(Turn(text=SIDE_TEXT), model=model, cwd=None)


def assistant_turns(body: Mapping[str, Any], *, said: Iterable[str] = ()) -> int:
    """The runs of model items in the request's input (one turn may be several items;
    codex seeds none: ``said`` is not needed)."""
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


def answer(turn: Turn, *, model: str, cwd: str | None) -> JSONObject:
    """The completed response for a turn."""
    response_id = new_id("resp")
    items: list[JSONObject] = []
    if turn.text is not None:
        items.append(
            {
                "type": "message",
                "id": new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": fill(turn.text, cwd), "annotations": []}
                ],
            }
        )
    for call in turn.tools:
        items.append(_call(call, cwd))
    usage = {**DEFAULT_USAGE, **(turn.usage or {})}
    inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    return {
        "id": response_id,
        "object": "response",
        "model": model,
        "status": "completed",
        "output": items,
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
            "total_tokens": inp + out,
        },
    }


def events(response: JSONObject) -> list[Event]:
    """The response as a stream: created, each item done, completed."""
    base = {"id": response["id"], "object": response["object"], "model": response["model"]}
    out: list[Event] = [
        (
            "response.created",
            {"type": "response.created", "response": {**base, "status": "in_progress"}},
        )
    ]
    for i, item in enumerate(response["output"]):
        out.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": i, "item": item},
            )
        )
    out.append(("response.completed", {"type": "response.completed", "response": response}))
    return out


def error_body(error: Error) -> JSONObject:
    etype = error.type or ERROR_TYPES.get(
        error.status, "server_error" if error.status >= 500 else "invalid_request_error"
    )
    return {
        "error": {
            "type": etype,
            "code": error.code or _ERROR_CODES.get(error.status, etype),
            "message": error.message or f"scripted {error.status} {etype}",
            "param": None,
        }
    }


def error_events(payload: Any, *, model: str) -> list[Event]:
    """``response.created``, then ``response.failed`` carrying the error."""
    base = {"id": new_id("resp"), "object": "response", "model": model}
    detail = payload.get("error", payload) if isinstance(payload, dict) else payload
    return [
        ("response.created", {"type": "response.created", "response": base}),
        (
            "response.failed",
            {"type": "response.failed", "response": {**base, "status": "failed", "error": detail}},
        ),
    ]


def _call(call: ToolCall, cwd: str | None) -> JSONObject:
    call_id = call.id or new_id("call")
    if isinstance(call.input, str):  # a freeform tool such as apply_patch
        return {
            "type": "custom_tool_call",
            "id": new_id("ctc"),
            "call_id": call_id,
            "name": call.name,
            "input": fill(call.input, cwd),
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": new_id("fc"),
        "call_id": call_id,
        "name": call.name,
        "arguments": json.dumps(fill(call.input, cwd)),
        "status": "completed",
    }
