"""The OpenAI Chat Completions API (``POST /v1/chat/completions``), as Qwen Code speaks it
(and the many CLIs that talk to an "OpenAI-compatible" endpoint).

A turn becomes one ``chat.completion``: an assistant message with ``content`` and one
``tool_calls`` entry per tool call (``arguments`` a JSON string; a string input is sent
as it is). Streamed, it is ``chat.completion.chunk`` s without event names: the role,
the text in two halves, each tool call's id and name then its arguments in two halves,
the ``finish_reason``, a usage chunk with no choices, and ``data: [DONE]``.

A request without tools is a side request (a title, a summary, a classifier): it is
answered without taking a turn of the script.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Error, ToolCall, Turn
from loopkit.testing.server import openai
from loopkit.testing.server.wire import DEFAULT_USAGE, Event, count_turns, fill, new_id, side_text

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: A cut without ``after`` comes after the first chunk (the role).
DEFAULT_CUT = 1

_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def wants_turn(body: Mapping[str, Any]) -> bool:
    """A request that offers tools asks for the script's next turn; one without is a
    side request."""
    return bool(body.get("tools"))


def assistant_turns(body: Mapping[str, Any], *, said: Iterable[str] = ()) -> int:
    """The assistant messages in the request that are the script's: each with tool calls,
    and those with text alone whose text the script says (``said``)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return count_turns(
        (
            (_text(m.get("content")), bool(m.get("tool_calls")))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant"
        ),
        said,
    )


def answer(turn: Turn, *, model: str, cwd: str | None) -> JSONObject:
    """The ``chat.completion`` for a turn."""
    message: JSONObject = {
        "role": "assistant",
        "content": fill(turn.text, cwd) if turn.text is not None else None,
    }
    if turn.tools:
        message["tool_calls"] = [_call(call, cwd) for call in turn.tools]
    return _completion(
        message,
        model=model,
        finish=turn.stop_reason or ("tool_calls" if turn.tools else "stop"),
        usage=_usage(turn.usage),
    )


def side_answer(body: Mapping[str, Any], *, model: str) -> JSONObject:
    """A side request's answer: JSON that fits its ``response_format`` when it asks for
    JSON, else a short text."""
    fmt = body.get("response_format")
    fmt = fmt if isinstance(fmt, dict) else {}
    schema = fmt.get("json_schema")
    text = side_text(
        fmt.get("type") in ("json_object", "json_schema"),
        schema.get("schema") if isinstance(schema, dict) else None,
    )
    return _completion(
        {"role": "assistant", "content": text}, model=model, finish="stop", usage=_usage(None)
    )


def events(completion: JSONObject) -> list[Event]:
    """The completion as chunks: role, text halves, tool calls, finish, usage, [DONE]."""
    message = completion["choices"][0]["message"]

    def chunk(delta: JSONObject, finish: str | None = None) -> Event:
        return (
            "",
            {
                "id": completion["id"],
                "object": "chat.completion.chunk",
                "created": completion["created"],
                "model": completion["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content")
    if text:
        half = len(text) // 2
        out += [chunk({"content": text[:half]}), chunk({"content": text[half:]})]
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call["function"]
        head = {"index": i, "id": call["id"], "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": fn["name"]}}]}))
        raw = fn["arguments"]
        half = len(raw) // 2
        for part in (raw[:half], raw[half:]):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    out.append(chunk({}, completion["choices"][0]["finish_reason"]))
    out.append(
        (
            "",
            {
                "id": completion["id"],
                "object": "chat.completion.chunk",
                "created": completion["created"],
                "model": completion["model"],
                "choices": [],
                "usage": completion["usage"],
            },
        )
    )
    out.append(("", "[DONE]"))
    return out


def error_body(error: Error) -> JSONObject:
    etype = error.type or openai.ERROR_TYPES.get(
        error.status, "server_error" if error.status >= 500 else "invalid_request_error"
    )
    return {
        "error": {
            "message": error.message or f"scripted {error.status} {etype}",
            "type": etype,
            "param": None,
            "code": error.code or _ERROR_CODES.get(error.status, etype),
        }
    }


def error_events(payload: Any, *, model: str) -> list[Event]:
    """The error as one chunk of the stream (how OpenAI-compatible servers report a
    failure after the 200), then ``[DONE]``."""
    return [("", payload), ("", "[DONE]")]


def _completion(message: JSONObject, *, model: str, finish: str, usage: JSONObject) -> JSONObject:
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def _usage(scripted: Mapping[str, int] | None) -> JSONObject:
    usage = {**DEFAULT_USAGE, **(scripted or {})}
    inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    return {
        "prompt_tokens": inp,
        "completion_tokens": out,
        "total_tokens": inp + out,
        "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
        "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
    }


def _call(call: ToolCall, cwd: str | None) -> JSONObject:
    value = fill(call.input, cwd)
    return {
        "id": call.id or new_id("call"),
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": value if isinstance(value, str) else json.dumps(value),
        },
    }


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""
