"""The one small interface every worker provider implements.

A provider is the only code in loopkit that knows a worker CLI's flags and event shapes.
It does three things, and each is usable on its own:

1. **Build** the process: ``provider.build(spec) -> Invocation`` turns a :class:`RunSpec`
   (prompt, working directory, model, limits, resume id, ``read_only``) into ``argv``, an
   allow-listed ``env``, the bytes for stdin (``None`` means /dev/null) and the files to
   write before the start (the command provider's handoff file). Nothing is started.

   ``read_only=True`` is for a judge: claude gets only Read/Glob/Grep (writes and Bash
   denied, ``--permission-mode default``), codex runs ``--sandbox read-only``.

2. **Parse** the native stream incrementally: ``parser = provider.parser()``, then
   ``events = parser.feed(line)`` for every stdout line as it arrives (bytes or str; a
   partial or non-JSON line is tolerated), and ``state = parser.finish()`` at the end.
   ``feed`` returns normalized :class:`Event` s (``tool_call``, ``tool_result``,
   ``retry``, ``error``, ``message``, ``init``, ``result``) for live watchers such as the
   breaker; ``parser.state`` (a :class:`RunState`) accumulates everything: session id,
   model, final message, usage, cost, retries, the provider's own result/error fields,
   and ``tool_calls`` -- a list of :class:`ToolCall` with ``name``, ``input``, ``ok``
   (True / False / None while pending), ``error``, ``command`` (the shell command, when
   the tool ran one), ``files_read`` and ``files_written``. ``state.files_read`` is the
   de-duplicated list of files a *successful* tool call actually read (claude ``Read``;
   codex ``cat``/``sed``/``head``/``nl``/... commands) -- what a judge cites as grounding.

3. **Classify** the end: ``provider.classify(state, Exit(...)) -> Outcome`` maps the real
   signals (exit status, result ``is_error``, ``api_error_status``, ``terminal_reason``,
   ``turn.failed`` messages, who stopped the process) to one ``stop_reason``:
   completed, max_turns, timeout, api_error, rate_limited, usage_limit, auth_error,
   invalid_request, permission_denied, stuck, cancelled, crashed -- with ``is_error``,
   a one-line ``error`` and ``resume_after`` (ISO time) for a usage limit.

Typical use (what ``loopkit.worker.invoke`` does, and what a read-only judge can do)::

    from loopkit import proc

    from loopkit.worker.providers.base import Exit, RunSpec

    p = providers.get("claude")
    inv = p.build(RunSpec(prompt="Is X done? Cite files.", cwd=repo, read_only=True))
    running = proc.spawn(inv.argv, cwd=inv.cwd, env=inv.env, stdin=inv.stdin, timeout=300)
    parser = p.parser()
    for line in running.lines():
        parser.feed(line)
    done = running.wait()
    state = parser.finish()
    outcome = p.classify(state, Exit(exit_code=done.exit_code, stopped=done.stopped))
    state.files_read, state.final_message, outcome.stop_reason

``loopkit.worker.invoke.execute(provider, spec, artifacts=...)`` wraps exactly that loop (timeout,
breaker, cancellation, the saved stream) and returns a ``Result`` with the ``run`` record,
the parsed state and the outcome; a judge calls it with ``RunSpec(read_only=True)``.
``detect(path)`` names the provider of a saved stream from its content.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypedDict, cast
from urllib.parse import urlparse

from loopkit import loader
from loopkit.boundary.dialects import Upstream, find_upstream
from loopkit.boundary.secrets import allowed_env
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.values import field, fields_of, record
from loopkit.worker import providers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.dialects import Api

#: stop_reason values (schemas/run.json). "completed" is the only one that is not an error.
STOP_REASONS = (
    "completed",
    "max_turns",
    "timeout",
    "api_error",
    "rate_limited",
    "usage_limit",
    "auth_error",
    "invalid_request",
    "permission_denied",
    "stuck",
    "cancelled",
    "crashed",
)

#: One free-form JSON object as a CLI gives it: a line of its stream, its config file, a
#: tool's input. Read with ``as_dict`` / ``.get`` and checked where used.
JsonObject = dict[str, Any]

#: The key a rehearsal gives a CLI (``Provider.rehearsal``): a scripted server takes any.
REHEARSAL_KEY = "loopkit-rehearsal"

#: The worker options of a CLI with a turn cap and approval modes (gemini, qwen).
APPROVAL_OPTIONS = ("max_turns", "permission_mode", "env_allow", "resume", "extra_args")

#: Bounds that keep memory flat however long the stream is.
MAX_TOOL_CALLS = 2000
MAX_INPUT_CHARS = 500
MAX_ERROR_CHARS = 2000


@record
class RunSpec:
    """What one worker (or judge) run should do; providers read only what they know."""

    prompt: str
    cwd: Path = field(default_factory=Path.cwd)
    model: str | None = None
    max_turns: int | None = None
    max_cost_usd: float | None = None
    sandbox: str | None = None  # codex: read-only | workspace-write | danger-full-access
    allowed_tools: list[str] | None = None  # claude --allowedTools
    permission_mode: str | None = None  # claude --permission-mode (default acceptEdits)
    resume: str | None = None  # a session id to continue
    read_only: bool = False  # a judge: no writes, no shell
    command: str | None = None  # the command provider's shell command (acp: the agent's)
    agent: str | None = None  # acp: a known agent by name (loopkit.worker.acp.agents)
    #: The contract's scope (acp answers permissions from it).
    scope: Mapping[str, Any] | None = None
    #: The files that steer the loop, repository-relative (acp).
    control: list[str] = field(default_factory=list)
    env_allow: list[str] = field(default_factory=list)  # more variable names to pass on
    extra_args: list[str] = field(default_factory=list)
    handoff_path: Path | None = None  # where the command provider's handoff file goes
    attempt: int | None = None
    task_id: str | None = None
    environ: Mapping[str, str] | None = None  # the parent's env (default os.environ)
    meter: Any = None  # worker.meter: "auto" (None), "on", "off" (loopkit.boundary.meter)
    upstream: str | None = None  # worker.upstream: the real API's base URL, over the environment's
    unmetered: list[str] = field(
        default_factory=list
    )  # worker.unmetered: credentials passed on raw beside the meter

    @classmethod
    def from_section(
        cls, section: Mapping[str, Any] | None, *, prompt: str, **overrides: Any
    ) -> RunSpec:
        """A spec from a contract's ``worker`` (or ``judge``) section; overrides win."""
        s = dict(section or {})
        spec = cls(
            prompt=prompt,
            model=s.get("model"),
            max_turns=s.get("max_turns"),
            max_cost_usd=s.get("max_cost_usd"),
            sandbox=s.get("sandbox"),
            allowed_tools=s.get("allowed_tools"),
            permission_mode=s.get("permission_mode"),
            command=s.get("command"),
            agent=s.get("agent"),
            env_allow=list(s.get("env_allow") or []),
            extra_args=list(s.get("extra_args") or []),
            meter=s.get("meter"),
            upstream=s.get("upstream"),
            unmetered=list(s.get("unmetered") or []),
        )
        for name, value in overrides.items():
            if value is not None:
                setattr(spec, name, value)
        return spec

    def parent_env(self) -> Mapping[str, str]:
        return self.environ if self.environ is not None else os.environ


