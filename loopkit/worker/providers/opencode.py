"""opencode (``opencode run --format json``) as a worker: argv, JSON events, error classes.

Run:    opencode run --format json --print-logs --log-level ERROR [-m PROVIDER/MODEL]
        [--session ID] -- PROMPT                                           stdin /dev/null
        Settings travel in ``OPENCODE_CONFIG_CONTENT`` (merged over the person's own):
        the turn cap is ``agent.build.steps`` (at the cap opencode tells the model, in a
        message the stream never shows, to answer in text only, and goes on: more steps
        than the cap is ``max_turns``),
        a judge's ``permission`` denies edit, bash and webfetch (the tools vanish), and
        ``snapshot: false`` keeps opencode from copying the work tree into its data
        folder every step. Approvals: a tool opencode would ask about (a path outside the
        project) is auto-rejected in ``run`` mode, and the run ends there.
Stream: one JSON object per line, each with ``type``, ``timestamp`` and ``sessionID``:
        step_start, text (``part.text``), tool_use (``part.tool``, ``part.state`` with
        ``status`` completed | error, ``input``, ``output``, ``metadata.exit`` for bash;
        a tool the model named that does not exist is ``tool: invalid``), step_finish
        (``part.reason`` stop | tool-calls | length, ``tokens``, ``cost``), and ``error``
        (``error.name``, ``error.data.message``, ``statusCode``) once retries are spent.
Retries: silent on stdout (a 500 that never clears is about 100 s of nothing, then one
        ``error``); with ``--print-logs`` each failed request is one ``stream error`` line
        on stderr, which is where ``api_retries`` is counted from.
Home:   settings in ``$XDG_CONFIG_HOME/opencode`` (opencode.json, AGENTS.md), credentials
        and sessions in ``$XDG_DATA_HOME/opencode``; in loopkit's runs both are a private
        copy (``contained``), never the work tree and never the person's own.
Meter:  the anthropic provider's key (``ANTHROPIC_API_KEY``, else the person's
        ``provider.anthropic.options.apiKey``, else their ``auth.json``) and base URL
        (``options.baseURL``); metered, ``OPENCODE_CONFIG_CONTENT`` (merged over every
        config file, the project's too) points ``options`` at the meter with the run's
        token, and the private copies of the config lose every ``apiKey`` and the login.
Cost:   ``step_finish.cost`` is opencode's price table for the model *name*: recorded,
        never trusted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit.boundary import containment
from loopkit.boundary.dialects import Api, Upstream
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.worker.providers import base, codex, tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.dialects import Upstream

DEFAULT_MAX_TURNS = 30
#: The provider whose API the meter stands in for, and its endpoint when no baseURL is set.
PROVIDER = "anthropic"
DEFAULT_UPSTREAM = "https://api.anthropic.com/v1"
#: What a judge may not use: the tools disappear from the model's list.
READ_ONLY_PERMISSION = {"edit": "deny", "bash": "deny", "webfetch": "deny", "task": "deny"}
COST_SOURCE = "opencode price table (not trusted)"
#: The stream's event types; every line also carries ``sessionID`` and ``timestamp``.
EVENT_TYPES = frozenset(("step_start", "step_finish", "text", "tool_use", "reasoning", "error"))


class OpencodeProvider(base.Provider):
    name = "opencode"
    npm = ("opencode", "opencode-ai")
    env_names = ("OPENCODE_", "XDG_CONFIG_HOME", "XDG_DATA_HOME")

    options = ("max_turns", "env_allow", "resume", "extra_args")

    routes = (
        "OPENCODE_CONFIG",
        "OPENCODE_CONFIG_CONTENT",
        "OPENCODE_CONFIG_DIR",
    )
    #: The model a rehearsal names: ``provider/model``, the provider's base URL redirected.
    rehearsal_model = "anthropic/claude-sonnet-4-5"

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """Writes ``home/.config/opencode/opencode.json`` sending opencode to the server
        (the Anthropic Messages API, ``options.baseURL``); ``HOME`` and the XDG folders
        under ``home``, the catalog fetch and autoupdate off. Its retries are its own."""
        model = r.model or self.rehearsal_model
        options = {"baseURL": r.url + "/v1", "apiKey": r.api_key}
        config = {
            "model": model,
            "autoupdate": False,
            "share": "disabled",
            "provider": {model.split("/", 1)[0]: {"options": options}},
        }
        target = r.home / ".config" / "opencode" / "opencode.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, json.dumps(config, indent=2) + "\n")
        return {
            "HOME": str(r.home),
            "XDG_CONFIG_HOME": str(r.home / ".config"),
            "XDG_DATA_HOME": str(r.home / ".local" / "share"),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
        }

    def __init__(self) -> None:
        self.steps: int | None = None  # the turn cap of the last build, for its parser

    api = Api("anthropic", ("ANTHROPIC_API_KEY",), None, DEFAULT_UPSTREAM)

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """The key and endpoint of opencode's ``anthropic`` provider: the environment's
        ``ANTHROPIC_API_KEY``, else the person's own config (``OPENCODE_CONFIG_CONTENT``,
        their global opencode.json, their ``auth.json``); never a project's opencode.json,
        which the worker writes. None when the run's model is another provider's."""
        parent = spec.parent_env()
        configs = person_configs(parent)
        model = spec.model or next((c["model"] for c in configs if c.get("model")), None)
        if isinstance(model, str) and "/" in model and model.split("/", 1)[0] != PROVIDER:
            return None
        options: base.JsonObject = {}
        for config in reversed(configs):  # the later wins, as opencode merges them
            options.update(
                base.as_dict(
                    base.as_dict(base.as_dict(config.get("provider")).get(PROVIDER)).get("options")
                )
            )
        key = parent.get("ANTHROPIC_API_KEY", "").strip()
        if not key:
            key = _value(options.get("apiKey"), parent)
        if not key:
            key = _login(parent)
        return self.keyed_upstream(spec, key, options.get("baseURL"))

    def metered(
        self, inv: base.Invocation, url: str, token: str, upstream: Upstream
    ) -> base.Invocation:
        """Through the meter: ``OPENCODE_CONFIG_CONTENT``, merged last, gives the
        anthropic provider the meter's URL and the run's token (over any project config
        the worker writes); no ``apiKey`` of the person's is passed on. The file
        ``OPENCODE_CONFIG`` names (read from outside the sandbox) travels in it too,
        without its keys."""
        out = super().metered(inv, url, token, upstream)
        env = dict(out.env)
        named = env.pop("OPENCODE_CONFIG", None)
        content = _json_object(env.get("OPENCODE_CONFIG_CONTENT"))
        config = _unkeyed(_merged(_read_config(Path(named)), content) if named else content)
        provider = base.as_dict(config.get("provider"))
        entry = base.as_dict(provider.get(PROVIDER))
        entry["options"] = {**base.as_dict(entry.get("options")), "baseURL": url, "apiKey": token}
        config["provider"] = {**provider, PROVIDER: entry}
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config, separators=(",", ":"))
        return out.but(env=env)

    def build(self, spec: base.RunSpec) -> base.Invocation:
        self.steps = spec.max_turns or DEFAULT_MAX_TURNS
        argv = [self.binary or "opencode", "run", "--format", "json"]
        argv += ["--print-logs", "--log-level", "ERROR"]
        argv += [*base.flags(("-m", spec.model), ("--session", spec.resume)), *spec.extra_args]
        argv += ["--", spec.prompt]
        env = self.env(spec)
        env["OPENCODE_CONFIG_CONTENT"] = run_config(spec, env.get("OPENCODE_CONFIG_CONTENT"))
        env.setdefault("OPENCODE_DISABLE_AUTOUPDATE", "1")
        return base.Invocation(argv=argv, env=env, cwd=spec.cwd, stdin=None, model=spec.model)

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """run --format json events: a known type with a string ``sessionID``."""
        return line.get("type") in EVENT_TYPES and isinstance(line.get("sessionID"), str)

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """opencode's settings and sessions move to a private home: the person's settings
        and credentials copied in afresh each run, its sessions kept for ``--session``;
        nothing the worker writes there reaches the person's own opencode."""

        config, data = config_dirs(inv.env)
        if config is None or data is None:
            return inv, []
        files = {f"config/opencode/{n}": config / "opencode" / n for n in PERSON_CONFIG}
        # Metered, the person's login stays outside: the worker has only its token.
        if not inv.metered:
            files.update({f"data/opencode/{n}": data / "opencode" / n for n in PERSON_DATA})
        private = containment.seed_home(
            containment.provider_home(inv.cwd, self.name), files, keep=SESSION_FOLDERS
        )
        if inv.metered:
            for name in CONFIG_FILES:
                _unkeyed_file(private / "config" / "opencode" / name)
        env = {
            **inv.env,
            "XDG_CONFIG_HOME": str(private / "config"),
            "XDG_DATA_HOME": str(private / "data"),
            "XDG_STATE_HOME": str(private / "state"),
            "XDG_CACHE_HOME": str(private / "cache"),
        }
        return inv.but(env=env), [private]

    def parser(self) -> OpencodeParser:
        return OpencodeParser(max_steps=self.steps)

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


