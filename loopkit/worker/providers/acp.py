"""Any agent that speaks the Agent Client Protocol (ACP) as a worker; loopkit is its client.

Run:    python -m loopkit.worker.acp (``loopkit.worker.acp.client``), which starts the
        agent -- ``worker.agent`` by name (``loopkit.worker.acp.agents``: claude, codex,
        gemini, qwen, goose, opencode) or ``worker.command`` -- and speaks ACP on its
        stdio; the run's settings (prompt, scope, turn cap, resume id) in a file named by
        ``LOOPKIT_ACP_CONFIG``.                                          stdin /dev/null
Stream: the client's JSON lines: every agent message (``{"acp": "in", "msg": …}``:
        ``session/update`` tool calls, message chunks, usage), each permission and
        file-write decision (``{"acp": "gate", …}``), each model turn, one ``end``.
Scope:  the agent asks before each write and command; loopkit answers from the contract
        (``loopkit.worker.acp.gate``): a write outside the writable scope, into a
        protected or add-only file, into .git or a file that steers the loop is refused
        before it happens and listed in ``run.refused``. lk-diff remains the judge.
Errors: the prompt's ``stopReason`` (end_turn, max_tokens, max_turn_requests, refusal,
        cancelled), a JSON-RPC error's text (HTTP statuses, usage limits), the agent's exit.
Cost:   an agent's ``usage_update`` cost, untrusted (its price table, not a bill).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.text import clip
from loopkit.worker import providers
from loopkit.worker.acp.agents import AGENTS
from loopkit.worker.providers import base, claude, codex
from loopkit.worker.providers.shell import files_read_by

CONFIG_ENV = "LOOPKIT_ACP_CONFIG"
CONFIG_NAME = "acp.json"
COST_SOURCE = "acp agent usage_update"
#: ACP tool kinds -> what the run record calls a file the call touched.
READ_KINDS = ("read",)
WRITE_KINDS = ("edit", "delete", "move")


def agent_argv(spec: base.RunSpec) -> tuple[list[str], tuple[str, ...], str | None]:
    """The agent's argv, the environment names it needs, and the provider whose private
    home it shares (claude, codex) -- from ``worker.command`` or ``worker.agent``."""
    if spec.command:
        return shlex.split(spec.command), (), None
    name = spec.agent or "claude"
    try:
        argv, env_names, home = AGENTS[name]
    except KeyError:
        raise BadInput(
            "$.worker.agent", f"no ACP agent {name!r}; one of: {', '.join(AGENTS)}"
        ) from None
    return list(argv), env_names, home


class AcpProvider(base.Provider):
    name = "acp"
    binary = "the ACP agent"
    install_hint = (
        "install the agent's ACP command (docs/acp.md names each; `make agents` installs "
        "claude-agent-acp and codex-acp)"
    )
    options = ("max_turns", "env_allow", "resume", "agent", "command")

    def build(self, spec: base.RunSpec) -> base.Invocation:
        argv, env_names, home = agent_argv(spec)
        if home == "codex":
            # codex reads its key from the variable its config.toml names.
            key = codex.provider_config(spec.parent_env()).get("env_key")
            env_names = (*env_names, *([key] if key else []))
        argv += spec.extra_args
        where = spec.handoff_path.with_name(CONFIG_NAME) if spec.handoff_path else None
        if where is None:  # a dry run, or a caller without artifacts: nothing made here
            import uuid

            where = Path(tempfile.gettempdir()) / f"loopkit-acp-{uuid.uuid4().hex}.json"
        config = {
            "agent": argv,
            "cwd": str(spec.cwd),
            "prompt": spec.prompt,
            "resume": spec.resume,
            "max_turns": spec.max_turns,
            "read_only": spec.read_only,
            "scope": dict(spec.scope) if spec.scope is not None else None,
            "control": list(spec.control),
            "model": spec.model,
        }
        env = self.env(spec, extra=env_names)
        env[CONFIG_ENV] = str(where)
        return base.Invocation(
            argv=[sys.executable, "-m", "loopkit.worker.acp"],
            env=env,
            cwd=spec.cwd,
            stdin=None,
            files={where: json.dumps(config, ensure_ascii=False) + "\n"},
            model=spec.model,
        )

    def locate(self, inv: base.Invocation) -> str | None:
        """The agent's executable (the client itself is this Python); a missing agent is
        named with its own name, not the client's."""
        argv = _config_of(inv).get("agent") or []
        exe = str(argv[0]) if argv else ""
        found = (
            (exe if os.access(exe, os.X_OK) else None)
            if os.sep in exe
            else shutil.which(exe, path=inv.env.get("PATH"))
        )
        if found is None:
            raise EnvironmentProblem(
                f"{exe or 'the ACP agent'} not found on PATH: {self.install_hint}"
            )
        return found

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        return line.get("acp") in ("start", "in", "gate", "end", "session")

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """A known agent built on claude or codex keeps its sessions where that provider's
        private home is (``containment.provider_home``); any other agent writes only its
        private home in the sandbox (a tmpfs gone with the run)."""
        argv = _config_of(inv).get("agent") or []
        exe = os.path.basename(str(argv[0])) if argv else ""
        home = next((h for a, _, h in AGENTS.values() if a and a[0] == exe and h), None)
        if home is None:
            return inv, []
        return providers.get(home).contained(inv)

    def parser(self) -> AcpParser:
        return AcpParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