class Rehearsal(NamedTuple):
    """A scripted model server to point a CLI at (``Provider.rehearsal``): its URL, the
    home the CLI's settings go under, the CLI's own retries (None: its default), the key,
    the model (None: the provider's choice), codex's stream reconnects (None: as
    ``retries``)."""

    base_url: str
    home: Path
    retries: int | None = None
    api_key: str = REHEARSAL_KEY
    model: str | None = None
    stream_retries: int | None = None

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")


@record
class Invocation:
    """A process ready to start: nothing has run yet."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    stdin: bytes | None = None  # None: /dev/null
    files: dict[Path, str] = field(default_factory=dict)  # written before the start
    cost_trusted: bool = False  # the CLI talks to its vendor's own endpoint
    model: str | None = None  # the model asked for (flag or the CLI's config), if known
    #: Settings the provider renders into its private home's config file (``contained``),
    #: for what its CLI takes from no flag (gemini's turn cap).
    settings: JsonObject = field(default_factory=dict)
    metered: bool = False  # talks to its API through loopkit's meter (no real key inside)

    def but(self, **changed: Any) -> Invocation:
        """A copy with ``changed`` fields replaced (this one is left as it is)."""
        copy = Invocation(self.argv, self.env, self.cwd)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changed)
        return copy

    def write_files(self) -> None:
        for path, text in self.files.items():
            atomic_write(path, text)


class ToolCallRecord(TypedDict):
    """A tool call as a record holds it (``ToolCall.as_dict``)."""

    id: str | None
    name: str
    input: JsonObject
    ok: bool | None
    error: str | None
    command: str | None
    files_read: list[str]
    files_written: list[str]


@record(slots=True)
class ToolCall:
    """One tool use seen in the stream, completed by its result when that arrives."""

    id: str | None
    name: str
    input: JsonObject
    ok: bool | None = None  # None: no result yet
    error: str | None = None  # the tool's error text when it failed
    command: str | None = None  # the shell command it ran, if any
    files_read: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)

    def as_dict(self) -> ToolCallRecord:
        return cast("ToolCallRecord", fields_of(self))


@record(slots=True)
class Event:
    """A normalized event returned by ``StreamParser.feed``."""

    kind: str  # init | message | tool_call | tool_result | retry | error | result
    tool: ToolCall | None = None
    text: str | None = None


@record
class RunState:
    """Everything learned from a stream so far (bounded in size)."""

    session_id: str | None = None
    model: str | None = None
    final_message: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None
    api_retries: int = 0
    api_error_status: int | None = None  # the last HTTP status the CLI reported
    result_seen: bool = False  # the provider printed its final result / turn end
    result_is_error: bool | None = None
    result_subtype: str | None = None
    terminal_reason: str | None = None
    errors: list[str] = field(default_factory=list)  # provider error messages, in order
    permission_denials: list[JsonObject] = field(default_factory=list)
    #: Writes loopkit refused before they happened (acp).
    refused: list[JsonObject] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)  # at most MAX_TOOL_CALLS kept
    tool_call_count: int = 0
    tool_errors: int = 0
    lines: int = 0
    bad_lines: int = 0
    last_text: str | None = None  # last non-empty plain line (the command provider)
    _files_read: dict[str, None] = field(default_factory=dict)
    _files_written: dict[str, None] = field(default_factory=dict)

    @property
    def files_read(self) -> list[str]:
        """Files successful tool calls read, first-read order, de-duplicated."""
        return list(self._files_read)

    @property
    def files_written(self) -> list[str]:
        return list(self._files_written)

    @property
    def commands(self) -> list[str]:
        return [t.command for t in self.tool_calls if t.command]

    def add_tool(self, call: ToolCall) -> None:
        self.tool_call_count += 1
        if len(self.tool_calls) < MAX_TOOL_CALLS:
            self.tool_calls.append(call)

    def settle(self, call: ToolCall, *, ok: bool, error: str | None = None) -> None:
        call.ok = ok
        if ok and not call.files_read and not call.files_written:
            return
        if not ok:
            self.tool_errors += 1
            call.error = clip(error or "failed", MAX_ERROR_CHARS)
            return
        for f in call.files_read:
            self._files_read.setdefault(f, None)
        for f in call.files_written:
            self._files_written.setdefault(f, None)

    def add_error(self, message: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(clip(message, MAX_ERROR_CHARS))


@record
class Exit:
    """How the process ended, as loopkit saw it."""

    exit_code: int | None  # None when loopkit stopped it
    stopped: str | None = None  # "timeout", "cancelled", "stuck", ... (who stopped it and why)
    stderr_tail: str = ""


@record
class Outcome:
    stop_reason: str
    is_error: bool
    error: str | None = None
    resume_after: str | None = None
    claimed_complete: bool = False


#: The C scanner behind json.loads, called directly: one JSON line is one object, and the
#: wrapper's encoding detection and regex passes cost as much as a small line's parse.
#: Strict about numbers: a NaN cost or count is refused with the rest of its line.
_SCAN = loader.scan_line


def _object(text: str) -> JsonObject | None:
    """The JSON object on one line, or None (not an object, not JSON, trailing garbage)."""
    start = 0
    if text[:1] != "{":
        stripped = len(text) - len(text.lstrip())
        if text[stripped : stripped + 1] != "{":
            return None
        start = stripped
    try:
        obj, end = _SCAN(text, start)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) and text[end:].strip():
        return None
    return obj if isinstance(obj, dict) else None


class StreamParser:
    """Base parser: subclasses implement ``handle(obj)``; plain lines go to ``plain``."""

    def __init__(self) -> None:
        self.state = RunState()

    def feed(self, line: bytes | str) -> list[Event]:
        self.state.lines += 1
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
        except UnicodeDecodeError:
            text = line.decode("utf-8", "replace")  # type: ignore[union-attr]
        obj = _object(text)
        if obj is not None:
            return self.handle(obj)
        if text[:1] == "{" or text.lstrip()[:1] == "{":
            self.state.bad_lines += 1
        text = text.strip()
        return self.plain(text) if text else []

    def handle(self, obj: JsonObject) -> list[Event]:  # pragma: no cover - abstract
        raise NotImplementedError

    def plain(self, line: str) -> list[Event]:
        self.state.last_text = clip(line, MAX_ERROR_CHARS)
        return []

    def retried(self, text: str, status: int | None = None) -> list[Event]:
        """The CLI retries a failed request (``status``: the HTTP status it got, if said)."""
        self.state.api_retries += 1
        if status:
            self.state.api_error_status = status
        return [Event("retry", text=text)]

    def message(self, text: object) -> list[Event]:
        """The worker said ``text``: the run's final message so far; nothing when blank."""
        if not isinstance(text, str) or not text.strip():
            return []
        self.state.final_message = clip(text.strip(), 8000)
        return [Event("message", text=text)]

    def finish(self) -> RunState:
        return self.state


