"""The model script: what the scripted model server answers, turn by turn.

A script is a list of turns (YAML or JSON). Each turn is one model response: some text,
some tool calls, or a failure. The server picks the turn from the conversation it
receives (the number of assistant turns already in it), so a resumed session continues
the script where it left off.

    - text: "I'll create the file."
      tools:
        - name: Write
          input: {file_path: "{{cwd}}/hello.py", content: "print('hi')\\n"}
    - error: {status: 529, times: 2}      # 529 twice, then this turn's content
      text: Done.

A mapping gives separate scripts per API and options::

    anthropic: [...]        # alias: claude   -- POST /v1/messages
    openai: [...]           # alias: codex    -- POST /v1/responses
    chat: [...]             # alias: qwen     -- POST /v1/chat/completions
    gemini: [...]           #                 -- POST /v1beta/models/M:generateContent
    turns: [...]            # every API, when no API-specific list is given
    exhausted: end          # past the last turn: end | repeat_last | error

    sessions: [[...], {anthropic: [...]}]   # instead: one script per new conversation
    exhausted: end

With ``sessions``, each new conversation (a new session id from the client) gets the
next script -- a loop's second attempt sees what a second attempt should -- and a resumed
conversation keeps its own; conversations past the list get the last script.

Turn keys: ``text``; ``tools`` (list of ``{name, input, id?}``; a string ``input`` is a
custom tool call on the Responses API, e.g. ``apply_patch``); ``error`` (alias ``fail``:
``{status, type?, message?, code?, headers?, body?, times?, in_stream?}``; without
``times`` it never clears; ``in_stream`` sends it as an event inside a 200 stream);
``cut`` (``{after?, times?}`` or ``true``: close the stream after ``after`` events,
``times`` times); ``delay`` (seconds before answering); ``stop_reason``;
``usage``. ``{{cwd}}`` in text and tool inputs becomes the client's working directory,
read from the request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import loader
from loopkit.errors import BadInput

if TYPE_CHECKING:
    from loopkit.sections import JSONObject, ScriptCut, ScriptError, ScriptTool, ScriptTurn

#: API names and the aliases a script may use for them.
API_ALIASES: dict[str, str] = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "codex": "openai",
    "chat": "chat",
    "qwen": "chat",
    "gemini": "gemini",
}
#: The wire formats: Anthropic Messages, OpenAI Responses, OpenAI Chat Completions, Gemini.
APIS = ("anthropic", "openai", "chat", "gemini")
EXHAUSTED = ("end", "repeat_last", "error")


_TURN_KEYS = {"text", "tools", "error", "fail", "cut", "delay", "stop_reason", "usage", "note"}
_TOOL_KEYS = {"name", "input", "id"}
_ERROR_KEYS = {"status", "type", "message", "code", "headers", "body", "times", "in_stream"}
_CUT_KEYS = {"after", "times"}
_SESSION_KEYS = {"turns", *API_ALIASES}
_TOP_KEYS = {"kind", "version", "sessions", "exhausted", *_SESSION_KEYS}
KIND = "loopkit/model-script"


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: Any  # a mapping (function call) or a string (custom tool call, e.g. apply_patch)
    id: str | None = None


@dataclass(frozen=True)
class Error:
    status: int
    type: str | None = None  # None: the API's usual type for the status
    message: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None  # sent as-is instead of the standard error envelope
    times: int | None = None  # None: never clears
    #: Sent inside a 200 event stream (Anthropic ``event: error``, OpenAI
    #: ``response.failed``) instead of as an HTTP status.
    in_stream: bool = False


@dataclass(frozen=True)
class Cut:
    #: Events sent before the connection is closed. None: the API's default -- after
    #: ``message_start`` and the first ``content_block_start`` (Anthropic), after
    #: ``response.created`` (OpenAI: a client keeps any output item it already received,
    #: so a later cut makes its retry count as the next turn).
    after: int | None = None
    times: int = 1


@dataclass(frozen=True)
class Turn:
    text: str | None = None
    tools: tuple[ToolCall, ...] = ()
    error: Error | None = None
    cut: Cut | None = None
    delay: float = 0.0
    stop_reason: str | None = None
    usage: Mapping[str, int] | None = None

    @property
    def has_content(self) -> bool:
        return self.text is not None or bool(self.tools)


@dataclass(frozen=True)
class Script:
    anthropic: tuple[Turn, ...]  # the (first) conversation's turns on each API
    openai: tuple[Turn, ...]
    exhausted: str = "end"
    more: tuple[Script, ...] = ()  # the 2nd, 3rd, ... conversation's scripts (``sessions``)
    chat: tuple[Turn, ...] = ()
    gemini: tuple[Turn, ...] = ()

    @property
    def sessions(self) -> tuple[Script, ...]:
        return (self, *self.more)

    def turns(self, api: str, session: int = 0) -> tuple[Turn, ...]:
        """The turns of conversation ``session`` (the last script serves any later one)."""
        sc = self.sessions[min(session, len(self.more))]
        turns: tuple[Turn, ...] = getattr(sc, api)
        return turns

    def texts(self) -> list[str]:
        """Every text the script can answer with, on any API and in any conversation."""
        return [
            t.text
            for sc in self.sessions
            for api in APIS
            for t in getattr(sc, api)
            if t.text is not None
        ]


def load(path: str | Path) -> Script:
    """Read and validate a script file (YAML or JSON). Bad input raises ``BadInput``."""
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(source, f"cannot read the script: {e.strerror or e}") from None
    return parse(text, source=source)


def parse(text: str, *, source: str = "script") -> Script:
    """Parse YAML or JSON text into a validated script."""
    try:
        data = loader.yaml_load(text)
    except loader.LoadError as e:
        if e.path is None:  # the text does not parse at all
            where = f" at line {e.line}" if e.line is not None else ""
            raise BadInput(source, f"not valid YAML or JSON{where}") from None
        raise BadInput(source, str(e), path=e.path) from None
    return from_data(data, source=source)


def from_data(data: Any, *, source: str = "script") -> Script:
    """Validate a script already decoded (a list of turns or a mapping)."""

    def bad(path: str, message: str) -> BadInput:
        return BadInput(source, message, path=path)

    if isinstance(data, dict):
        for key in data:
            if key not in _TOP_KEYS:
                raise bad(
                    f"$.{key}", f"unknown key; expected one of: {', '.join(sorted(_TOP_KEYS))}"
                )
        if data.get("kind", KIND) != KIND:
            raise bad("$.kind", f"expected {KIND!r}, got {data['kind']!r}")
        if data.get("version", 1) != 1:
            raise bad("$.version", f"expected 1, got {data['version']!r}")
        data = {k: v for k, v in data.items() if k not in ("kind", "version")}
        exhausted = data.get("exhausted", "end")
        if exhausted not in EXHAUSTED:
            raise bad("$.exhausted", f"expected one of {', '.join(EXHAUSTED)}, got {exhausted!r}")
        if "sessions" in data:
            others = sorted(k for k in data if k not in ("sessions", "exhausted"))
            if others:
                raise bad(f"$.{others[0]}", "give the turns inside `sessions`, not beside it")
            sessions = data["sessions"]
            if not isinstance(sessions, list) or not sessions:
                raise bad(
                    "$.sessions", f"expected a non-empty list of scripts, got {_kind(sessions)}"
                )
            parts = [_session(s, f"$.sessions[{i}]", bad) for i, s in enumerate(sessions)]
            more = tuple(_script(p, exhausted) for p in parts[1:])
            return _script(parts[0], exhausted, more)
        return _script(_session(data, "$", bad), exhausted)
    return _script(_session(data, "$", bad), "end")


def _script(
    turns: dict[str, tuple[Turn, ...]], exhausted: str, more: tuple[Script, ...] = ()
) -> Script:
    return Script(
        anthropic=turns["anthropic"],
        openai=turns["openai"],
        chat=turns["chat"],
        gemini=turns["gemini"],
        exhausted=exhausted,
        more=more,
    )


def _session(data: Any, path: str, bad: Any) -> dict[str, tuple[Turn, ...]]:
    """One conversation's turns per API (the keys of ``APIS``)."""
    if isinstance(data, list):
        turns = _turns(data, path, bad)
        return dict.fromkeys(APIS, turns)
    if not isinstance(data, dict):
        raise bad(path, f"expected a list of turns or a mapping, got {_kind(data)}")
    keys = _TOP_KEYS if path == "$" else _SESSION_KEYS
    for key in data:
        if key not in keys:
            raise bad(f"{path}.{key}", f"unknown key; expected one of: {', '.join(sorted(keys))}")
    common = _turns(data["turns"], f"{path}.turns", bad) if "turns" in data else None
    per_api: dict[str, tuple[Turn, ...]] = {}
    for key, api in API_ALIASES.items():
        if key in data:
            if api in per_api:
                raise bad(f"{path}.{key}", f"the {api} turns are given twice")
            per_api[api] = _turns(data[key], f"{path}.{key}", bad)
    if common is None and not per_api:
        raise bad(
            path,
            "no turns: give `turns`, `anthropic` (claude), `openai` (codex), `chat` (qwen)"
            " or `gemini`",
        )
    return {api: per_api.get(api, common or ()) for api in APIS}