#: opencode's global config files, in the order it merges them (the later wins).
CONFIG_FILES = ("config.json", "opencode.json", "opencode.jsonc")
#: The person's files a private home is seeded with, every run.
PERSON_CONFIG = ("opencode.json", "opencode.jsonc", "AGENTS.md")
PERSON_DATA = ("auth.json",)
#: What a private home keeps from one run to the next: sessions (``--session``), plugins.
SESSION_FOLDERS = ("data", "state", "cache")


def config_dirs(env: Mapping[str, str]) -> tuple[Path | None, Path | None]:
    """The person's XDG config and data folders as opencode finds them."""
    home = env.get("HOME")
    config = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
    data = env.get("XDG_DATA_HOME") or (os.path.join(home, ".local", "share") if home else None)
    return (Path(config) if config else None, Path(data) if data else None)


def person_configs(env: Mapping[str, str]) -> list[base.JsonObject]:
    """The person's own opencode configs, the one that wins first: ``OPENCODE_CONFIG_CONTENT``,
    the file ``OPENCODE_CONFIG`` names, then the global files (never a project's)."""
    found = [_json_object(env.get("OPENCODE_CONFIG_CONTENT"))]
    named = env.get("OPENCODE_CONFIG")
    if named:
        found.append(_read_config(Path(named)))
    config, _ = config_dirs(env)
    if config is not None:
        found += [_read_config(config / "opencode" / n) for n in reversed(CONFIG_FILES)]
    return [c for c in found if c]


