"""pi (``pi -p --mode json``, the pi coding agent) as a worker: argv, JSON events, errors.

Run:    pi -p --mode json [--model PROVIDER/MODEL] [--session ID] [--tools read,grep,find,ls]
        PROMPT                                                             stdin /dev/null
        pi has no turn limit and no approvals: every tool it offers runs. A judge gets
        ``--tools read,grep,find,ls`` (write, edit and bash are then unknown to it).
Stream: a ``session`` header ({type, version, id, cwd}), then agent_start, turn_start,
        message_start / message_update / message_end (``message.role`` assistant with
        ``content`` text and toolCall blocks, ``usage``, ``stopReason`` stop | toolUse |
        length | error | aborted, ``errorMessage``), tool_execution_start / _end
        (``toolName``, ``args``, ``isError``, ``result.content``), turn_end, agent_end;
        ``auto_retry_start`` / ``auto_retry_end`` when it retries a failed request.
Errors: pi exits 0 after an API failure: the last assistant message says ``stopReason:
        error`` with ``errorMessage`` ("429 {...}").
Home:   settings.json (its retry policy), models.json (custom providers and base URLs),
        auth.json and sessions in ``PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``); in
        loopkit's runs a private copy (``contained``).
Meter:  the anthropic provider's key (``ANTHROPIC_API_KEY``, else the person's
        ``auth.json`` or ``models.json`` ``providers.anthropic.apiKey``) and base URL
        (``providers.anthropic.baseUrl``). pi takes its endpoint from no variable: a
        metered run always gets the private folder, sandbox or not, its ``models.json``
        pointing at the meter with the run's token, no ``auth.json``, no key of the
        person's.
Cost:   ``usage.cost.total`` is pi's price table for the model *name*: recorded, never
        trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit import loader
from loopkit.boundary import containment
from loopkit.boundary.dialects import Api, Upstream
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.worker.providers import base, codex, tools

READ_ONLY_TOOLS = ("read", "grep", "find", "ls")
#: The provider whose API the meter stands in for, and its endpoint when no baseUrl is set.
PROVIDER = "anthropic"
DEFAULT_UPSTREAM = "https://api.anthropic.com"
COST_SOURCE = "pi price table (not trusted)"
#: pi's JSON event types (the ``session`` header is told apart by its fields).
EVENT_TYPES = frozenset(
    (
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "compaction_start",
        "compaction_end",
        "queue_update",
    )
)


class PiProvider(base.Provider):
    name = "pi"
    npm = ("pi", "@mariozechner/pi-coding-agent")
    env_names = (
        "PI_",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_OAUTH_TOKEN",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    )

    options = ("allowed_tools", "env_allow", "resume", "extra_args")

    api = Api("anthropic", ("ANTHROPIC_API_KEY",), None, DEFAULT_UPSTREAM)

    routes = ("PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR")
    #: The model a rehearsal names (its built-in anthropic provider, the base URL redirected).
    rehearsal_model = "anthropic/claude-sonnet-4-5"

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """Writes pi's ``models.json`` (the anthropic provider's ``baseUrl``) and
        ``settings.json`` (``retries`` agent-level retries, 10 ms apart; the SDK's own off)
        into ``home``; ``PI_CODING_AGENT_DIR``, offline, no telemetry."""
        retries = r.retries or 0
        r.home.mkdir(parents=True, exist_ok=True)
        models = {"providers": {"anthropic": {"baseUrl": r.url, "apiKey": r.api_key}}}
        settings = {
            "defaultProvider": "anthropic",
            "defaultModel": self.rehearsal_model.split("/", 1)[1],
            "retry": {
                "enabled": retries > 0,
                "maxRetries": retries,
                "baseDelayMs": 10,
                "provider": {"maxRetries": 0},
            },
        }
        atomic_write(r.home / "models.json", json.dumps(models, indent=2) + "\n")
        atomic_write(r.home / "settings.json", json.dumps(settings, indent=2) + "\n")
        return {"PI_CODING_AGENT_DIR": str(r.home), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """The key and endpoint of pi's ``anthropic`` provider: the environment's
        ``ANTHROPIC_API_KEY``, else the person's own folder (an ``api_key`` login in
        auth.json, the provider's ``apiKey`` in models.json); never a file of the project.
        None when the run's model is another provider's (or a command holds the key)."""
        parent = spec.parent_env()
        source = agent_dir(parent)
        folder = Path("/nonexistent") if source is None else source
        settings = _read(folder / "settings.json")
        wanted = spec.model.split("/", 1)[0] if spec.model and "/" in spec.model else None
        chosen = wanted or settings.get("defaultProvider") or PROVIDER
        if chosen != PROVIDER:
            return None
        entry = base.as_dict(
            base.as_dict(_read(folder / "models.json").get("providers")).get(PROVIDER)
        )
        key = parent.get("ANTHROPIC_API_KEY", "").strip()
        if not key:
            login = base.as_dict(_read(folder / "auth.json").get(PROVIDER))
            if login.get("type") == "api_key":
                key = _value(login.get("key"), parent)
        if not key:
            key = _value(entry.get("apiKey"), parent)
        return self.keyed_upstream(spec, key, entry.get("baseUrl"))

    def metered(
        self, inv: base.Invocation, url: str, token: str, upstream: Upstream
    ) -> base.Invocation:
        """Through the meter: pi reads its endpoint from ``models.json`` alone, so the run
        moves to its private folder now (``contained``, sandbox or not), whose models.json
        sends the anthropic provider to the meter with the run's token."""
        out = super().metered(inv, url, token, upstream)
        env = {k: v for k, v in out.env.items() if k != "ANTHROPIC_OAUTH_TOKEN"}
        out = out.but(
            env=env, settings={**out.settings, METER_SETTING: {"baseUrl": url, "apiKey": token}}
        )
        return self.contained(out)[0]

    def build(self, spec: base.RunSpec) -> base.Invocation:
        argv = [self.binary or "pi", "-p", "--mode", "json"]
        argv += base.flags(("--model", spec.model), ("--session", spec.resume))
        argv += base.flags(("--tools", base.tool_list(spec, READ_ONLY_TOOLS)))
        argv += spec.extra_args
        # pi reads a leading "-" as an option and "@x" as a file: a space keeps it a prompt.
        prompt = spec.prompt
        if prompt[:1] in ("-", "@"):
            prompt = " " + prompt
        argv.append(prompt)
        env = self.env(spec)
        env.setdefault("PI_OFFLINE", "1")  # no update check at start-up
        env.setdefault("PI_TELEMETRY", "0")
        return base.Invocation(argv=argv, env=env, cwd=spec.cwd, stdin=None, model=spec.model)

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """--mode json: the session header (type, version, id, cwd) or pi's own types."""
        t = line.get("type")
        if t == "session":
            return isinstance(line.get("version"), int) and isinstance(line.get("cwd"), str)
        return t in EVENT_TYPES

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """pi's settings, custom models, credentials and sessions move to a private copy
        of its folder: the person's files copied in afresh each run, the sessions kept
        for ``--session``."""

        home = containment.provider_home(inv.cwd, self.name)
        if inv.env.get("PI_CODING_AGENT_DIR") == str(home):  # moved there already (metered)
            return inv, [home]
        source = agent_dir(inv.env)
        if source is None:
            return inv, []
        # Metered, the person's login stays outside: the worker has only its token.
        files = base.person_files(inv, source, PERSON_FILES, CREDENTIAL_FILES)
        private = containment.seed_home(home, files, keep=SESSION_FOLDERS)
        meter = inv.settings.get(METER_SETTING)
        if inv.metered and isinstance(meter, dict):
            _metered_models(private / "models.json", meter)
        env = {**inv.env, "PI_CODING_AGENT_DIR": str(private)}
        env.pop("PI_CODING_AGENT_SESSION_DIR", None)
        return inv.but(env=env), [private]

    def parser(self) -> PiParser:
        return PiParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


#: What a private folder is seeded with from the person's own, every run.
PERSON_FILES = ("settings.json", "models.json", "auth.json", "AGENTS.md")
#: What holds the person's login: never copied into a metered run's private folder.
CREDENTIAL_FILES = ("auth.json",)
#: What it keeps from one run to the next: sessions (``--session``).
SESSION_FOLDERS = ("sessions",)
#: ``Invocation.settings`` entry a metered run's models.json is given (baseUrl, apiKey).
METER_SETTING = "meter"


def _metered_models(path: Path, meter: Mapping[str, Any]) -> None:
    """The private copy of models.json with no provider's ``apiKey`` and the anthropic
    provider sent to the meter (written afresh when the person has none)."""
    data = _read(path)
    providers = {
        name: {k: v for k, v in entry.items() if k != "apiKey"}
        if isinstance(entry, dict)
        else entry
        for name, entry in base.as_dict(data.get("providers")).items()
    }
    providers[PROVIDER] = {**base.as_dict(providers.get(PROVIDER)), **meter}
    atomic_write(path, json.dumps({**data, "providers": providers}, indent=2) + "\n")


def _read(path: Path) -> base.JsonObject:
    try:
        data = loader.json_loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _value(value: Any, env: Mapping[str, str]) -> str:
    """A key as pi resolves it: the variable it names when set, else the text itself; a
    ``!command`` is not run here (that key is not metered)."""
    if not isinstance(value, str) or not value.strip() or value.startswith("!"):
        return ""
    return (env.get(value) or value).strip()


def agent_dir(env: Mapping[str, str]) -> Path | None:
    chosen = env.get("PI_CODING_AGENT_DIR")
    if chosen:
        return Path(chosen)
    home = env.get("HOME")
    return Path(home, ".pi", "agent") if home else None


class PiParser(base.StreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[Any, base.ToolCall] = {}
        self.stop_reason: str | None = None
        self.error_message: str | None = None

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        st = self.state
        if t == "session":
            if isinstance(obj.get("id"), str):
                st.session_id = obj["id"]
            return [base.Event("init")]
        if t == "turn_start":
            st.turns += 1
            return []
        if t == "message_end":
            message = base.as_dict(obj.get("message"))
            if message.get("role") == "assistant":
                return self._assistant(message)
            return []
        if t == "tool_execution_start":
            return self._start(obj)
        if t == "tool_execution_end":
            return self._end(obj)
        if t == "auto_retry_start":
            said = str(obj.get("errorMessage") or "")
            return self.retried(said, base.http_status_in(said[:8]))
        if t == "agent_end":
            st.result_seen = True
            st.result_is_error = self.stop_reason in ("error", "aborted")
            return [base.Event("result", text=st.final_message)]
        return []

    def _assistant(self, message: base.JsonObject) -> list[base.Event]:
        st = self.state
        usage = base.as_dict(message.get("usage"))
        st.input_tokens += base.count(usage.get("input"))
        st.output_tokens += base.count(usage.get("output"))
        total = base.as_dict(usage.get("cost")).get("total")
        if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
            st.cost_usd = (st.cost_usd or 0.0) + float(total)
            st.cost_source = COST_SOURCE
        if isinstance(message.get("model"), str):
            st.model = message["model"]
        self.stop_reason = str(message.get("stopReason") or "")
        events: list[base.Event] = []
        if self.stop_reason in ("error", "aborted"):
            self.error_message = str(message.get("errorMessage") or self.stop_reason)
            status = base.http_status_in(self.error_message[:8])
            if status:
                st.api_error_status = status
            return [base.Event("error", text=self.error_message)]
        self.error_message = None
        blocks = message.get("content")
        texts = [
            str(b.get("text"))
            for b in (blocks if isinstance(blocks, list) else [])
            if isinstance(b, dict) and b.get("type") == "text" and str(b.get("text")).strip()
        ]
        if texts:
            st.final_message = clip("\n".join(texts).strip(), 8000)
            events.append(base.Event("message", text=st.final_message))
        return events

    def _start(self, obj: base.JsonObject) -> list[base.Event]:
        args = base.as_dict(obj.get("args"))
        name = str(obj.get("toolName") or "tool")
        call = tools.started(self.state, self._pending, obj.get("toolCallId"), name, args, tools.PI)
        return [base.Event("tool_call", call)]

    def _end(self, obj: base.JsonObject) -> list[base.Event]:
        call = self._pending.pop(obj.get("toolCallId"), None)
        events: list[base.Event] = []
        if call is None:  # an end without its start: count it all the same
            events += self._start(obj)
            call = self._pending.pop(obj.get("toolCallId"), None)
            if call is None:
                return events
        result = base.as_dict(obj.get("result"))
        blocks = result.get("content")
        text = "\n".join(
            str(b.get("text"))
            for b in (blocks if isinstance(blocks, list) else [])
            if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
        if obj.get("isError") is True:
            self.state.settle(call, ok=False, error="\n".join(text.rsplit("\n", 5)[-5:]))
        else:
            self.state.settle(call, ok=True)
        return [*events, base.Event("tool_result", call)]

    def finish(self) -> base.RunState:
        if self.error_message:
            self.state.add_error(self.error_message)
        return self.state


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    if (stopped := base.stopped_outcome(end)) is not None:
        return stopped
    if state.errors:  # pi exits 0 after an API failure: the stream says so
        if state.errors[-1] == "aborted":
            return base.Outcome("crashed", True, "pi aborted its turn")
        return codex.error_outcome(state.errors[-1], state)
    if end.exit_code not in (0, None):
        return base.exited_outcome("pi", end, "no agent_end in the stream")
    if not state.result_seen:
        return base.Outcome("crashed", True, "pi ended without agent_end")
    return base.claimed_outcome(base.unresolved_failure(state))
