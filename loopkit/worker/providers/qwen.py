"""Qwen Code (``qwen --prompt=...``) as a worker: argv, stream-json events, error classes.

Run:    qwen --prompt=PROMPT --output-format stream-json
        --approval-mode yolo|auto-edit|default|plan --max-session-turns N [-m MODEL]
        [--resume ID]                                                     stdin /dev/null
        (``--prompt=`` keeps a prompt that starts with "-" a prompt; a judge runs
        ``--approval-mode plan``: read-only).
Env:    OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL select the OpenAI-compatible
        endpoint (Chat Completions; lk-model-server's too) without ``--auth-type``;
        QWEN_HOME is the config folder (``~/.qwen``: settings.json, sessions under
        ``projects/``), a private one in the sandbox.
Stream: Claude Code's stream-json -- system/init, assistant, user (tool results),
        result -- with Qwen's own tool names (``tools.QWEN``: write_file, edit,
        run_shell_command, read_file, ...), ``system/retry`` while it retries a failing
        request, and ``result.error.message`` ("[API Error: 429 ...]") on failure.
Errors: as claude's; a write or command the approval mode refused is in
        ``permission_denials`` while the run still ends ``success`` ("Done."): a refused
        write means the claim is not done. The turn cap prints no result line, only
        "Reached max session turns" on stderr.
Cost:   the CLI prints none: ``usd`` is null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from loopkit.boundary import containment, dialects
from loopkit.files import atomic_write
from loopkit.text import clip
from loopkit.worker.providers import base, claude, gemini, tools
from loopkit.worker.providers.claude import ClaudeParser

DEFAULT_MAX_TURNS = 30
#: The hosts of the model services Qwen Code is made for.
VENDOR_HOSTS = ("aliyuncs.com", "qwen.ai", "openai.com")

#: What a private QWEN_HOME is seeded with from the person's own, every run.
PERSON_FILES = ("settings.json", "oauth_creds.json", "QWEN.md", ".env")
#: What holds the person's login (or keys): never copied into a metered run's private home.
CREDENTIAL_FILES = ("oauth_creds.json", ".env")
#: What it keeps from one run to the next: sessions (``--resume``) and their state.
SESSION_FOLDERS = ("projects", "tmp", "installation_id")
#: Settings loopkit renders on top of the person's (see gemini.QUIET). The background
#: memory agents are off: after the run they start conversations of their own with the
#: model (tokens spent on no task), write outside the run's reach, and team memory lives
#: in the work tree (``.qwen/team-memory/``).
QUIET = {
    "general": {"enableAutoUpdate": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "memory": {
        "enableManagedAutoMemory": False,
        "enableManagedAutoDream": False,
        "enableAutoSkill": False,
        "enableTeamMemory": False,
        "enableTeamMemorySync": False,
    },
}


class QwenProvider(base.Provider):
    name = "qwen"
    npm = ("Qwen Code", "@qwen-code/qwen-code")
    env_names = ("QWEN_", "OPENAI_", "DASHSCOPE_API_KEY")
    api = dialects.OPENAI
    options = base.APPROVAL_OPTIONS

    routes = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "QWEN_HOME",
    )
    #: The model a rehearsal names (any: the scripted server answers them all).
    rehearsal_model = "qwen3-coder-plus"

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """``HOME``, the key, the base URL (Chat Completions) and model; writes
        ``home/.qwen/settings.json`` with the request retry cap
        (``model.generationConfig.maxRetries``) and the background memory agent off (it
        talks to the model after the run, with tools, and would take turns of the script)."""
        settings = {
            "model": {"generationConfig": {"maxRetries": r.retries or 0}},
            "memory": {"enableManagedAutoMemory": False, "enableAutoSkill": False},
        }
        (r.home / ".qwen").mkdir(parents=True, exist_ok=True)
        atomic_write(r.home / ".qwen" / "settings.json", json.dumps(settings, indent=2) + "\n")
        return {
            "HOME": str(r.home),
            "OPENAI_API_KEY": r.api_key,
            "OPENAI_BASE_URL": r.url if r.url.endswith("/v1") else r.url + "/v1",
            "OPENAI_MODEL": r.model or self.rehearsal_model,
        }

    def build(self, spec: base.RunSpec) -> base.Invocation:
        turns = str(spec.max_turns or DEFAULT_MAX_TURNS)
        argv = gemini.command_line(self.binary or "qwen", spec, "--max-session-turns", turns)
        env = self.env(spec)
        # The yolo warning on every run says what loopkit's sandbox already answers.
        env.setdefault("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        return base.Invocation(
            argv=argv,
            env=env,
            cwd=spec.cwd,
            stdin=None,
            cost_trusted=base.is_vendor_url(env.get("OPENAI_BASE_URL"), VENDOR_HOSTS),
            model=spec.model or env.get("OPENAI_MODEL"),
        )

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """Claude Code's stream-json, told apart by what only Qwen Code prints: its
        version in ``system/init``, ``system/retry``, a tool of its own in ``init``'s
        list or in an assistant's ``tool_use``."""
        t = line.get("type")
        if t == "system":
            if "qwen_code_version" in line or line.get("subtype") == "retry":
                return True
            names = line.get("tools")
            return isinstance(names, list) and "run_shell_command" in names
        if t == "assistant":
            return any(b.get("name") in tools.QWEN for b in _tool_uses(line))
        return False

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """Qwen Code keeps settings, credentials and sessions in ``QWEN_HOME`` (else
        ``~/.qwen``): in loopkit's runs a private copy (``containment.provider_home``),
        the person's settings and credentials copied in afresh, ``QUIET`` rendered on
        top, the sessions kept for ``--resume``."""
        config = inv.env.get("QWEN_HOME")
        home = inv.env.get("HOME")
        source = Path(config) if config else Path(home) / ".qwen" if home else None
        files = base.person_files(inv, source, PERSON_FILES, CREDENTIAL_FILES)
        private = containment.seed_home(
            containment.provider_home(inv.cwd, self.name), files, keep=SESSION_FOLDERS
        )
        base.render_settings(private / "settings.json", {**QUIET, **inv.settings})
        return inv.but(env={**inv.env, "QWEN_HOME": str(private)}), [private]

    def parser(self) -> QwenParser:
        return QwenParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


