"""Gemini CLI (``gemini -p``) as a worker: argv, stream-json events, error classes.

Run:    gemini --prompt=PROMPT --output-format stream-json
        --approval-mode yolo|auto_edit|default|plan --skip-trust [-m MODEL] [--resume ID]
        stdin /dev/null
        (a judge runs ``--approval-mode plan``: read-only). There is no turn-limit flag:
        the turn cap is ``model.maxSessionTurns`` in the settings loopkit renders into
        the run's private home (inside the sandbox; without it the person's own settings
        decide). Without ``--skip-trust`` a headless run in an untrusted folder exits 55.
Env:    GEMINI_API_KEY with GOOGLE_GEMINI_BASE_URL (another endpoint, e.g. lk-model-server);
        GEMINI_DEFAULT_AUTH_TYPE=gemini-api-key is set when a key is given and no auth type
        is (else a home without ``security.auth.selectedType`` exits 41);
        GEMINI_CLI_HOME is the folder holding ``.gemini`` (the private home in the sandbox).
Stream: init (session_id, model), message (user; assistant text in ``delta`` pieces),
        tool_use (tool_name, tool_id, parameters), tool_result (status success|error,
        output, error {type, message}), error (severity, message), and one final result
        (status success|error, error {type, message}, stats with token counts).
Errors: an API failure after the CLI's retries is ``result.status: error`` with the
        API's envelope in its message (a 400 is not a success); its retries show only on
        stderr ("Attempt N failed: ... Retrying after ..."), counted from there. A tool
        call the approval mode does not offer fails ``tool_not_registered``: a write or
        a command refused so is a permission denial, and a run that then says it is done
        has not done it.
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
from loopkit.worker.providers import base, claude, tools

DEFAULT_APPROVAL = "yolo"
VENDOR_HOSTS = ("googleapis.com",)

#: What a private home is seeded with from the person's own ``.gemini``, every run.
PERSON_FILES = ("settings.json", "oauth_creds.json", "google_accounts.json", "GEMINI.md")
#: What holds the person's login: never copied into a metered run's private home.
CREDENTIAL_FILES = ("oauth_creds.json", "google_accounts.json")
API_KEY_AUTH = "gemini-api-key"
#: What it keeps from one run to the next: sessions (``--resume``) and their index.
SESSION_FOLDERS = ("tmp", "history", "projects.json", "installation_id")

#: Settings loopkit renders on top of the person's: nothing reaches outside hosts by
#: itself, and nothing asks a question no one is there to answer.
QUIET = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}

#: Gemini CLI's exit codes for failures that print no result line.
EXIT_CODES = {
    41: ("auth_error", "gemini could not authenticate (exit 41)"),
    42: ("invalid_request", "gemini refused its input (exit 42)"),
    44: ("crashed", "gemini's own sandbox failed (exit 44)"),
    52: ("invalid_request", "gemini refused its configuration (exit 52)"),
    53: ("max_turns", "reached the session's turn limit (exit 53)"),
    55: ("invalid_request", "gemini refused an untrusted folder (exit 55)"),
}
#: What it says on stderr, and only there, of a failing request: each attempt's failure,
#: and a retry when one follows ("... Retrying after 5817ms...").
_RETRY_LINE = re.compile(r"^Attempt \d+ failed\b.*$", re.M)
_RETRIED = re.compile(r"Retrying (?:after \d+ ?ms|with backoff)")


class GeminiProvider(base.Provider):
    name = "gemini"
    npm = ("Gemini CLI", "@google/gemini-cli")
    env_names = ("GEMINI_", "GOOGLE_", "CLOUDSDK_", "NO_BROWSER")
    api = dialects.GEMINI
    options = base.APPROVAL_OPTIONS

    routes = (
        "GEMINI_API_KEY",
        "GEMINI_CLI_HOME",
        "GEMINI_DEFAULT_AUTH_TYPE",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
    )

    def rehearsal(self, r: base.Rehearsal) -> dict[str, str]:
        """``HOME``, the key and base URL; writes ``home/.gemini/settings.json``: API-key
        auth and ``general.maxAttempts`` (``retries`` + 1; its default, 10 with backoff,
        makes an error that never clears take minutes)."""
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": max(1, min(10, (r.retries or 0) + 1))},
        }
        (r.home / ".gemini").mkdir(parents=True, exist_ok=True)
        atomic_write(r.home / ".gemini" / "settings.json", json.dumps(settings, indent=2) + "\n")
        return {"HOME": str(r.home), "GEMINI_API_KEY": r.api_key, "GOOGLE_GEMINI_BASE_URL": r.url}

    def build(self, spec: base.RunSpec) -> base.Invocation:
        argv = command_line(self.binary or "gemini", spec, "--skip-trust")
        env = self.env(spec)
        if env.get("GEMINI_API_KEY") and not env.get("GEMINI_DEFAULT_AUTH_TYPE"):
            env["GEMINI_DEFAULT_AUTH_TYPE"] = API_KEY_AUTH
        settings: base.JsonObject = {}
        if spec.max_turns:
            settings["model"] = {"maxSessionTurns": int(spec.max_turns)}
        return base.Invocation(
            argv=argv,
            env=env,
            cwd=spec.cwd,
            stdin=None,
            cost_trusted=base.is_vendor_url(env.get("GOOGLE_GEMINI_BASE_URL"), VENDOR_HOSTS),
            model=spec.model,
            settings=settings,
        )

    @classmethod
    def sniff(cls, line: Mapping[str, Any]) -> bool:
        """stream-json: an ``init`` with a session id and a timestamp, or a ``tool_use``
        with ``tool_name`` and ``tool_id`` (no other CLI's stream has these shapes)."""
        t = line.get("type")
        if "timestamp" not in line:
            return False
        if t == "init":
            return "session_id" in line
        if t == "tool_use":
            return "tool_name" in line and "tool_id" in line
        if t == "result":
            return "status" in line and "stats" in line
        return False

    def contained(self, inv: base.Invocation) -> tuple[base.Invocation, list[Path]]:
        """Gemini CLI keeps its settings, credentials and sessions in ``.gemini`` under
        ``GEMINI_CLI_HOME`` (else ``$HOME``). In loopkit's runs that is a private home
        (``containment.provider_home``): the person's settings and credentials copied in
        afresh, loopkit's settings (``QUIET``, the turn cap) rendered on top, the sessions
        kept for ``--resume``; nothing the worker writes there reaches the person."""

        home = inv.env.get("GEMINI_CLI_HOME") or inv.env.get("HOME")
        source = Path(home) / ".gemini" if home else None
        private = containment.provider_home(inv.cwd, self.name)
        dot = private / ".gemini"
        files = base.person_files(inv, source, PERSON_FILES, CREDENTIAL_FILES)
        containment.seed_home(dot, files, keep=SESSION_FOLDERS)
        # Metered, the only way in is the run's token as an API key: headless, gemini
        # takes the base URL for a gateway login unless its settings select that.
        metered = {"security": {"auth": {"selectedType": API_KEY_AUTH}}} if inv.metered else {}
        base.render_settings(dot / "settings.json", {**QUIET, **inv.settings, **metered})
        return inv.but(env={**inv.env, "GEMINI_CLI_HOME": str(private)}), [private]

    def parser(self) -> GeminiParser:
        return GeminiParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        return classify(state, end)


def command_line(program: str, spec: base.RunSpec, *options: str) -> list[str]:
    """The argv Gemini CLI and its fork Qwen Code share: the prompt (``--prompt=``: one
    that starts with "-" is still the prompt), stream-json, the approval mode (``plan``,
    read-only, for a judge), the CLI's own ``options``, the model and the session."""
    approval = "plan" if spec.read_only else (spec.permission_mode or DEFAULT_APPROVAL)
    argv = [program, f"--prompt={spec.prompt}", "--output-format", "stream-json"]
    argv += ["--approval-mode", approval, *options]
    return [*argv, *base.flags(("-m", spec.model), ("--resume", spec.resume)), *spec.extra_args]


class GeminiParser(base.StreamParser):
    TOOLS: ClassVar[Mapping[str, tools.Tool]] = tools.GEMINI

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, base.ToolCall] = {}
        self._text: list[str] = []
        self._in_turn = False
        self.result_error_type: str | None = None

    def handle(self, obj: base.JsonObject) -> list[base.Event]:
        t = obj.get("type")
        st = self.state
        if t == "message":
            if obj.get("role") != "assistant":
                return []
            self._turn()
            content = obj.get("content")
            if isinstance(content, str):
                if not obj.get("delta"):
                    self._text = []
                if sum(len(x) for x in self._text) < 64_000:
                    self._text.append(content)
            return []
        if t == "tool_use":
            events = self._said()
            self._turn()
            raw = obj.get("parameters") if isinstance(obj.get("parameters"), dict) else {}
            assert isinstance(raw, dict)
            call = base.ToolCall(
                id=obj.get("tool_id"),
                name=str(obj.get("tool_name") or "?"),
                input=base.clip_input(raw),
            )
            tools.describe(call, raw, self.TOOLS)
            st.add_tool(call)
            if call.id:
                self._pending[str(call.id)] = call
            return [*events, base.Event("tool_call", tool=call)]
        if t == "tool_result":
            self._in_turn = False
            done = self._pending.pop(str(obj.get("tool_id")), None)
            if done is None:
                return []
            ok = obj.get("status") == "success"
            err = obj.get("error") if isinstance(obj.get("error"), dict) else {}
            assert isinstance(err, dict)
            message = err.get("message") or obj.get("output")
            st.settle(done, ok=ok, error=None if ok else str(message or "tool failed"))
            if not ok and _refused(err.get("type"), done, self.TOOLS):
                st.permission_denials.append({"tool": done.name, "input": done.input})
            return [base.Event("tool_result", tool=done)]
        if t == "init":
            st.session_id = obj.get("session_id") or st.session_id
            if isinstance(obj.get("model"), str) and obj["model"] != "auto":
                st.model = obj["model"]
            return [base.Event("init")]
        if t == "error":
            message = str(obj.get("message") or "error")
            if obj.get("severity") == "warning":
                return []
            st.add_error(message)
            return [base.Event("error", text=message)]
        if t == "result":
            return [*self._said(), *self._result(obj)]
        return []

    def _turn(self) -> None:
        if not self._in_turn:
            self._in_turn = True
            if not self.state.result_seen:
                self.state.turns += 1

    def _said(self) -> list[base.Event]:
        text = "".join(self._text).strip()
        self._text = []
        return self.message(text)

    def _result(self, obj: base.JsonObject) -> list[base.Event]:
        st = self.state
        st.result_seen = True
        st.result_is_error = obj.get("status") != "success"
        err = obj.get("error") if isinstance(obj.get("error"), dict) else None
        if err is not None:
            self.result_error_type = str(err.get("type") or "")
            st.result_subtype = self.result_error_type or None
            message = str(err.get("message") or "gemini reported an error")
            st.add_error(message)
            status = _status_in(message)
            if status:
                st.api_error_status = status
        stats = obj.get("stats")
        if isinstance(stats, dict):
            st.input_tokens = base.count(stats.get("input_tokens"))
            st.output_tokens = base.count(stats.get("output_tokens"))
            models = stats.get("models")
            if st.model is None and isinstance(models, dict):
                # The model that did the work: the router's classifier is listed too.
                used = {
                    name: base.count(m.get("total_tokens"))
                    for name, m in models.items()
                    if isinstance(m, dict)
                }
                if used and max(used.values()) > 0:
                    st.model = max(used, key=lambda name: used[name])
        return [base.Event("result", text=st.final_message)]


