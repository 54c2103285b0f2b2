"""Claude Code (``claude -p``) as a worker: argv, stream-json events, error classes.

Run:    claude -p PROMPT --output-format stream-json --verbose --max-turns N
        [--model M] [--max-budget-usd X] (--permission-mode acceptEdits | --allowedTools ...)
        [--resume ID]                                                  stdin /dev/null
Stream: system/init, assistant (one content block per line), user (tool results),
        system/api_retry, and one final ``result`` (``--output-format json`` prints the
        ``result`` object alone: the same parser reads it).
Errors: ``result.is_error`` with ``api_error_status`` (an API failure after retries says
        ``subtype: success`` -- never trust ``subtype`` alone), ``subtype:
        error_max_turns`` / ``terminal_reason: max_turns``, ``permission_denials``.
Cost:   ``total_cost_usd`` is Claude Code's own price table for the model *name*: trusted
        only when every base URL it would use (ANTHROPIC_BASE_URL, the Bedrock/Vertex ones,
        from the environment or the ``env`` of its settings files) is unset or the vendor's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from loopkit import loader
from loopkit.boundary import containment, dialects
from loopkit.boundary.dialects import Upstream, find_upstream
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.worker.acp import agents
from loopkit.worker.providers import base, codex, tools

DEFAULT_MAX_TURNS = 30
READ_ONLY_TOOLS = ("Read", "Glob", "Grep")
WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "WebFetch", "WebSearch")
VENDOR_HOSTS = ("anthropic.com",)
#: Base URLs Claude Code reads, with the hosts that are the real vendor's for each.
BASE_URLS = {
    "ANTHROPIC_BASE_URL": VENDOR_HOSTS,
    "ANTHROPIC_BEDROCK_BASE_URL": ("amazonaws.com",),
    "ANTHROPIC_VERTEX_BASE_URL": ("googleapis.com",),
}
MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
COST_SOURCE = "claude-code price table"


class ClaudeProvider(base.Provider):
    name = "claude"
    npm = ("Claude Code", "@anthropic-ai/claude-code")
    env_names = (
        *agents.CLAUDE_ENV,
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "API_TIMEOUT_MS",
        "IS_SANDBOX",
    )

    api = dialects.ANTHROPIC.with_keys("ANTHROPIC_AUTH_TOKEN")

    routes = (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
        "CLAUDE_CONFIG_DIR",
    )

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """``HOME``, the base URL and key, the side traffic off (without it the CLI
        reaches for outside hosts and asks for a session title); ``retries`` caps its own
        (its default, 10 with backoff, makes an error that never clears take minutes)."""
        r.home.mkdir(parents=True, exist_ok=True)
        env = {
            "HOME": str(r.home),
            "ANTHROPIC_BASE_URL": r.url,
            "ANTHROPIC_API_KEY": r.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        if r.retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(r.retries)
        return env

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """The key and base URL Claude Code would use: the environment's, with the ``env``
        of the person's own settings (their config folder's, the managed one) on top, as
        Claude Code applies them. Never a project's ``.claude/`` settings: the worker
        writes those, and the key must not follow a URL it chose."""
        parent = spec.parent_env()
        merged = dict(parent)
        for found in _settings_env(parent, spec.cwd, project=False):
            merged.update(found)
        assert self.api is not None
        return find_upstream(self.api, merged, url=spec.upstream)

    def build(self, spec: base.RunSpec) -> base.Invocation:
        argv = [self.binary or "claude", "-p", spec.prompt]
        argv += ["--output-format", "stream-json", "--verbose"]
        argv += ["--max-turns", str(spec.max_turns or DEFAULT_MAX_TURNS)]
        if spec.model:
            argv += ["--model", spec.model]
        if spec.max_cost_usd is not None:
            argv += ["--max-budget-usd", f"{spec.max_cost_usd:g}"]
        if spec.read_only:
            argv += ["--permission-mode", "default"]
            argv += ["--allowedTools", ",".join(READ_ONLY_TOOLS)]
            argv += ["--disallowedTools", ",".join(WRITE_TOOLS)]
        else:
            argv += ["--permission-mode", spec.permission_mode or "acceptEdits"]
            if spec.allowed_tools:
                argv += ["--allowedTools", ",".join(spec.allowed_tools)]
        if spec.resume:
            argv += ["--resume", spec.resume]
        argv += spec.extra_args
        env = self.env(spec)
        return base.Invocation(
            argv=argv,
            env=env,
            cwd=spec.cwd,
            stdin=None,
            cost_trusted=cost_trusted(env, spec.cwd),
        )

    options = (
        "max_turns",
        "max_cost_usd",
        "allowed_tools",
        "permission_mode",
        "env_allow",
        "resume",
        "extra_args",
    )

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """stream-json and json output: ``system/init`` with Claude Code's own keys (its
        version, ``apiKeySource``), ``system/api_retry``, assistant messages, tool results
        for the API's ``toolu_`` ids, a ``result`` with its cost fields, Messages API
        stream events. Other CLIs print these types too, and their lines are not taken:
        an ``init`` of another agent (Qwen Code's, droid's), an assistant message whose id
        is the line's own uuid (Qwen Code), Gemini CLI's ``result``."""
        t = line.get("type")
        if t == "system":
            if "qwen_code_version" in line:
                return False
            if line.get("subtype") == "init":
                return "claude_code_version" in line or "apiKeySource" in line
            return line.get("subtype") == "api_retry"
        if t == "result":
            return "subtype" in line and ("total_cost_usd" in line or "modelUsage" in line)
        msg = line.get("message")
        if t == "assistant" and isinstance(msg, dict):
            return "id" in msg and msg.get("id") != line.get("uuid")
        if t == "user" and isinstance(msg, dict) and isinstance(msg.get("content"), list):
            return any(
                isinstance(b, dict) and str(b.get("tool_use_id", "")).startswith("toolu_")
                for b in msg["content"]
            )
        if t == "stream_event":
            event = line.get("event")
            return isinstance(event, dict) and event.get("type") in _MESSAGES_EVENTS
        return False

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """Claude Code writes its sessions and settings to its config folder
        (``CLAUDE_CONFIG_DIR``, else ``~/.claude`` and ``~/.claude.json``). In loopkit's
        runs that folder is a private copy (``containment.provider_home``): the person's
        settings, credentials and instructions copied in afresh each run, the sessions
        kept for ``--resume``; nothing the worker writes there reaches the person's own
        ``claude`` later."""

        config = inv.env.get("CLAUDE_CONFIG_DIR")
        home = inv.env.get("HOME")
        if config:
            source, state = Path(config), Path(config) / ".claude.json"
        elif home:
            source, state = Path(home) / ".claude", Path(home) / ".claude.json"
        else:
            return inv, []
        # Metered, the person's login stays outside too: the worker has only its token.
        files = base.person_files(inv, source, PERSON_FILES, CREDENTIAL_FILES)
        files[".claude.json"] = state
        private = containment.seed_home(
            containment.provider_home(inv.cwd, self.name), files, keep=SESSION_FOLDERS
        )
        if inv.metered:
            _unrouted_settings(private / "settings.json")
        if not (private / ".claude.json").exists():
            (private / ".claude.json").write_text("{}\n", encoding="utf-8")
        return inv.but(env={**inv.env, "CLAUDE_CONFIG_DIR": str(private)}), [private]

    def parser(self) -> ClaudeParser:
        return ClaudeParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


#: The Messages API's stream events (``--include-partial-messages``).
_MESSAGES_EVENTS = frozenset(
    (
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    )
)

#: What a private config folder is seeded with from the person's own, every run.
PERSON_FILES = ("settings.json", ".credentials.json", "CLAUDE.md")
#: What holds the person's login: never copied into a metered run's private folder.
CREDENTIAL_FILES = (".credentials.json",)
#: What a metered run's copy of settings.json loses: whatever would carry a key or send
#: the CLI around the meter.
UNMETERED_SETTINGS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport")


def _unrouted_settings(path: Path) -> None:
    """The private copy of settings.json without a key, a key helper, or a base URL of
    its own in its ``env`` (which Claude Code would prefer to the meter's)."""
    try:
        data = loader.json_loads(path.read_bytes())
    except (OSError, ValueError):
        return
    if not isinstance(data, dict):
        return
    for name in UNMETERED_SETTINGS:
        data.pop(name, None)
    env = data.get("env")
    if isinstance(env, dict):
        data["env"] = {
            k: v
            for k, v in env.items()
            if not (k.startswith(("ANTHROPIC_", "CLAUDE_CODE_USE_")) or k in BASE_URLS)
        }
    atomic_write(path, json.dumps(data, indent=2) + "\n")


#: What a private config folder keeps from one run to the next: sessions (``--resume``).
SESSION_FOLDERS = ("projects", "todos", "session-env", "shell-snapshots", "file-history")


def cost_trusted(env: Mapping[str, str], cwd: Path) -> bool:
    """True when every base URL Claude Code would use is unset or its vendor's own.

    The ``env`` of its settings files counts too: a proxy or another model's endpoint is
    often set there, and the CLI then prices a model it never talked to.
    """
    sources = [env, *_settings_env(env, cwd)]
    return all(
        base.is_vendor_url(src.get(var), hosts)
        for src in sources
        for var, hosts in BASE_URLS.items()
    )


def _settings_env(
    env: Mapping[str, str], cwd: Path, *, project: bool = True
) -> list[dict[str, str]]:
    config = env.get("CLAUDE_CONFIG_DIR") or (f"{env['HOME']}/.claude" if env.get("HOME") else "")
    paths = [Path(config) / "settings.json"] if config else []
    if project:
        paths += [cwd / ".claude" / "settings.json", cwd / ".claude" / "settings.local.json"]
    paths.append(MANAGED_SETTINGS)
    found = []
    for path in paths:
        try:
            data = loader.json_loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        section = data.get("env") if isinstance(data, dict) else None
        if isinstance(section, dict):
            found.append({str(k): str(v) for k, v in section.items() if isinstance(v, str)})
    return found


class ClaudeParser(base.StreamParser):
    #: What the CLI's tools do (``tools.CLAUDE``): Qwen Code's stream is this one, with
    #: its own tool names.
    TOOLS: ClassVar[Mapping[str, tools.Tool]] = tools.CLAUDE

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, base.ToolCall] = {}
        self._messages: set[str] = set()

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        if t == "assistant":
            return self._assistant(obj)
        if t == "user":
            return self._user(obj)
        if t == "result":
            return self._result(obj)
        if t == "system":
            return self._system(obj)
        return []

    def _system(self, obj: base.JsonObject) -> list[base.Event]:
        st = self.state
        sub = obj.get("subtype")
        if sub == "init":
            st.session_id = obj.get("session_id") or st.session_id
            st.model = obj.get("model") or st.model
            return [base.Event("init")]
        if sub == "api_retry":
            status = obj.get("error_status")
            err = obj.get("error")
            text = f"api retry {obj.get('attempt')}: {status or ''} {err or ''}".strip()
            return self.retried(text, status if isinstance(status, int) else None)
        return []

    def _assistant(self, obj: base.JsonObject) -> list[base.Event]:
        st = self.state
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return []
        mid = msg.get("id")
        if isinstance(mid, str) and mid not in self._messages and len(self._messages) < 100_000:
            self._messages.add(mid)
            if not st.result_seen:
                st.turns = len(self._messages)
        if isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
            st.model = msg["model"]
        st.session_id = st.session_id or obj.get("session_id")
        events: list[base.Event] = []
        for block in msg.get("content") or ():
            if not isinstance(block, dict):
                continue
            bt = block.get("type")
            if bt == "text":
                events += self.message(block.get("text"))
            elif bt == "tool_use":
                call = tool_call(block, self.TOOLS)
                st.add_tool(call)
                if call.id:
                    self._pending[call.id] = call
                events.append(base.Event("tool_call", tool=call))
        return events

    def _user(self, obj: base.JsonObject) -> list[base.Event]:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return []
        content = msg.get("content")
        if not isinstance(content, list):
            return []
        events: list[base.Event] = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call = self._pending.pop(str(block.get("tool_use_id")), None)
            if call is None:
                continue
            failed = bool(block.get("is_error"))
            self.state.settle(call, ok=not failed, error=result_text(block) if failed else None)
            events.append(base.Event("tool_result", tool=call))
        return events

    def _result(self, obj: base.JsonObject) -> list[base.Event]:
        st = self.state
        st.result_seen = True
        st.result_is_error = bool(obj.get("is_error"))
        st.result_subtype = obj.get("subtype")
        st.terminal_reason = obj.get("terminal_reason")
        st.session_id = obj.get("session_id") or st.session_id
        status = obj.get("api_error_status")
        if isinstance(status, int):
            st.api_error_status = status
        if isinstance(obj.get("num_turns"), int):
            st.turns = obj["num_turns"]
        text = obj.get("result")
        if isinstance(text, str) and text.strip():
            st.final_message = clip(text.strip(), 8000)
        cost = obj.get("total_cost_usd")
        if isinstance(cost, (int, float)):
            st.cost_usd = float(cost)
            st.cost_source = COST_SOURCE
        self._usage(obj)
        for d in obj.get("permission_denials") or ():
            if isinstance(d, dict) and len(st.permission_denials) < 50:
                st.permission_denials.append(
                    {
                        "tool": d.get("tool_name"),
                        "input": base.clip_input(d.get("tool_input") or {}),
                    }
                )
        for e in obj.get("errors") or ():
            st.add_error(e if isinstance(e, str) else str(e))
        if st.result_is_error and isinstance(text, str) and text.strip():
            st.add_error(text.strip())
        return [base.Event("result", text=st.final_message)]

    def _usage(self, obj: base.JsonObject) -> None:
        st = self.state
        models = obj.get("modelUsage")
        if isinstance(models, dict) and models:
            inp = out = 0
            for name, mu in models.items():
                if not isinstance(mu, dict):
                    continue
                inp += base.count(mu.get("inputTokens")) + base.count(
                    mu.get("cacheReadInputTokens")
                )
                inp += base.count(mu.get("cacheCreationInputTokens"))
                out += base.count(mu.get("outputTokens"))
                if st.model is None:
                    st.model = name
            st.input_tokens, st.output_tokens = inp, out
            return
        usage = obj.get("usage")
        if isinstance(usage, dict):
            st.input_tokens = (
                base.count(usage.get("input_tokens"))
                + base.count(usage.get("cache_read_input_tokens"))
                + base.count(usage.get("cache_creation_input_tokens"))
            )
            st.output_tokens = base.count(usage.get("output_tokens"))