def to_data(script: Script) -> dict[str, object]:
    """The script back as plain data (what ``from_data`` accepts)."""

    def turn(t: Turn) -> ScriptTurn:
        out: ScriptTurn = {}
        if t.text is not None:
            out["text"] = t.text
        if t.tools:
            out["tools"] = [tool(c) for c in t.tools]
        if t.error is not None:
            e = t.error
            err: ScriptError = {"status": e.status}
            if e.type is not None:
                err["type"] = e.type
            if e.message is not None:
                err["message"] = e.message
            if e.code is not None:
                err["code"] = e.code
            if e.headers:
                err["headers"] = dict(e.headers)
            if e.body is not None:
                err["body"] = e.body
            if e.times is not None:
                err["times"] = e.times
            if e.in_stream:
                err["in_stream"] = True
            out["error"] = err
        if t.cut is not None:
            cut: ScriptCut = {"times": t.cut.times}
            if t.cut.after is not None:
                cut["after"] = t.cut.after
            out["cut"] = cut
        if t.delay:
            out["delay"] = t.delay
        if t.stop_reason is not None:
            out["stop_reason"] = t.stop_reason
        if t.usage is not None:
            out["usage"] = dict(t.usage)
        return out

    def tool(c: ToolCall) -> ScriptTool:
        out: ScriptTool = {"name": c.name, "input": c.input}
        if c.id:
            out["id"] = c.id
        return out

    def session(sc: Script) -> dict[str, object]:
        return {api: [turn(t) for t in getattr(sc, api)] for api in APIS}

    if script.more:
        return {
            "sessions": [session(sc) for sc in (script, *script.more)],
            "exhausted": script.exhausted,
        }
    return {**session(script), "exhausted": script.exhausted}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def _turns(data: Any, path: str, bad: Any) -> tuple[Turn, ...]:
    if not isinstance(data, list):
        raise bad(path, f"expected a list of turns, got {_kind(data)}")
    if not data:
        raise bad(path, "expected at least one turn")
    return tuple(_turn(t, f"{path}[{i}]", bad) for i, t in enumerate(data))