class Provider:
    """A worker CLI. Subclasses set ``name``, and ``npm`` or ``binary`` and
    ``install_hint``."""

    name: ClassVar[str] = ""
    binary: ClassVar[str | None] = None
    install_hint: ClassVar[str] = ""
    #: A CLI installed from npm: (what it is called, its package). ``binary`` is then
    #: ``name`` and ``install_hint`` says how to install it.
    npm: ClassVar[tuple[str, str] | None] = None

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if cls.npm is not None and "npm" in cls.__dict__:
            title, package = cls.npm
            cls.binary = cls.name
            cls.install_hint = f"install {title}: npm install -g {package} (or `make agents`)"

    #: Variable names (exact) and prefixes (ending in "_") of the provider's own settings.
    env_names: ClassVar[tuple[str, ...]] = ()

    def build(self, spec: RunSpec) -> Invocation:  # pragma: no cover - abstract
        raise NotImplementedError

    def parser(self) -> StreamParser:  # pragma: no cover - abstract
        raise NotImplementedError

    def classify(self, state: RunState, end: Exit) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError

    #: The contract's worker keys this provider reads (beyond provider, model, timeout).
    options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """Whether one JSON line of a saved stream is this provider's native event."""
        return False

    #: The model API the CLI talks to: the variables that hold its key and base URL, and
    #: the dialect (``loopkit.boundary.dialects.Api``). None: nothing to meter (a command).
    api: ClassVar[Api | None] = None

    def upstream(self, spec: RunSpec) -> Upstream | None:
        """The real endpoint and key this run would use (from the person's environment;
        ``worker.upstream`` wins), or None when no key is set or the provider has no API."""
        if self.api is None:
            return None
        return find_upstream(self.api, spec.parent_env(), url=spec.upstream)

    def keyed_upstream(self, spec: RunSpec, key: str, given_url: object) -> Upstream | None:
        """A key the CLI found in its own files, with the endpoint it would send it to:
        ``worker.upstream``, else the base URL its files give, else the API's own; None
        without a key."""
        if not key or self.api is None:
            return None
        chosen = given_url if isinstance(given_url, str) and given_url else None
        url = spec.upstream or chosen or self.api.default_upstream
        return Upstream(url, key, self.api.key_vars[0], self.api)

    def metered(self, inv: Invocation, url: str, token: str, upstream: Upstream) -> Invocation:
        """``inv`` talking through the meter at ``url``: the key variable holds the run's
        ``token``, the base URL variable the meter's URL, and no other credential of the
        API is passed on."""
        api = upstream.api
        env = {k: v for k, v in inv.env.items() if k not in api.key_vars}
        env[upstream.key_var] = token
        if api.base_url_var:
            env[api.base_url_var] = url
        return inv.but(env=env, cost_trusted=False, metered=True)

    def contained(self, inv: Invocation) -> tuple[Invocation, list[Path]]:
        """The invocation to run inside loopkit's sandbox, and the paths it must be able
        to write there (its sessions, its config); made to exist. Default: as built,
        nothing more."""
        return inv, []

    def env(self, spec: RunSpec, *, extra: Iterable[str] = ()) -> dict[str, str]:
        """The allow-listed environment: base names, this provider's own, the contract's."""
        return allowed_env(spec.parent_env(), (*self.env_names, *extra, *spec.env_allow))

    def locate(self, inv: Invocation) -> str | None:
        """The executable's path in the worker's PATH, or None when it is not installed."""
        if not inv.argv:
            return None
        exe = inv.argv[0]
        if os.sep in exe:
            return exe if os.access(exe, os.X_OK) else None
        return shutil.which(exe, path=inv.env.get("PATH"))

    def not_found(self, inv: Invocation) -> str:
        """The one line for a worker whose program :meth:`locate` did not find."""
        return f"{inv.argv[0]} not found on PATH: {self.install_hint}"

    #: Variables that would send the CLI to another backend or account: a rehearsal
    #: (``loopkit.testing.rehearse.overlay``) drops them from the person's environment.
    routes: ClassVar[tuple[str, ...]] = ()

    def rehearsal(self, r: Rehearsal) -> dict[str, str] | None:
        """What points the CLI at a scripted model server (loopkit's ``lk-model-server
        --env``, ``loopkit.testing.rehearse``): the variables to set, its settings written
        under ``r.home``. None: the provider has no CLI of its own to rehearse (command,
        acp)."""
        return None