def _login(env: Mapping[str, str]) -> str:
    """The API key ``opencode auth login`` stored for the provider, or ""."""
    _, data = config_dirs(env)
    if data is None:
        return ""
    entry = base.as_dict(_read_config(data / "opencode" / "auth.json").get(PROVIDER))
    key = entry.get("key")
    return key.strip() if entry.get("type") == "api" and isinstance(key, str) else ""


_TEMPLATE = re.compile(r"^\{(env|file):([^}]+)\}$")


def _value(value: Any, env: Mapping[str, str]) -> str:
    """A config value as opencode reads it: ``{env:NAME}`` and ``{file:path}`` resolved."""
    if not isinstance(value, str):
        return ""
    m = _TEMPLATE.match(value.strip())
    if m is None:
        return value.strip()
    if m.group(1) == "env":
        return env.get(m.group(2), "").strip()
    try:
        return Path(os.path.expanduser(m.group(2))).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _unkeyed(config: base.JsonObject) -> base.JsonObject:
    """``config`` without an ``apiKey`` in any provider's options."""
    providers = config.get("provider")
    if not isinstance(providers, dict):
        return config
    out: base.JsonObject = {}
    for name, entry in providers.items():
        if isinstance(entry, dict) and isinstance(entry.get("options"), dict):
            options = {k: v for k, v in entry["options"].items() if k != "apiKey"}
            entry = {**entry, "options": options}
        out[name] = entry
    return {**config, "provider": out}


