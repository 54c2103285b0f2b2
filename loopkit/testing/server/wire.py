"""What a wire format is to the server, and what the two formats share.

A wire format (``anthropic``, ``openai``) is a module that turns a script's turn into that
API's answer and says how many model turns a request's conversation already holds. It
knows its JSON shapes and nothing of HTTP: :mod:`loopkit.testing.server.http` sends what
it builds, and :mod:`loopkit.testing.server.faults` breaks it when the script says so.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from loopkit.testing.script import Error, Turn

#: Default token counts reported per response (a script turn's ``usage`` overrides them).
DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 20}

#: One server-sent event: its name and its data.
Event = tuple[str, dict[str, Any]]

_CWD_PATTERNS = (
    re.compile(r"<cwd>([^<\n]+)</cwd>"),
    re.compile(r"Primary working directory: *([^\n]+)"),
    re.compile(r"Working directory: *([^\n]+)"),
)


class Wire(Protocol):
    """The interface each wire-format module implements."""

    #: Events a cut stream sends when the script's ``cut`` names no ``after``.
    DEFAULT_CUT: int

    def assistant_turns(self, body: Mapping[str, Any]) -> int:
        """How many model turns the conversation in a request already holds."""
        ...

    def answer(self, turn: Turn, *, model: str, cwd: str | None) -> dict[str, Any]:
        """The whole answer to a request that does not stream."""
        ...

    def events(self, answer: dict[str, Any]) -> list[Event]:
        """The same answer as the events of a stream."""
        ...

    def error_body(self, error: Error) -> dict[str, Any]:
        """The API's usual error envelope for a scripted error."""
        ...

    def error_events(self, payload: Any, *, model: str) -> list[Event]:
        """An error sent inside a stream that began with a 200."""
        ...


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


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


def fill(value: Any, cwd: str | None) -> Any:
    """``value`` with every ``{{cwd}}`` replaced by the client's working directory."""
    if isinstance(value, str):
        return value.replace("{{cwd}}", cwd or ".")
    if isinstance(value, list):
        return [fill(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, cwd) for k, v in value.items()}
    return value