def _int(value: Any, path: str, bad: Any, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(path, f"expected an integer, got {_kind(value)}")
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise bad(path, f"expected an integer {span}, got {value}")
    return value


def _str(value: Any, path: str, bad: Any) -> str:
    if not isinstance(value, str):
        raise bad(path, f"expected a string, got {_kind(value)}")
    return value


def _mapping(value: Any, path: str, bad: Any, keys: set[str]) -> JSONObject:
    if not isinstance(value, dict):
        raise bad(path, f"expected a mapping, got {_kind(value)}")
    for key in value:
        if key not in keys:
            raise bad(f"{path}.{key}", f"unknown key; expected one of: {', '.join(sorted(keys))}")
    return value


def _turn(data: Any, path: str, bad: Any) -> Turn:
    if isinstance(data, str):  # shorthand: a turn that only says something
        return Turn(text=data)
    d = _mapping(data, path, bad, _TURN_KEYS)
    if "error" in d and "fail" in d:
        raise bad(f"{path}.fail", "give `error` or `fail`, not both")
    text = _str(d["text"], f"{path}.text", bad) if "text" in d else None
    tools: list[ToolCall] = []
    if "tools" in d:
        if not isinstance(d["tools"], list):
            raise bad(f"{path}.tools", f"expected a list of tool calls, got {_kind(d['tools'])}")
        for i, call in enumerate(d["tools"]):
            tools.append(_tool(call, f"{path}.tools[{i}]", bad))
    error = None
    for key in ("error", "fail"):
        if key in d:
            error = _error(d[key], f"{path}.{key}", bad)
    cut = _cut(d["cut"], f"{path}.cut", bad) if "cut" in d else None
    delay = 0.0
    if "delay" in d:
        v = d["delay"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise bad(f"{path}.delay", f"expected seconds >= 0, got {v!r}")
        delay = float(v)
    stop_reason = _str(d["stop_reason"], f"{path}.stop_reason", bad) if "stop_reason" in d else None
    usage = None
    if "usage" in d:
        u = d["usage"]
        if not isinstance(u, dict):
            raise bad(f"{path}.usage", f"expected a mapping of token counts, got {_kind(u)}")
        usage = {
            _str(k, f"{path}.usage", bad): _int(v, f"{path}.usage.{k}", bad, low=0)
            for k, v in u.items()
        }
    turn = Turn(
        text=text,
        tools=tuple(tools),
        error=error,
        cut=cut,
        delay=delay,
        stop_reason=stop_reason,
        usage=usage,
    )
    if not turn.has_content and not (error is not None and error.times is None):
        if error is not None:
            raise bad(path, "an error with `times` needs `text` or `tools` to serve once it clears")
        raise bad(path, "a turn needs `text`, `tools` or an `error`")
    return turn


def _tool(data: Any, path: str, bad: Any) -> ToolCall:
    d = _mapping(data, path, bad, _TOOL_KEYS)
    if "name" not in d:
        raise bad(path, "a tool call needs a `name`")
    name = _str(d["name"], f"{path}.name", bad)
    if not name:
        raise bad(f"{path}.name", "expected a non-empty tool name")
    value = d.get("input", {})
    if not isinstance(value, (dict, str)):
        raise bad(
            f"{path}.input",
            f"expected a mapping (or a string for a custom tool), got {_kind(value)}",
        )
    ident = _str(d["id"], f"{path}.id", bad) if "id" in d else None
    return ToolCall(name=name, input=value, id=ident)


def _error(data: Any, path: str, bad: Any) -> Error:
    if isinstance(data, int) and not isinstance(data, bool):
        data = {"status": data}
    d = _mapping(data, path, bad, _ERROR_KEYS)
    if "status" not in d:
        raise bad(path, "an error needs a `status` (an HTTP status code)")
    status = _int(d["status"], f"{path}.status", bad, low=400, high=599)
    etype = _str(d["type"], f"{path}.type", bad) if "type" in d else None
    message = _str(d["message"], f"{path}.message", bad) if "message" in d else None
    code = _str(d["code"], f"{path}.code", bad) if "code" in d else None
    headers: dict[str, str] = {}
    if "headers" in d:
        h = d["headers"]
        if not isinstance(h, dict):
            raise bad(
                f"{path}.headers", f"expected a mapping of header names to values, got {_kind(h)}"
            )
        for k, v in h.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            if not isinstance(v, (str, int, float)):
                raise bad(f"{path}.headers.{k}", f"expected a string, got {_kind(v)}")
            headers[str(k)] = str(v)
    times = _int(d["times"], f"{path}.times", bad, low=1) if "times" in d else None
    in_stream = d.get("in_stream", False)
    if not isinstance(in_stream, bool):
        raise bad(f"{path}.in_stream", f"expected true or false, got {_kind(in_stream)}")
    return Error(
        in_stream=in_stream,
        status=status,
        type=etype,
        message=message,
        code=code,
        headers=headers,
        body=d.get("body"),
        times=times,
    )


def _cut(data: Any, path: str, bad: Any) -> Cut:
    if data is True:
        return Cut()
    d = _mapping(data, path, bad, _CUT_KEYS)
    after = _int(d["after"], f"{path}.after", bad, low=0) if "after" in d else None
    times = _int(d["times"], f"{path}.times", bad, low=1) if "times" in d else 1
    return Cut(after=after, times=times)


def dumps(script: Script) -> str:
    return json.dumps(to_data(script))