def _unkeyed_file(path: Path) -> None:
    """The private copy of a config file without its keys (rewritten as plain JSON); one
    that cannot be read as JSON is not kept."""
    if not path.exists():
        return
    config = _read_config(path)
    if not config and path.read_bytes().strip() not in (b"", b"{}"):
        path.unlink()
        return
    atomic_write(path, json.dumps(_unkeyed(config), indent=2) + "\n")


def _read_config(path: Path) -> base.JsonObject:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return _json_object(text, comments=True)


def _json_object(text: str | None, *, comments: bool = False) -> base.JsonObject:
    """The JSON object in ``text`` (JSONC: comments and trailing commas, with
    ``comments``), else {}."""
    if not text:
        return {}
    if comments:
        for pattern in (_COMMENT, _TRAILING_COMMA):
            text = pattern.sub(lambda m: m.group(1) or "", text)
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


#: A JSON string (kept as it is), or a // or /* */ comment (dropped).
_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)
#: A JSON string (kept), or a comma before a closing bracket (dropped).
_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*")|,(?=\s*[}\]])')


def _merged(under: base.JsonObject, over: base.JsonObject) -> base.JsonObject:
    """``over`` laid over ``under``, objects merged key by key (as opencode merges)."""
    out = dict(under)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def run_config(spec: base.RunSpec, given: str | None) -> str:
    """``OPENCODE_CONFIG_CONTENT`` for one run: the person's (when it is a JSON object)
    with loopkit's turn cap, permissions and quiet settings laid over it."""
    person: base.JsonObject = {}
    if given:
        try:
            parsed = json.loads(given)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            person = parsed
    agent = dict(person.get("agent") or {})
    build = dict(agent.get("build") or {})
    build["steps"] = spec.max_turns or DEFAULT_MAX_TURNS
    agent["build"] = build
    agent["title"] = {**dict(agent.get("title") or {}), "disable": True}  # one request less
    out = {**person, "agent": agent, "snapshot": False, "autoupdate": False, "share": "disabled"}
    if spec.read_only:
        out["permission"] = {**dict(person.get("permission") or {}), **READ_ONLY_PERMISSION}
    return json.dumps(out, separators=(",", ":"))


