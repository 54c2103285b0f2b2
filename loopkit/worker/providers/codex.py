"""OpenAI Codex CLI (``codex exec --json``) as a worker: argv, JSONL events, error classes.

Run:    codex exec --json --sandbox S [-m MODEL] [resume ID] PROMPT     stdin /dev/null always
        (the sandbox goes *before* ``resume``: a resumed session otherwise drops to
        read-only). There is no turn limit flag.
Stream: thread.started (thread_id), turn.started, item.started / item.completed
        (command_execution with exit_code and aggregated_output, file_change with
        changes[{path, kind}], agent_message, error, mcp_tool_call, ...), then
        turn.completed with usage or turn.failed with error.message; ``error`` lines while
        it reconnects.
Errors: 429 ``rate_limit_exceeded`` (a throttle) vs "You've hit your usage limit ... try
        again at <time>" (a usage limit: ``resume_after``); 401/403; 400; 5xx.
Cost:   codex prints none: ``usd`` is null and never trusted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from loopkit.boundary import containment, dialects
from loopkit.boundary.dialects import Upstream
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.worker.providers import base
from loopkit.worker.providers.shell import files_read_by

DEFAULT_SANDBOX = "workspace-write"
VENDOR_HOSTS = ("openai.com", "chatgpt.com")

#: The model slug a rehearsal names: one of codex's own catalog, or codex warns and
#: offers no ``apply_patch`` tool.
CODEX_MODEL = "gpt-5.5"


class CodexProvider(base.Provider):
    name = "codex"
    npm = ("the Codex CLI", "@openai/codex")
    env_names = ("OPENAI_", "CODEX_", "RUST_LOG")
    api = dialects.OPENAI.with_keys("CODEX_API_KEY")

    routes = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "CODEX_API_KEY",
    )

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """Writes ``home/config.toml`` for ``codex exec`` (:func:`rehearsal_config`);
        ``CODEX_HOME`` and the key's variable. ``retries`` caps its request retries and
        (unless ``stream_retries`` is given) its stream reconnects."""
        r.home.mkdir(parents=True, exist_ok=True)
        text = rehearsal_config(
            r.base_url,
            model=r.model or CODEX_MODEL,
            retries=r.retries or 0,
            stream_retries=r.stream_retries,
            env_key=REHEARSAL_KEY_VAR,
        )
        atomic_write(r.home / "config.toml", text)
        return {"CODEX_HOME": str(r.home), REHEARSAL_KEY_VAR: r.api_key}

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """The active ``[model_providers.X]`` of config.toml when it names its key's
        variable (``env_key``) and base URL; else the built-in OpenAI provider's."""
        parent = spec.parent_env()
        config = provider_config(parent)
        var = config.get("env_key")
        if var and config.get("name"):
            key = parent.get(var, "")
            if not key.strip():
                return None
            url = spec.upstream or config.get("base_url") or "https://api.openai.com/v1"
            assert self.api is not None
            return Upstream(url, key, var, self.api, section=config["name"])
        return super().upstream(spec)

    def metered(
        self, inv: base.Invocation, url: str, token: str, upstream: Upstream
    ) -> base.Invocation:
        """Through the meter: the key's variable holds the token; the base URL is the
        meter's -- in ``OPENAI_BASE_URL`` for the built-in provider, as a ``-c`` override of
        the config's ``[model_providers.X] base_url`` otherwise."""
        out = super().metered(inv, url, token, upstream)
        if upstream.section is None:
            return out
        env = dict(out.env)
        env.pop("OPENAI_BASE_URL", None)
        argv = list(out.argv)
        at = argv.index("exec") + 1 if "exec" in argv else 1
        argv[at:at] = ["-c", f"model_providers.{upstream.section}.base_url={json.dumps(url)}"]
        return out.but(argv=argv, env=env)

    def build(self, spec: base.RunSpec) -> base.Invocation:
        sandbox = "read-only" if spec.read_only else (spec.sandbox or DEFAULT_SANDBOX)
        argv = [self.binary or "codex", "exec", "--json", "--sandbox", sandbox]
        argv += ["--skip-git-repo-check"]
        if spec.model:
            argv += ["-m", spec.model]
        argv += spec.extra_args
        if spec.resume:
            argv += ["resume", spec.resume]
        # "--" ends the options: a prompt starting with "-" is still the prompt.
        argv += ["--", spec.prompt]
        parent = spec.parent_env()
        config = provider_config(parent)
        extra = [config["env_key"]] if config.get("env_key") else []
        env = self.env(spec, extra=extra)
        base_url = config.get("base_url") or parent.get("OPENAI_BASE_URL")
        return base.Invocation(
            argv=argv,
            env=env,
            cwd=spec.cwd,
            stdin=None,
            cost_trusted=base.is_vendor_url(base_url, VENDOR_HOSTS),
            model=spec.model or config.get("model"),
        )

    options = ("sandbox", "env_allow", "resume", "extra_args")

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """exec --json events: its own types (thread.started, item.completed, ...) -- not
        any dotted type, other CLIs print those -- and a bare ``{type: error, message}``
        (an error line of another CLI carries more)."""
        t = line.get("type")
        if t == "error":
            return set(line) == {"type", "message"} and isinstance(line["message"], str)
        return t in _EVENT_TYPES

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """Codex writes its sessions under ``CODEX_HOME`` (else ``~/.codex``). Its own
        sandbox cannot start inside loopkit's as root (no uid map), and loopkit's is the
        boundary: inside it, codex runs with ``--sandbox danger-full-access``."""
        argv = list(inv.argv)
        if "--sandbox" in argv:
            argv[argv.index("--sandbox") + 1] = "danger-full-access"
        home = inv.env.get("CODEX_HOME") or (
            os.path.join(inv.env["HOME"], ".codex") if inv.env.get("HOME") else None
        )
        if not home:
            return inv.but(argv=argv), []
        # A private CODEX_HOME (containment.provider_home): the person's config and
        # credentials copied in afresh each run, the sessions kept for a resume; a
        # `notify` program or an instruction the worker writes never reaches the person.

        files = base.person_files(inv, Path(home), PERSON_FILES, CREDENTIAL_FILES)
        private = containment.seed_home(
            containment.provider_home(inv.cwd, self.name), files, keep=SESSION_FOLDERS
        )
        env = {**inv.env, "CODEX_HOME": str(private)}
        return inv.but(argv=argv, env=env), [private]

    def parser(self) -> CodexParser:
        return CodexParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