def unresolved_failure(state: RunState) -> ToolCall | None:
    """The first failed tool call nothing later made good, or None.

    A failure is made good by a later successful call of the same tool (for a shell
    command: the same command line). A worker that says "Done" after a refused write, a
    missing tool or a command that exited non-zero, and never got past it, has not shown
    that it is done: its claim is not recorded as one.
    """
    calls = state.tool_calls
    for i, call in enumerate(calls):
        if call.ok is not False:
            continue
        if not any(
            later.ok and later.name == call.name and later.command == call.command
            for later in calls[i + 1 :]
        ):
            return call
    return None


def stopped_message(reason: str) -> str:
    """What a run loopkit stopped says, whichever the provider."""
    if reason == "timeout":
        return "wall-clock timeout: the worker's process group was ended"
    if reason == "stuck":
        return "the breaker stopped a worker repeating one failing tool call"
    return f"stopped by loopkit: {reason}"


def stopped_outcome(end: Exit) -> Outcome | None:
    """The outcome of a run loopkit stopped -- its timeout, ``lk cancel``, the breaker --
    the same for every provider; None when loopkit did not stop it."""
    if not end.stopped:
        return None
    reason = end.stopped if end.stopped in ("timeout", "cancelled", "stuck") else "cancelled"
    return Outcome(reason, True, stopped_message(end.stopped))