def _refused(kind: Any, call: base.ToolCall, table: Mapping[str, tools.Tool]) -> bool:
    """A write or a command the approval mode did not allow (not offered, or denied)."""
    if tools.kind_of(table, call.name) not in (tools.WRITE, tools.COMMAND):
        return False
    return isinstance(kind, str) and (
        kind == "tool_not_registered" or "permission" in kind or "denied" in kind
    )


def _status_in(message: str) -> int | None:
    """The HTTP status of an API error message (the envelope's ``code``, else a number)."""
    m = re.search(r'"code"\s*:\s*(\d{3})', message)
    return int(m.group(1)) if m else base.http_status_in(message)


def retries_on_stderr(stderr: str) -> int:
    """The CLI's own retries of a failed request: it says them only on stderr."""
    return len(_RETRIED.findall(stderr))


#: Gemini CLI's words for a quota that will not come back by retrying (its
#: TerminalQuotaError); any other 429 is a throttle, however often it says "quota".
_TERMINAL_QUOTA = re.compile(
    r"exhausted your daily quota|INSUFFICIENT_G1_CREDITS|exhausted your capacity", re.I
)


def error_class(status: int | None, message: str) -> tuple[str, str | None]:
    """(stop_reason, resume_after) for an API failure Gemini CLI reported."""
    if status is None:
        status = _status_in(message)
    if status == 429 or "RESOURCE_EXHAUSTED" in message:
        if _TERMINAL_QUOTA.search(message):
            return "usage_limit", claude.reset_time(message)
        return "rate_limited", None
    return claude.error_class(status, message)


