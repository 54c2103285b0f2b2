"""What a wire format is to the server, and what the formats share.

A wire format (``anthropic``, ``openai``, ``chat``, ``gemini``) is a module that turns a
script's turn into that API's answer and says how many model turns a request's
conversation already holds. It knows its JSON shapes and nothing of HTTP:
:mod:`loopkit.testing.server.http` sends what it builds, and
:mod:`loopkit.testing.server.faults` breaks it when the script says so.

An event is ``(name, data)``; an empty name sends the data alone (Chat Completions and
Gemini name no events), and data that is a string is sent as it is (``[DONE]``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from loopkit.testing.script import Error, Turn

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: Default token counts reported per response (a script turn's ``usage`` overrides them).
DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 20}
#: What a side request (one that takes no turn of the script) is answered, in every dialect.
SIDE_TEXT = "Scripted session"

#: One server-sent event: its name ("" for none) and its data (a string is sent raw).
Event = tuple[str, Any]

#: How the CLIs announce their working directory, in the order they are tried.
_CWD_PATTERNS = (
    re.compile(r"<cwd>([^<\n]+)</cwd>"),  # codex
    re.compile(r"Primary working directory: *([^\n]+)"),  # claude
    re.compile(r"Working directory: *([^\n]+)"),
    re.compile(r"I'm currently working in the directory: *([^\n]+)"),  # qwen
    re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- *([^\n]+)"),  # gemini
    re.compile(r"current working directory(?: is)?: *([^\n]+)", re.I),
)


class Wire(Protocol):
    """The interface each wire-format module implements."""

    #: Events a cut stream sends when the script's ``cut`` names no ``after``.
    DEFAULT_CUT: int

    def wants_turn(self, body: Mapping[str, Any]) -> bool:
        """Whether the request asks for the script's next turn; False for a side request
        (a title, a summary, a classifier), answered by ``side_answer`` instead."""
        ...

    def assistant_turns(self, body: Mapping[str, Any], *, said: Iterable[str] = ()) -> int:
        """How many model turns the conversation in a request already holds (``said``:
        the texts the script answers with, to tell the script's turns from a client's)."""
        ...

    def side_answer(self, body: Mapping[str, Any], *, model: str) -> JSONObject:
        """The whole answer to a side request."""
        ...

    def answer(self, turn: Turn, *, model: str, cwd: str | None) -> JSONObject:
        """The whole answer to a request that does not stream."""
        ...

    def events(self, answer: JSONObject) -> list[Event]:
        """The same answer as the events of a stream."""
        ...

    def error_body(self, error: Error) -> JSONObject:
        """The API's usual error envelope for a scripted error."""
        ...

    def error_events(self, payload: Any, *, model: str) -> list[Event]:
        """An error sent inside a stream that began with a 200."""
        ...


def every_request_a_turn(body: Mapping[str, Any]) -> bool:
    """``wants_turn`` of an API whose clients send no side requests that need telling
    apart (see docs/model-server.md): every request takes a turn."""
    return True


def side_text(asks_json: bool, schema: Any) -> str:
    """What a side request is answered: JSON that fits ``schema`` (``{}`` without one)
    when it asks for JSON, else ``SIDE_TEXT``."""
    if not asks_json:
        return SIDE_TEXT
    return json.dumps(json_for(schema) if schema is not None else {})


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, dict):
        for key in ("text", "content", "system", "instructions", "input", "parts"):
            if key in value:
                yield from _texts(value[key])


def client_cwd(body: Any) -> str | None:
    """The working directory the client announces in its prompt, if any."""
    if not isinstance(body, dict):
        return None
    parts = [
        body.get("system"),
        body.get("instructions"),
        body.get("systemInstruction"),
        body.get("messages"),
        body.get("input"),
        body.get("contents"),
    ]
    texts = list(_texts(parts))
    for pattern in _CWD_PATTERNS:
        for text in texts:
            m = pattern.search(text)
            if m:
                return _path(m.group(1))
    return None


def _path(found: str) -> str:
    """A directory as announced, without the quotes, backticks, trailing period or slash
    some wordings put around it."""
    path = found.strip()
    while True:
        trimmed = path.strip().strip("`'\"")
        if trimmed.endswith(".") and not trimmed.endswith("/.") and trimmed[-2:] != "..":
            trimmed = trimmed[:-1]
        if trimmed == path:
            break
        path = trimmed
    return path.rstrip("/") or "/"


def fill_text(template: str, cwd: str | None) -> str:
    return template.replace("{{cwd}}", (cwd or ".").rstrip("/") or "/")


def fill(value: Any, cwd: str | None) -> Any:
    """``value`` with every ``{{cwd}}`` replaced by the client's working directory."""
    if isinstance(value, str):
        return fill_text(value, cwd)
    if isinstance(value, list):
        return [fill(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, cwd) for k, v in value.items()}
    return value


def scripted(text: str, templates: Iterable[str]) -> bool:
    """Whether an assistant ``text`` in a request is one the script answers with (any
    ``{{cwd}}`` in a template matches any directory): the others are turns a client
    seeded into its conversation itself, and count for no scripted turn."""
    said = text.strip()
    for template in templates:
        if "{{cwd}}" not in template:
            if template.strip() == said:
                return True
            continue
        parts = [re.escape(p) for p in template.strip().split("{{cwd}}")]
        if re.fullmatch(".*?".join(parts), said, re.S):
            return True
    return False


def count_turns(turns: Iterable[tuple[str, bool]], templates: Iterable[str]) -> int:
    """The model turns a conversation holds, from each assistant turn's (text, has a tool
    call): one with a tool call counts, a text alone only when the script says it."""
    known = list(templates)
    return sum(1 for text, called in turns if called or (text and scripted(text, known)))


def json_for(schema: Any) -> Any:
    """A small value that satisfies a JSON Schema (OpenAPI-style upper-case types too):
    what a side request asking for JSON gets (a classifier's, a title's)."""
    if not isinstance(schema, dict):
        return {}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return json_for(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    kind = str(kind or "object").lower()
    if kind == "object":
        props = schema.get("properties")
        wanted = schema.get("required")
        if not isinstance(props, dict) or not isinstance(wanted, list):
            return {}
        return {k: json_for(props.get(k)) for k in wanted if isinstance(k, str)}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        low = schema.get("minimum")
        return low if isinstance(low, (int, float)) and not isinstance(low, bool) else 1
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "scripted"