def claimed_outcome(failed: ToolCall | None) -> Outcome:
    """A run that ended saying it is done: a claim of completion, unless a tool call
    failed and nothing later made it good (``unresolved_failure``)."""
    if failed is None:
        return Outcome("completed", False, None, claimed_complete=True)
    return Outcome(
        "completed", False, clip(f"claimed done after a failed {failed.name}: {failed.error}", 500)
    )


def last_line(end: Exit, missing: str) -> str:
    """The last line the process wrote on stderr; ``missing`` when it wrote none."""
    tail = end.stderr_tail.strip()
    return tail.splitlines()[-1] if tail else missing


def exited_outcome(cli: str, end: Exit, missing: str) -> Outcome:
    """A CLI that exited with an error of its own: an unknown session it was asked to
    resume is an invalid request, anything else a crash, told by its last stderr line
    (``missing`` when it wrote none)."""
    last = last_line(end, missing)
    if "session" in last.lower() and "not found" in last.lower():
        return Outcome("invalid_request", True, clip(last, 500))
    return Outcome("crashed", True, clip(f"{cli} exited {end.exit_code}: {last}", 500))


def flags(*pairs: tuple[str, str | None]) -> list[str]:
    """``[flag, value]`` for each pair whose value is given (a model, a session id)."""
    return [part for flag, value in pairs if value for part in (flag, value)]


