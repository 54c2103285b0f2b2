"""The Gemini API (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``), as Gemini CLI speaks it.

A turn becomes one ``GenerateContentResponse``: a candidate whose ``content`` (role
``model``) holds a ``text`` part and a ``functionCall`` part per tool call (``args`` an
object; a string input becomes ``{"input": ...}``), with ``finishReason`` and
``usageMetadata``. Streamed (``alt=sse``), it is the same response in pieces, each a
whole response without an event name: the text in two halves, then the function calls
with the finish reason and the usage. Without ``alt=sse`` a streamed answer is one JSON
array of those pieces.

A request without tools is a side request (Gemini CLI's model router asks a classifier
before each turn, with a ``responseJsonSchema``): it is answered, with JSON that fits the
schema when one is asked for, without taking a turn of the script.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Error, ToolCall, Turn
from loopkit.testing.server.wire import DEFAULT_USAGE, Event, count_turns, fill, new_id, side_text

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: A cut without ``after`` comes after the first piece of the stream.
DEFAULT_CUT = 1

#: google.rpc status names of the HTTP statuses.
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_FINISH = {"end_turn": "STOP", "tool_use": "STOP", "max_tokens": "MAX_TOKENS"}


def model_of(path: str) -> str | None:
    """The model named in a request path (``.../models/M:generateContent``)."""
    tail = path.split("/models/", 1)
    if len(tail) != 2:
        return None
    return tail[1].split(":", 1)[0] or None


def wants_turn(body: Mapping[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, dict) and t.get("functionDeclarations") for t in tools
    )


def assistant_turns(body: Mapping[str, Any], *, said: Iterable[str] = ()) -> int:
    """The ``model`` turns in ``contents`` that are the script's: each with a function
    call, and those with text alone whose text the script says (``said``)."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        return 0
    turns: list[tuple[str, bool]] = []
    for c in contents:
        if not isinstance(c, dict) or c.get("role") != "model":
            continue
        parts = [p for p in c.get("parts") or () if isinstance(p, dict)]
        text = "".join(str(p.get("text", "")) for p in parts if not p.get("thought"))
        turns.append((text, any("functionCall" in p for p in parts)))
    return count_turns(turns, said)


def answer(turn: Turn, *, model: str, cwd: str | None) -> JSONObject:
    """The ``GenerateContentResponse`` for a turn."""
    parts: list[JSONObject] = []
    if turn.text is not None:
        parts.append({"text": fill(turn.text, cwd)})
    parts += [_call(call, cwd) for call in turn.tools]
    finish = _FINISH.get(turn.stop_reason or "", turn.stop_reason or "STOP")
    return _response(parts, model=model, finish=finish, usage=_usage(turn.usage))


def side_answer(body: Mapping[str, Any], *, model: str) -> JSONObject:
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    text = side_text(config.get("responseMimeType") == "application/json", schema)
    return _response([{"text": text}], model=model, finish="STOP", usage=_usage(None))


def events(response: JSONObject) -> list[Event]:
    """The response in pieces: the text halves, then the calls with finish and usage."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    texts = [p for p in parts if "text" in p]
    calls = [p for p in parts if "text" not in p]
    pieces: list[list[JSONObject]] = []
    for p in texts:
        half = len(p["text"]) // 2
        pieces += [[{"text": p["text"][:half]}], [{"text": p["text"][half:]}]]
    if calls or not pieces:
        pieces.append(calls)
    out: list[Event] = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        data: JSONObject = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": piece},
                    "index": 0,
                    **({"finishReason": candidate["finishReason"]} if last else {}),
                }
            ],
            "modelVersion": response["modelVersion"],
            "responseId": response["responseId"],
        }
        if last:
            data["usageMetadata"] = response["usageMetadata"]
        out.append(("", data))
    return out


def error_body(error: Error) -> JSONObject:
    status = error.type or _STATUS.get(error.status, "INTERNAL" if error.status >= 500 else "")
    detail: JSONObject = {
        "code": error.status,
        "message": error.message or f"scripted {error.status} {status or 'error'}",
        "status": status or "FAILED_PRECONDITION",
    }
    delay = {k.lower(): v for k, v in error.headers.items()}.get("retry-after")
    if delay is not None:
        detail["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay}s"}
        ]
    if error.code is not None:
        detail.setdefault("details", []).append(
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": error.code}
        )
    return {"error": detail}


def error_events(payload: Any, *, model: str) -> list[Event]:
    """The error envelope as one piece of the stream."""
    return [("", payload)]


def _response(parts: list[JSONObject], *, model: str, finish: str, usage: JSONObject) -> JSONObject:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": new_id("resp"),
    }


def _usage(scripted: Mapping[str, int] | None) -> JSONObject:
    usage = {**DEFAULT_USAGE, **(scripted or {})}
    inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    meta = {"promptTokenCount": inp, "candidatesTokenCount": out, "totalTokenCount": inp + out}
    if usage.get("cached_tokens"):
        meta["cachedContentTokenCount"] = usage["cached_tokens"]
    if usage.get("reasoning_tokens"):
        meta["thoughtsTokenCount"] = usage["reasoning_tokens"]
    return meta


def _call(call: ToolCall, cwd: str | None) -> JSONObject:
    value = fill(call.input, cwd)
    args = value if isinstance(value, dict) else {"input": value}
    return {"functionCall": {"name": call.name, "args": args, "id": call.id or new_id("fc")}}