#: What a private CODEX_HOME is seeded with from the person's own, every run.
PERSON_FILES = ("config.toml", "auth.json", "AGENTS.md")
#: What holds the person's login: never copied into a metered run's private home.
CREDENTIAL_FILES = ("auth.json",)
#: What it keeps from one run to the next: sessions (``codex exec resume``) and state.
SESSION_FOLDERS = ("sessions", "archived_sessions", "*.sqlite", "*.sqlite-*", "log")


def provider_config(environ: Any) -> dict[str, str]:
    """The active ``[model_providers.X]`` of CODEX_HOME/config.toml: base_url and env_key."""
    home = environ.get("CODEX_HOME") or os.path.join(environ.get("HOME", "~"), ".codex")
    path = Path(home) / "config.toml"
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    try:
        import tomllib

        data = tomllib.loads(raw)
    except ImportError:  # Python 3.10: the few keys we need, by pattern
        return _config_by_pattern(raw)
    except ValueError:
        return {}
    out = {"model": str(data["model"])} if isinstance(data.get("model"), str) else {}
    name = data.get("model_provider")
    providers = data.get("model_providers") or {}
    chosen = providers.get(name) if isinstance(name, str) else None
    if isinstance(chosen, dict):
        out["name"] = str(name)
        out.update(
            {k: str(chosen[k]) for k in ("base_url", "env_key") if isinstance(chosen.get(k), str)}
        )
    return out


def _config_by_pattern(raw: str) -> dict[str, str]:
    top = re.search(r'^\s*model\s*=\s*"([^"]+)"', raw.split("[", 1)[0], re.M)
    m = re.search(r'^\s*model_provider\s*=\s*"([^"]+)"', raw, re.M)
    if not m:
        return {"model": top.group(1)} if top else {}
    section = re.search(
        rf"^\[model_providers\.{re.escape(m.group(1))}\]\s*$(.*?)(?=^\[|\Z)", raw, re.M | re.S
    )
    if not section:
        return {}
    out: dict[str, str] = {"model": top.group(1)} if top else {}
    out["name"] = m.group(1)
    for key in ("base_url", "env_key"):
        km = re.search(rf'^\s*{key}\s*=\s*"([^"]*)"', section.group(1), re.M)
        if km:
            out[key] = km.group(1)
    return out