class OpencodeParser(base.StreamParser):
    """``max_steps``: the cap the run was built with. At the cap opencode asks the model
    for text only (a message the stream never shows) and takes at least one more step,
    so more steps than the cap mean the cap was reached."""

    def __init__(self, max_steps: int | None = None) -> None:
        super().__init__()
        self.last_reason: str | None = None
        self.max_steps = max_steps

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        st = self.state
        sid = obj.get("sessionID")
        first = st.session_id is None and isinstance(sid, str)
        if first:
            st.session_id = sid
        events = [base.Event("init")] if first else []
        part = base.as_dict(obj.get("part"))
        if t == "step_start":
            st.turns += 1
            self.last_reason = None
        elif t == "text":
            events += self.message(part.get("text"))
        elif t == "tool_use":
            events += self._tool(part)
        elif t == "step_finish":
            self.last_reason = str(part.get("reason") or "")
            tokens = part.get("tokens")
            if isinstance(tokens, dict):
                st.input_tokens += base.count(tokens.get("input"))
                st.output_tokens += base.count(tokens.get("output"))
            cost = part.get("cost")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
                st.cost_usd = (st.cost_usd or 0.0) + float(cost)
                st.cost_source = COST_SOURCE
            if self.last_reason == "stop":
                st.result_seen = True
                st.result_is_error = False
                events.append(base.Event("result", text=st.final_message))
        elif t == "error":
            err = base.as_dict(obj.get("error"))
            data = base.as_dict(err.get("data"))
            message = str(data.get("message") or err.get("name") or "error")
            status = data.get("statusCode")
            if isinstance(status, int) and not isinstance(status, bool):
                st.api_error_status = status
            st.add_error(f"{err.get('name') or 'error'}: {message}")
            st.result_is_error = True
            events.append(base.Event("error", text=message))
        return events

    def finish(self) -> base.RunState:
        if self.max_steps is not None and self.state.turns > self.max_steps:
            self.state.terminal_reason = "max_turns"
        return self.state

    def _tool(self, part: base.JsonObject) -> list[base.Event]:
        state = base.as_dict(part.get("state"))
        raw = base.as_dict(state.get("input"))
        name = str(part.get("tool") or "tool")
        call = base.ToolCall(part.get("callID"), name, base.clip_input(raw))
        if name == "invalid":  # the model named a tool opencode does not have
            call.name = str(raw.get("tool") or "invalid")
            self.state.add_tool(call)
            self.state.settle(call, ok=False, error=str(raw.get("error") or "no such tool"))
            return [base.Event("tool_call", call), base.Event("tool_result", call)]
        tools.describe(call, raw, tools.OPENCODE)
        self.state.add_tool(call)
        status = state.get("status")
        if status == "error":
            self.state.settle(call, ok=False, error=str(state.get("error") or "tool error"))
            if _REJECTED.search(str(state.get("error") or "")):
                self.state.permission_denials.append({"tool": name, "input": call.input})
        elif status == "completed":
            meta = base.as_dict(state.get("metadata"))
            code = meta.get("exit")
            if name == "bash" and isinstance(code, int) and code != 0:
                out = str(state.get("output") or "")[-2000:].strip()
                tail = "\n".join(out.rsplit("\n", 5)[-5:])
                self.state.settle(call, ok=False, error=f"exit {code}: {tail}")
            else:
                self.state.settle(call, ok=True)
        else:
            return [base.Event("tool_call", call)]
        return [base.Event("tool_call", call), base.Event("tool_result", call)]


_REJECTED = re.compile(r"rejected permission|permission.*denied|not allowed", re.I)
#: One failed model request, as ``--print-logs`` shows it (the title agent's excluded).
_STREAM_ERROR = re.compile(r'^.*message="stream error"(?!.*small=true).*$', re.M)


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    failures = len(_STREAM_ERROR.findall(end.stderr_tail))
    if failures and not state.api_retries:
        state.api_retries = failures - 1 if state.errors else failures
    if (stopped := base.stopped_outcome(end)) is not None:
        return stopped
    if state.errors:
        message = state.errors[-1]
        reason, resume_after = codex.error_class(message, state.api_error_status)
        if state.api_error_status:
            message = f"HTTP {state.api_error_status}: {message}"
        return base.Outcome(reason, True, clip(message, 500), resume_after)
    if end.exit_code not in (0, None):
        last = base.last_line(end, "no error event in the stream")
        return base.Outcome("crashed", True, clip(f"opencode exited {end.exit_code}: {last}", 500))
    if state.terminal_reason == "max_turns":
        return base.Outcome(
            "max_turns", True, f"reached the step limit after {state.turns - 1} steps"
        )
    if state.permission_denials:
        tools = sorted({str(d.get("tool")) for d in state.permission_denials})
        return base.Outcome("permission_denied", False, f"opencode rejected: {', '.join(tools)}")
    if not state.result_seen:
        return base.Outcome("crashed", True, "opencode ended without a final answer")
    return base.claimed_outcome(base.unresolved_failure(state))