def _config_of(inv: base.Invocation) -> base.JsonObject:
    path = inv.env.get(CONFIG_ENV)
    text = inv.files.get(Path(path)) if path else None
    if text is None:
        return {}
    data = json.loads(text)
    return data if isinstance(data, dict) else {}


class AcpParser(base.StreamParser):
    def __init__(self) -> None:
        super().__init__()
        self._calls: dict[str, base.ToolCall] = {}
        self._announced: set[str] = set()
        self._kinds: dict[str, str] = {}
        self._message: list[str] = []
        self._message_open = False
        self.stop_reason: str | None = None
        self.stopped: str | None = None
        self.end_error: str | None = None
        self.prompting = False

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        kind = obj.get("acp")
        st = self.state
        if kind == "session":
            st.session_id = obj.get("sessionId") or st.session_id
            self.prompting = True
            return [base.Event("init")]
        if kind == "model":
            if not obj.get("error") and isinstance(obj.get("modelId"), str):
                st.model = obj["modelId"]
            return []
        if kind == "turn":
            st.turns = base.count(obj.get("n")) or st.turns
            return []
        if kind == "gate":
            return self._gate(obj)
        if kind == "end":
            st.result_seen = True
            self.stop_reason = obj.get("stop_reason")
            self.stopped = obj.get("stopped")
            self.end_error = obj.get("error")
            st.result_subtype = self.stopped
            st.terminal_reason = self.stop_reason
            if self.end_error:
                st.add_error(str(self.end_error))
                st.api_error_status = base.http_status_in(str(self.end_error))
            return [base.Event("result", text=st.final_message)]
        if kind != "in":
            return []
        msg = obj.get("msg")
        if not isinstance(msg, dict):
            return []
        if obj.get("re") == "session/new":
            result = msg.get("result")
            if isinstance(result, dict):
                models = result.get("models")
                if isinstance(models, dict) and isinstance(models.get("currentModelId"), str):
                    st.model = st.model or models["currentModelId"]
        if obj.get("re") == "session/prompt":
            self._usage(msg.get("result"))
        if msg.get("method") == "session/update" and self.prompting:
            params = msg.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            if isinstance(update, dict):
                return self._update(update)
        return []

    def _update(self, update: base.JsonObject) -> list[base.Event]:
        kind = update.get("sessionUpdate")
        st = self.state
        if kind == "agent_message_chunk":
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if isinstance(text, str):
                if not self._message_open:
                    self._message, self._message_open = [], True
                self._message.append(text)
                whole = "".join(self._message).strip()
                if whole:
                    st.final_message = clip(whole, 8000)
                    return [base.Event("message", text=text)] if text.strip() else []
            return []
        if kind == "usage_update":
            cost = update.get("cost")
            amount = cost.get("amount") if isinstance(cost, dict) else None
            if isinstance(amount, (int, float)) and not isinstance(amount, bool):
                st.cost_usd, st.cost_source = float(amount), COST_SOURCE
            return []
        if kind not in ("tool_call", "tool_call_update"):
            return []
        self._message_open = False
        cid = update.get("toolCallId")
        if not isinstance(cid, str):
            return []
        call = self._calls.get(cid)
        if call is None:
            call = base.ToolCall(id=cid, name="?", input={})
            self._calls[cid] = call
            st.add_tool(call)
        if isinstance(update.get("kind"), str):
            self._kinds[cid] = update["kind"]
        _fill(call, update, self._kinds.get(cid))
        events: list[base.Event] = []
        status = update.get("status")
        if cid not in self._announced and (call.input or status in ("completed", "failed")):
            self._announced.add(cid)
            events.append(base.Event("tool_call", tool=call))
        if status in ("completed", "failed") and call.ok is None:
            error = _content_text(update) or update.get("rawOutput")
            st.settle(call, ok=status == "completed", error=str(error) if error else None)
            events.append(base.Event("tool_result", tool=call))
        return events

    def _gate(self, obj: base.JsonObject) -> list[base.Event]:
        if obj.get("allowed"):
            return []
        entry = {
            "via": obj.get("via"),
            "tool": obj.get("title") or obj.get("kind") or obj.get("via"),
            "path": obj.get("path"),
            "rule": obj.get("rule"),
        }
        if len(self.state.refused) < 200:
            self.state.refused.append(entry)
        return []

    def _usage(self, result: Any) -> None:
        usage = result.get("usage") if isinstance(result, dict) else None
        if not isinstance(usage, dict):
            return
        st = self.state
        st.input_tokens = (
            base.count(usage.get("inputTokens"))
            + base.count(usage.get("cachedReadTokens"))
            + base.count(usage.get("cachedWriteTokens"))
        )
        st.output_tokens = base.count(usage.get("outputTokens"))


