"""GitHub Copilot CLI (``copilot -p --output-format json``) as a worker: argv, events, errors.

Run:    copilot -p PROMPT --output-format json --allow-all-tools --disallow-temp-dir [--model M]
        [--resume ID] [--available-tools view,grep,glob]                   stdin /dev/null
        ``--allow-all-tools`` is required without a terminal; paths outside the working
        directory (the temp folder too, with ``--disallow-temp-dir``) still need an
        approval nobody can give, so such a call is denied
        ("Permission denied because no interactive user response was available"). There
        is no turn limit outside autopilot mode. A judge gets ``--available-tools
        view,grep,glob``.
Model:  its own service by default (a GitHub token), or any endpoint the person sets
        (``COPILOT_PROVIDER_BASE_URL``, ``COPILOT_PROVIDER_TYPE`` anthropic | openai,
        ``COPILOT_PROVIDER_API_KEY``, ``COPILOT_MODEL``; ``COPILOT_OFFLINE=true`` keeps
        it off GitHub altogether): how loopkit's scripted server reaches it.
Stream: one JSON object per line, ``{type, data, id, timestamp}`` with dotted types:
        assistant.turn_start, assistant.message (``content``, ``toolRequests``),
        tool.execution_start (``toolName``, ``arguments``), tool.execution_complete
        (``success``, ``error {message, code}``, ``shellExecution.exitCode``,
        ``fileEdits``), model.call_failure and assistant.turn_retry while it retries,
        session.error (``statusCode``, ``errorType``) once it gives up, and a final
        ``{type: result, sessionId, exitCode}``. A command that exited 2 is a
        *successful* tool call to Copilot, and it says "Done" and exits 0 after one:
        loopkit reads ``shellExecution.exitCode`` and does not take that claim.
Meter:  its own endpoint only (``COPILOT_PROVIDER_BASE_URL``; GitHub's model routing is
        not metered): the key in ``COPILOT_PROVIDER_BEARER_TOKEN`` or
        ``COPILOT_PROVIDER_API_KEY``, the dialect from ``COPILOT_PROVIDER_TYPE`` (anthropic,
        openai; azure and a key command are not metered). Metered, both key variables
        and the key command are gone, the token and the meter's URL in their place.
Home:   config, sessions and logs in ``COPILOT_HOME`` (default ``~/.copilot``); in
        loopkit's runs a private copy (``contained``). No token counts, no cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit.boundary import containment
from loopkit.boundary.dialects import Api, Upstream, find_upstream
from loopkit.worker.providers import base, codex, tools

READ_ONLY_TOOLS = ("view", "grep", "glob")
#: Its own-endpoint (BYOK) settings, in the order it prefers the keys.
KEY_VARS = ("COPILOT_PROVIDER_BEARER_TOKEN", "COPILOT_PROVIDER_API_KEY")
KEY_COMMAND = "COPILOT_PROVIDER_API_KEY_COMMAND"
BASE_URL_VAR = "COPILOT_PROVIDER_BASE_URL"
#: The APIs its ``COPILOT_PROVIDER_TYPE`` names that the meter speaks (openai: the default).
APIS = {
    "openai": Api(
        "openai", KEY_VARS, BASE_URL_VAR, "https://api.openai.com/v1", bearer_vars=KEY_VARS
    ),
    "anthropic": Api(
        "anthropic",
        KEY_VARS,
        BASE_URL_VAR,
        "https://api.anthropic.com",
        bearer_vars=("COPILOT_PROVIDER_BEARER_TOKEN",),
    ),
}


class CopilotProvider(base.Provider):
    name = "copilot"
    npm = ("the Copilot CLI", "@github/copilot")
    env_names = (
        "COPILOT_",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GH_HOST",
    )

    options = ("allowed_tools", "env_allow", "resume", "extra_args")

    api = APIS["openai"]

    routes = ("COPILOT_HOME", "COPILOT_GITHUB_TOKEN")
    #: The model a rehearsal names over its own-endpoint (BYOK) settings.
    rehearsal_model = "claude-sonnet-4.5"

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """Offline, its ``COPILOT_PROVIDER_*`` settings pointing at the server (the
        Anthropic Messages API), ``COPILOT_HOME`` under ``home``. Its retries are its own."""
        r.home.mkdir(parents=True, exist_ok=True)
        return {
            "HOME": str(r.home),
            "COPILOT_HOME": str(r.home / ".copilot"),
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": r.url,
            "COPILOT_PROVIDER_TYPE": "anthropic",
            "COPILOT_PROVIDER_API_KEY": r.api_key,
            "COPILOT_MODEL": self.rehearsal_model,
        }

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """The endpoint and key of its own-endpoint mode, when the person set one (or
        ``worker.upstream`` names it); None for GitHub's routing, an azure endpoint or a
        key command."""
        parent = spec.parent_env()
        if not (parent.get(BASE_URL_VAR) or spec.upstream) or parent.get(KEY_COMMAND):
            return None
        api = APIS.get((parent.get("COPILOT_PROVIDER_TYPE") or "openai").strip().lower())
        if api is None:
            return None
        return find_upstream(api, parent, url=spec.upstream)

    def metered(
        self, inv: base.Invocation, url: str, token: str, upstream: Upstream
    ) -> base.Invocation:
        out = super().metered(inv, url, token, upstream)
        return out.but(env={k: v for k, v in out.env.items() if k != KEY_COMMAND})

    def build(self, spec: base.RunSpec) -> base.Invocation:
        prompt = spec.prompt
        if prompt[:1] == "-":  # it would be read as an option
            prompt = " " + prompt
        argv = [self.binary or "copilot", "-p", prompt, "--output-format", "json"]
        # Its own approvals stop at the working directory: no temp-folder exception.
        argv += ["--allow-all-tools", "--disallow-temp-dir"]
        argv += base.flags(("--model", spec.model), ("--resume", spec.resume))
        argv += base.flags(("--available-tools", base.tool_list(spec, READ_ONLY_TOOLS)))
        argv += spec.extra_args
        env = self.env(spec)
        env.setdefault("COPILOT_AUTO_UPDATE", "false")
        model = spec.model or env.get("COPILOT_MODEL")
        return base.Invocation(argv=argv, env=env, cwd=spec.cwd, stdin=None, model=model)

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """--output-format json: dotted types with a ``data`` object, and the final result
        ({type: result, sessionId, exitCode})."""
        t = line.get("type")
        if t == "result":
            return "sessionId" in line and "exitCode" in line
        return isinstance(t, str) and "." in t and isinstance(line.get("data"), dict)

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """Copilot's config, sessions and logs move to a private ``COPILOT_HOME``: the
        person's config copied in afresh each run, the sessions kept for ``--resume``."""

        source = copilot_home(inv.env)
        if source is None:
            return inv, []
        files = {name: source / name for name in PERSON_FILES}
        private = containment.seed_home(
            containment.provider_home(inv.cwd, self.name), files, keep=SESSION_FOLDERS
        )
        # XDG_CACHE_HOME: where it unpacks its own package on first start, kept too.
        env = {**inv.env, "COPILOT_HOME": str(private), "XDG_CACHE_HOME": str(private / "cache")}
        return inv.but(env=env), [private]

    def parser(self) -> CopilotParser:
        return CopilotParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