def classify(state: base.RunState, end: base.Exit) -> base.Outcome:
    state.api_retries = max(state.api_retries, retries_on_stderr(end.stderr_tail))
    if end.stopped:
        reason = end.stopped if end.stopped in ("timeout", "cancelled", "stuck") else "cancelled"
        failing = _RETRY_LINE.findall(end.stderr_tail)
        if reason == "timeout" and failing:
            # Still retrying a failing request when the clock ran out: the API's failure
            # (a throttle, a 5xx) is the cause, and it decides the retry.
            last = failing[-1]
            cause, resume_after = error_class(_status_in(last), last)
            message = f"timed out retrying a failing request ({len(failing)} attempts): {last}"
            return base.Outcome(cause, True, clip(message, 500), resume_after)
        return base.Outcome(reason, True, base.stopped_message(reason))
    if state.result_seen and state.result_is_error:
        message = state.errors[-1] if state.errors else "gemini reported an error"
        if "turn" in (state.result_subtype or "").lower():
            return base.Outcome("max_turns", True, clip(message, 500))
        reason, resume_after = error_class(state.api_error_status, message)
        if state.api_error_status:
            message = f"HTTP {state.api_error_status}: {message}"
        return base.Outcome(reason, True, clip(message, 500), resume_after)
    if state.result_seen and end.exit_code in (0, None):
        if state.permission_denials:
            return base.Outcome("permission_denied", False, denied_message(state))
        return base.Outcome("completed", False, None, claimed_complete=True)
    known = EXIT_CODES.get(end.exit_code or 0)
    last = base.last_line(end, "no result line in the stream")
    if known:
        return base.Outcome(known[0], True, clip(f"{known[1]}: {last}", 500))
    if state.result_seen:
        return base.Outcome("crashed", True, f"gemini exited {end.exit_code} after its result")
    return base.Outcome("crashed", True, clip(f"gemini exited {end.exit_code}: {last}", 500))


def denied_message(state: base.RunState) -> str:
    names = sorted({str(d.get("tool")) for d in state.permission_denials})
    return f"tools refused by the approval mode: {', '.join(names)}"