def _fill(call: base.ToolCall, update: Mapping[str, Any], kind: str | None) -> None:
    """What an update tells of a call (ACP sends a call's fields as they become known)."""
    title = update.get("title")
    if isinstance(title, str) and title:
        call.name = clip(title, 200)
    raw = update.get("rawInput")
    if isinstance(raw, dict) and raw:
        call.input = base.clip_input(raw)
        command = raw.get("command")
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        if isinstance(command, str) and command:
            call.command = command
            for f in files_read_by(command):
                if f not in call.files_read:
                    call.files_read.append(f)
    from loopkit.worker.acp.gate import changed_paths  # the scope's rules load only here

    paths = changed_paths(update)
    if kind in WRITE_KINDS:
        for p in paths:
            if p not in call.files_written:
                call.files_written.append(p)
    elif kind in READ_KINDS:
        for p in paths:
            if p not in call.files_read:
                call.files_read.append(p)
    if kind == "execute" and call.command is None and isinstance(title, str) and title:
        call.command = title


def _content_text(update: Mapping[str, Any]) -> str | None:
    parts = []
    content = update.get("content")
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and item.get("type") == "content":
            inner = item.get("content")
            if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                parts.append(inner["text"])
    text = "\n".join(parts).strip()
    return clip(text, 2000) if text else None


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    if (ended := base.stopped_outcome(end)) is not None:
        return ended
    stop = state.terminal_reason
    errors = "; ".join(state.errors)
    if not state.result_seen:
        last = base.last_line(end, "no end line in the stream")
        return base.Outcome(
            "crashed", True, clip(f"the ACP client exited {end.exit_code}: {last}", 500)
        )
    # The client's own stop (the turn cap, a SIGTERM) wins over how the agent ended.
    stopped = _stopped_of(state)
    if stopped == "max_turns":
        return base.Outcome("max_turns", True, f"reached the turn limit after {state.turns} turns")
    if stopped == "cancelled":
        return base.Outcome("cancelled", True, "cancelled: session/cancel sent to the agent")
    if stop is None:
        if "loadSession" in errors or "session/load" in errors:
            return base.Outcome("invalid_request", True, clip(errors, 500))
        reason, resume_after = claude.error_class(state.api_error_status, errors)
        if reason == "api_error" and "exited" in errors:
            reason = "crashed"
        return base.Outcome(reason, True, clip(errors or "the agent failed", 500), resume_after)
    if stop in ("max_tokens", "max_turn_requests"):
        return base.Outcome("max_turns", True, f"the agent stopped: {stop}")
    if stop == "refusal":
        return base.Outcome(
            "permission_denied", True, "the agent refused to go on (stopReason refusal)"
        )
    if stop == "cancelled" and state.refused:
        # Some agents (codex's) end the turn when a tool is refused: the refusal was
        # loopkit's, so the run ended without a claim and the next attempt is told why.
        return base.Outcome(
            "completed",
            False,
            f"the agent ended its turn after loopkit refused a write ({_refusal(state)})",
        )
    if stop == "cancelled":
        return base.Outcome("cancelled", True, "the agent ended its turn as cancelled")
    if end.exit_code not in (0, None):
        return base.Outcome(
            "crashed", True, f"the ACP client exited {end.exit_code} after the turn"
        )
    return base.Outcome("completed", False, None, claimed_complete=stop == "end_turn")


def _refusal(state: base.RunState) -> str:
    first = state.refused[0]
    more = f" and {len(state.refused) - 1} more" if len(state.refused) > 1 else ""
    return f"{first.get('rule')}: {first.get('path')}{more}"


def _stopped_of(state: base.RunState) -> str | None:
    return state.result_subtype