#: What a private home is seeded with from the person's own, every run.
PERSON_FILES = ("config.json", "mcp-config.json", "copilot-instructions.md")
#: What it keeps from one run to the next: sessions (``--resume``), its unpacked package.
SESSION_FOLDERS = ("session-state", "session-store.db*", "cache")


def copilot_home(env: Mapping[str, str]) -> Path | None:
    chosen = env.get("COPILOT_HOME")
    if chosen:
        return Path(chosen)
    home = env.get("HOME")
    return Path(home, ".copilot") if home else None


class CopilotParser(base.StreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[Any, base.ToolCall] = {}
        self.exit_code: int | None = None

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        st = self.state
        data = base.as_dict(obj.get("data"))
        if t == "assistant.turn_start":
            st.turns += 1
        elif t == "assistant.message":
            if isinstance(data.get("model"), str):
                st.model = data["model"]
            return self.message(data.get("content"))
        elif t == "tool.execution_start":
            return self._start(data)
        elif t == "tool.execution_complete":
            return self._complete(data)
        elif t == "assistant.turn_retry":
            return self.retried(str(data.get("message") or "retry"))
        elif t == "model.call_failure":
            status = data.get("statusCode")
            if isinstance(status, int) and not isinstance(status, bool):
                st.api_error_status = status
        elif t == "session.error":
            status = data.get("statusCode")
            if isinstance(status, int) and not isinstance(status, bool):
                st.api_error_status = status
            message = str(data.get("message") or data.get("errorType") or "error")
            st.add_error(message)
            st.result_is_error = True
            return [base.Event("error", text=message)]
        elif t == "result":
            st.result_seen = True
            if isinstance(obj.get("sessionId"), str):
                st.session_id = obj["sessionId"]
            code = obj.get("exitCode")
            self.exit_code = code if isinstance(code, int) else None
            if st.result_is_error is None:
                st.result_is_error = bool(self.exit_code)
            return [base.Event("result", text=st.final_message)]
        return []

    def _start(self, data: base.JsonObject) -> list[base.Event]:
        args = base.as_dict(data.get("arguments"))
        name = str(data.get("toolName") or "tool")
        call = tools.started(
            self.state, self._pending, data.get("toolCallId"), name, args, tools.COPILOT
        )
        return [base.Event("tool_call", call)]

    def _complete(self, data: base.JsonObject) -> list[base.Event]:
        call = self._pending.pop(data.get("toolCallId"), None)
        if call is None:
            return []
        edits = data.get("fileEdits")
        if isinstance(edits, list):
            paths = [str(e["path"]) for e in edits if isinstance(e, dict) and e.get("path")]
            if paths:
                call.files_written = paths[:200]
        if data.get("success") is not True:
            err = base.as_dict(data.get("error"))
            message = str(err.get("message") or "tool failed")
            if err.get("code") == "denied":
                self.state.permission_denials.append({"tool": call.name, "input": call.input})
            self.state.settle(call, ok=False, error=message)
            return [base.Event("tool_result", call)]
        code = base.as_dict(data.get("shellExecution")).get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            out = str(base.as_dict(data.get("result")).get("content") or "")[-2000:].strip()
            tail = "\n".join(out.rsplit("\n", 5)[-5:])
            self.state.settle(call, ok=False, error=f"exit {code}: {tail}")
        else:
            self.state.settle(call, ok=True)
        return [base.Event("tool_result", call)]


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    if (stopped := base.stopped_outcome(end)) is not None:
        return stopped
    if state.errors:
        return codex.error_outcome(state.errors[-1], state)
    if end.exit_code not in (0, None) or state.result_is_error:
        return base.exited_outcome("copilot", end, "no error in the stream")
    if not state.result_seen:
        return base.Outcome("crashed", True, "copilot ended without its result line")
    failed = base.unresolved_failure(state)
    if state.permission_denials and (failed is None or failed.name in _denied(state)):
        tools = ", ".join(sorted(_denied(state)))
        return base.Outcome("permission_denied", False, f"copilot denied: {tools}")
    return base.claimed_outcome(failed)


def _denied(state: base.RunState) -> set[str]:
    return {str(d.get("tool")) for d in state.permission_denials}