class CodexParser(base.StreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[Any, base.ToolCall] = {}
        self.turn_failed: str | None = None
        self.turn_completed = False

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        st = self.state
        if t == "item.completed" or t == "item.started" or t == "item.updated":
            item = obj.get("item")
            if isinstance(item, dict):
                return self._item(item, done=t == "item.completed")
            return []
        if t == "thread.started":
            st.session_id = obj.get("thread_id") or st.session_id
            return [base.Event("init")]
        if t == "turn.started":
            st.turns += 1
            return []
        if t == "turn.completed":
            st.result_seen = True
            st.result_is_error = False
            self.turn_completed = True
            usage = obj.get("usage")
            if isinstance(usage, dict):
                st.input_tokens += base.count(usage.get("input_tokens"))
                st.output_tokens += base.count(usage.get("output_tokens"))
            return [base.Event("result", text=st.final_message)]
        if t == "turn.failed":
            st.result_seen = True
            st.result_is_error = True
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else None
            self.turn_failed = str(msg or "turn failed")
            st.add_error(self.turn_failed)
            return [base.Event("error", text=self.turn_failed)]
        if t == "error":
            msg = str(obj.get("message") or "")
            if re.match(r"^\s*Reconnecting", msg):
                return self.retried(msg, base.http_status_in(msg))
            st.add_error(msg)
            return [base.Event("error", text=msg)]
        return []

    def _item(self, item: base.JsonObject, *, done: bool) -> list[base.Event]:
        kind = item.get("type")
        if kind in _TOOL_ITEMS:
            iid = item.get("id")
            call = self._pending.pop(iid, None) if iid is not None else None
            if call is not None:  # the usual case: started earlier, now done
                if not done:
                    self._pending[iid] = call
                    return []
                ok, error = _item_result(item)
                self.state.settle(call, ok=ok, error=error)
                return [base.Event("tool_result", call)]
            call = _tool_call(item)
            self.state.add_tool(call)
            if not done:
                if iid is not None:
                    self._pending[iid] = call
                return [base.Event("tool_call", call)]
            ok, error = _item_result(item)
            self.state.settle(call, ok=ok, error=error)
            return [base.Event("tool_call", call), base.Event("tool_result", call)]
        if kind == "agent_message":
            return self.message(item.get("text")) if done else []
        if kind == "error" and done:
            msg = str(item.get("message") or "error")
            self.state.add_error(msg)
            return [base.Event("error", text=msg)]
        return []


#: The event types of ``codex exec --json``.
_EVENT_TYPES = frozenset(
    (
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    )
)

_TOOL_ITEMS = frozenset(("command_execution", "file_change", "mcp_tool_call", "web_search"))


def _tool_call(item: base.JsonObject) -> base.ToolCall:
    kind = str(item.get("type"))
    iid = item.get("id")
    if kind == "command_execution":
        command = str(item.get("command") or "")
        return base.ToolCall(
            iid,
            "shell",
            {"command": command if len(command) <= 2000 else clip(command, 2000)},
            command=command,
            files_read=files_read_by(command),
        )
    if kind == "file_change":
        raw = item.get("changes")
        changes = [c for c in raw if isinstance(c, dict)][:200] if isinstance(raw, list) else []
        return base.ToolCall(
            iid,
            "apply_patch",
            {"changes": changes},
            files_written=[str(c["path"]) for c in changes if c.get("path")],
        )
    if kind == "mcp_tool_call":
        name = f"mcp:{item.get('server')}/{item.get('tool')}"
        return base.ToolCall(id=iid, name=name, input=base.clip_input(item.get("arguments") or {}))
    return base.ToolCall(id=iid, name=kind, input=base.clip_input({"query": item.get("query")}))


def _item_result(item: base.JsonObject) -> tuple[bool, str | None]:
    status = item.get("status")
    if item.get("type") == "command_execution":
        code = item.get("exit_code")
        if (isinstance(code, int) and code != 0) or status in ("failed", "declined"):
            out = str(item.get("aggregated_output") or "")[-2000:].strip()
            tail = "\n".join(out.rsplit("\n", 5)[-5:])
            return False, f"exit {code}: {tail}" if tail else f"exit {code}"
        return True, None
    if status in ("failed", "declined"):
        err = item.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        return False, str(msg or f"{item.get('type')} {status}")
    return True, None


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    if (stopped := base.stopped_outcome(end)) is not None:
        return stopped
    failed = state.result_is_error or (state.errors and not state.result_seen)
    if failed:
        return error_outcome(state.errors[-1] if state.errors else "turn failed", state)
    if state.result_seen and end.exit_code in (0, None):
        return base.Outcome("completed", False, None, claimed_complete=True)
    tail = end.stderr_tail.strip()
    last = tail.splitlines()[-1] if tail else "no turn.completed in the stream"
    if re.search(r"unexpected argument|invalid value|Usage:|no rollout found|not found", tail):
        return base.Outcome("invalid_request", True, clip(last, 500))
    if re.search(r"401|403|Unauthorized|api key|OPENAI_API_KEY", tail, re.I):
        return base.Outcome("auth_error", True, clip(last, 500))
    return base.Outcome("crashed", True, clip(f"codex exited {end.exit_code}: {last}", 500))


_USAGE_LIMIT = re.compile(r"usage limit|usage_limit|insufficient_quota|quota exceeded", re.I)


def error_outcome(message: str, state: base.RunState) -> base.Outcome:
    """A run that ended on the API error ``message``, in codex's classes."""
    reason, resume_after = error_class(message, state.api_error_status)
    return base.Outcome(reason, True, clip(message, 500), resume_after)


def error_class(message: str, status: int | None = None) -> tuple[str, str | None]:
    """(stop_reason, resume_after) from a codex error message."""
    if _USAGE_LIMIT.search(message):
        return "usage_limit", parse_reset(message)
    found = base.http_status_in(message) or status
    if found == 429 or re.search(r"rate.?limit|too many requests", message, re.I):
        return "rate_limited", None
    if found in (401, 403) or re.search(
        r"unauthori[sz]ed|forbidden|api key|log ?in", message, re.I
    ):
        return "auth_error", None
    if found in (400, 404, 413, 422) or re.search(r"invalid_request|bad request", message, re.I):
        return "invalid_request", None
    return "api_error", None


_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_reset(message: str, *, now: datetime | None = None) -> str | None:
    """The reset time in a usage-limit message, as an ISO UTC timestamp, or None.

    Understands ``resets_in_seconds: N``, ``resets_at: EPOCH``, ``try again in 2 hours
    5 minutes`` / ``resets in 1d 5h`` and ``try again at [Jul 9th, 2026] 1:47 AM`` (local
    time, as the CLIs print it).
    """
    now = now or datetime.now(timezone.utc)
    m = re.search(r"resets?_in_seconds\W+(\d+)", message)
    if m:
        return _iso(now + timedelta(seconds=int(m.group(1))))
    m = re.search(r"resets?_at\W+(\d{10})", message)
    if m:
        return _iso(datetime.fromtimestamp(int(m.group(1)), tz=timezone.utc))
    m = re.search(r"(?:try again|resets?) in ((?:\s*\d+\s*[a-z]+,?(?:\s*and)?)+)", message, re.I)
    if m:
        total = 0
        for n, unit in re.findall(r"(\d+)\s*([a-z]+)", m.group(1), re.I):
            u = unit.lower()
            key = "m" if u.startswith("min") else u[0]
            if key == "m" and u.startswith("mo"):
                continue
            total += int(n) * _UNITS.get(key, 0)
        if total:
            return _iso(now + timedelta(seconds=total))
    m = re.search(
        rf"(?:try again at|resets(?: at)?)\s+(?:(({_MONTHS})[a-z]*\s+(\d{{1,2}})(?:st|nd|rd|th)?,?"
        rf"\s+(\d{{4}}),?\s+))?(\d{{1,2}})(?::(\d\d))?\s*([AaPp][Mm])",
        message,
    )
    if m:
        hour = int(m.group(5)) % 12 + (12 if m.group(7).lower() == "pm" else 0)
        minute = int(m.group(6) or 0)
        local_now = now.astimezone()
        if m.group(1):
            month = _MONTHS.split("|").index(m.group(2)) + 1
            when = local_now.replace(
                year=int(m.group(4)), month=month, day=int(m.group(3)), hour=hour, minute=minute
            )
        else:
            when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if when <= local_now:
                when += timedelta(days=1)
        return _iso(when.replace(second=0, microsecond=0))
    return None


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The variable a rehearsal's ``config.toml`` names for the key.
REHEARSAL_KEY_VAR = "LOOPKIT_MODEL_KEY"


def rehearsal_config(
    base_url: str,
    *,
    model: str = CODEX_MODEL,
    retries: int = 0,
    stream_retries: int | None = None,
    provider: str = "loopkit",
    env_key: str = REHEARSAL_KEY_VAR,
) -> str:
    """The ``config.toml`` text that sends codex to ``base_url`` over the Responses API."""
    url = base_url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    streams = retries if stream_retries is None else stream_retries
    return (
        f"model = {_toml(model)}\n"
        f"model_provider = {_toml(provider)}\n"
        "\n"
        f"[model_providers.{provider}]\n"
        f"name = {_toml(provider)}\n"
        f"base_url = {_toml(url)}\n"
        f"env_key = {_toml(env_key)}\n"
        'wire_api = "responses"\n'
        f"request_max_retries = {int(retries)}\n"
        f"stream_max_retries = {int(streams)}\n"
        "\n"
        "# Offline, analytics cost about 5 s a run and plugins reach for outside hosts.\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        "[features]\n"
        "plugins = false\n"
    )


def _toml(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