def tool_call(
    block: base.JsonObject, table: Mapping[str, tools.Tool] = tools.CLAUDE
) -> base.ToolCall:
    """A ``tool_use`` block as a call, what it does read from the CLI's tool ``table``."""
    name = str(block.get("name") or "?")
    raw = block.get("input") if isinstance(block.get("input"), dict) else {}
    assert isinstance(raw, dict)
    call = base.ToolCall(id=block.get("id"), name=name, input=base.clip_input(raw))
    return tools.describe(call, raw, table)


def result_text(block: base.JsonObject) -> str:
    c = block.get("content")
    if isinstance(c, str):
        text = c
    elif isinstance(c, list):
        text = "\n".join(
            str(x.get("text", "")) for x in c if isinstance(x, dict) and x.get("type") == "text"
        )
    else:
        text = ""
    text = re.sub(r"</?tool_use_error>", "", text).strip()
    return clip(text or "tool failed", 2000)


_USAGE_LIMIT = re.compile(r"usage limit|limit reached|out of (extra )?usage|quota", re.I)
_RESET_EPOCH = re.compile(r"\|\s*(\d{10})\b")


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    claimed = False
    if (stopped := base.stopped_outcome(end)) is not None:
        return stopped
    if state.result_seen:
        errors = "; ".join(state.errors)
        if state.result_subtype == "error_max_turns" or state.terminal_reason == "max_turns":
            return base.Outcome(
                "max_turns", True, f"reached the turn limit after {state.turns} turns"
            )
        if state.result_subtype == "error_max_budget_usd":
            return base.Outcome(
                "max_turns", True, "reached the per-run cost cap (--max-budget-usd)"
            )
        if state.result_is_error or (state.result_subtype or "success") != "success":
            reason, resume_after = error_class(state.api_error_status, errors)
            message = errors or f"claude reported an error ({state.result_subtype})"
            if state.api_error_status:
                message = f"HTTP {state.api_error_status}: {message}"
            return base.Outcome(reason, True, clip(message, 500), resume_after)
        if state.permission_denials and not state.files_written:
            tools = sorted({str(d.get("tool")) for d in state.permission_denials})
            return base.Outcome(
                "permission_denied",
                False,
                f"tools denied by the permission mode: {', '.join(tools)}",
            )
        claimed = end.exit_code in (0, None)
        if end.exit_code not in (0, None):
            return base.Outcome("crashed", True, f"claude exited {end.exit_code} after its result")
        return base.Outcome("completed", False, None, claimed_complete=claimed)
    # No result line: the CLI died, refused its flags, or its session id was unknown.
    tail = end.stderr_tail.strip()
    if re.search(r"No conversation found|unknown option|error: option|invalid", tail, re.I):
        return base.Outcome("invalid_request", True, clip(tail.splitlines()[-1], 500))
    if re.search(r"invalid api key|authentication|401|403|not logged in|/login", tail, re.I):
        return base.Outcome("auth_error", True, clip(tail.splitlines()[-1], 500))
    last = tail.splitlines()[-1] if tail else "no result line in the stream"
    return base.Outcome("crashed", True, clip(f"claude exited {end.exit_code}: {last}", 500))


def error_class(status: int | None, message: str) -> tuple[str, str | None]:
    """(stop_reason, resume_after) for an API failure that survived the CLI's retries."""
    if status is None:
        status = base.http_status_in(message)
    if _USAGE_LIMIT.search(message):
        return "usage_limit", reset_time(message)
    if status == 429:
        return "rate_limited", None
    if status in (401, 403) or re.search(r"authentication|api key|unauthori[sz]ed", message, re.I):
        return "auth_error", None
    if status in (400, 404, 413, 422) or re.search(r"invalid_request", message):
        return "invalid_request", None
    return "api_error", None


def reset_time(message: str) -> str | None:
    m = _RESET_EPOCH.search(message)
    if m:
        return datetime.fromtimestamp(int(m.group(1)), tz=timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    return codex.parse_reset(message)