def tool_list(spec: RunSpec, read_only: Sequence[str]) -> str | None:
    """The tools a run may use, comma-separated: ``read_only`` for a judge, else the
    contract's ``allowed_tools``; None: the CLI's own choice."""
    chosen = read_only if spec.read_only else spec.allowed_tools
    return ",".join(chosen) if chosen else None


def as_dict(value: Any) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a stream's odd line)."""
    return value if isinstance(value, dict) else {}


def count(v: Any) -> int:
    """A token or turn count as reported: a positive int, else 0."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def clip_input(value: Any) -> JsonObject:
    """A tool input kept small: long strings cut, so memory stays flat."""
    if not isinstance(value, dict):
        return {"value": clip(str(value), MAX_INPUT_CHARS)}
    out: JsonObject = {}
    for k, v in value.items():
        if isinstance(v, str):
            out[k] = clip(v, MAX_INPUT_CHARS)
        elif isinstance(v, (int, float, bool)) or v is None:
            out[k] = v
        else:
            s = json.dumps(v, ensure_ascii=False)
            out[k] = v if len(s) <= MAX_INPUT_CHARS else clip(s, MAX_INPUT_CHARS)
    return out


_HTTP_STATUS = re.compile(r"\b(4\d\d|5\d\d)\b")


def http_status_in(text: str) -> int | None:
    m = _HTTP_STATUS.search(text)
    return int(m.group(1)) if m else None


def is_vendor_url(url: str | None, vendor_hosts: Sequence[str]) -> bool:
    """True when ``url`` is unset or points at one of the vendor's own hosts."""
    if not url:
        return True
    host = (urlparse(url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in vendor_hosts)


def render_settings(path: Path, overrides: Mapping[str, Any]) -> None:
    """``path`` (a CLI's settings.json, already seeded with the person's) with
    ``overrides`` merged in, one level deep; a file that is not a JSON object is
    replaced."""
    try:
        data = loader.json_loads(path.read_bytes())
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def person_files(
    inv: Invocation, source: Path | None, names: Sequence[str], credentials: Sequence[str]
) -> dict[str, Path]:
    """The person's files (``names`` in their own folder ``source``) a private home is
    seeded with every run; a metered run gets none of the ``credentials``: the worker
    has only its token."""
    if source is None:
        return {}
    return {n: source / n for n in names if not (inv.metered and n in credentials)}


def detect(path: str | os.PathLike[str]) -> str:
    """The provider whose native stream ``path`` holds: the first registered provider
    that recognises one of its first JSON lines (``Provider.sniff``), else command."""

    candidates = [providers.get(name) for name in providers.names()]
    with open(path, "rb") as f:
        for n, raw in enumerate(f):
            if n > 50:
                break
            s = raw.strip()
            if not s.startswith(b"{"):
                continue
            try:
                obj = loader.json_loads(s)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            for provider in candidates:
                if provider.sniff(obj):
                    return provider.name
    return "command"