def _tool_uses(line: Mapping[str, Any]) -> list[base.JsonObject]:
    msg = line.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


_API_ERROR = re.compile(r"\[API Error: (\d{3})\b")
#: The CLI's own advice after any 429 or slow answer: it names a quota whether or not
#: one was reached, so it is not read as the API's words.
_ADVICE = re.compile(
    r"\s*Possible quota limitations in place or slow response times detected\.[^\n]*"
)


class QwenParser(ClaudeParser):
    TOOLS: ClassVar[Mapping[str, tools.Tool]] = tools.QWEN

    def _system(self, obj: base.JsonObject) -> list[base.Event]:
        if obj.get("subtype") != "retry":
            return super()._system(obj)
        data = base.as_dict(obj.get("data"))
        return self.retried(f"api retry {data.get('attempt')}: {data.get('reason')}")

    def _result(self, obj: base.JsonObject) -> list[base.Event]:
        if isinstance(obj.get("result"), str):  # the same advice in the text, if any
            obj = {**obj, "result": _ADVICE.sub("", obj["result"])}
        events = super()._result(obj)
        err = obj.get("error")
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str) and message.strip():
            self.state.add_error(_ADVICE.sub("", message).strip())
            m = _API_ERROR.search(message)
            if m and self.state.api_error_status is None:
                self.state.api_error_status = int(m.group(1))
        return events


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    tail = end.stderr_tail
    retrying = re.findall(r"^Retrying in .*$", tail, re.M)
    state.api_retries = max(state.api_retries, len(retrying))
    if end.stopped == "timeout" and retrying:
        # Still retrying a failing request when the clock ran out: the API's failure
        # decides the retry (a throttle is transient), not the clock.
        last = retrying[-1]
        m = _API_ERROR.search(last)
        reason, resume_after = claude.error_class(int(m.group(1)) if m else None, last)
        message = f"timed out retrying a failing request ({len(retrying)} retries): {last}"
        return base.Outcome(reason, True, clip(message, 500), resume_after)
    if not state.result_seen and not end.stopped and "max session turns" in tail:
        return base.Outcome("max_turns", True, f"reached the turn limit after {state.turns} turns")
    outcome = claude.classify(state, end)
    if outcome.stop_reason == "completed" and refused_writes(state):
        names = sorted(refused_writes(state))
        return base.Outcome(
            "permission_denied", False, f"writes refused by the approval mode: {', '.join(names)}"
        )
    if outcome.error:
        outcome.error = outcome.error.replace("claude ", "qwen ", 1)
    return outcome


def refused_writes(state: base.RunState) -> set[str]:
    """The write and command tools among the run's permission denials."""
    kinds = (tools.WRITE, tools.COMMAND)
    return {
        str(d.get("tool"))
        for d in state.permission_denials
        if tools.kind_of(tools.QWEN, str(d.get("tool"))) in kinds
    }
