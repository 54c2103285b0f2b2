"""Any command as the worker (aider, a script, another agent): the embedded default.

Run:    /bin/sh -c COMMAND in the repository, the handoff on stdin AND in the file named by
        ``LOOPKIT_HANDOFF``; ``LOOPKIT_ATTEMPT`` (the attempt number, when known),
        ``LOOPKIT_TASK_ID`` and ``LOOPKIT_REPO`` are exported too. The environment is the
        allow-list (PATH, HOME, LANG, ...) plus the contract's ``worker.env_allow``.
Stream: plain output; the last non-empty line is the final message.
Result: exit 0 -> completed (claimed_complete); exit 75 (EX_TEMPFAIL) -> api_error, a
        transient failure that lk-decide retries with backoff (how a wrapper script says
        "the model was overloaded, try later"); any other status -> crashed, with that
        status and the last line in ``error``. Timeout, cancellation and the breaker end
        the whole process group as for any provider. A program that is not there (the
        command's first word not on PATH, a path to it not executable) is found before
        the start: an environment error (exit 4), never the worker's crash.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from loopkit.boundary.dialects import KNOWN_APIS, find_upstream
from loopkit.evidence.testresults import absent_program
from loopkit.text import clip
from loopkit.worker.providers import base

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.dialects import Upstream

#: sysexits.h EX_TEMPFAIL: the worker's way of saying "transient, try again later".
TEMPFAIL = 75
HANDOFF_ENV = "LOOPKIT_HANDOFF"
SHELL = "/bin/sh"


class CommandProvider(base.Provider):
    name = "command"
    binary = None
    install_hint = "give the worker command in the contract (worker.command)"
    env_names = ()
    options = ("command", "env_allow", "extra_args")

    def upstream(self, spec: base.RunSpec) -> Upstream | None:
        """A command's model API is the one whose key ``worker.env_allow`` passes on
        (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ...): metered, the
        command gets the run's token in that variable and the meter's URL in the API's
        base-URL variable."""
        for api in KNOWN_APIS:
            if any(var in spec.env_allow for var in api.key_vars):
                found = find_upstream(api, spec.parent_env(), url=spec.upstream)
                if found is not None:
                    return found
        return None

    def build(self, spec: base.RunSpec) -> base.Invocation:
        if not spec.command:
            raise ValueError("the command provider needs a command (worker.command or --command)")
        handoff = spec.handoff_path or Path(
            tempfile.gettempdir(), f"loopkit-handoff-{os.getpid()}.md"
        )
        env = self.env(spec)
        env[HANDOFF_ENV] = str(handoff)
        env["LOOPKIT_REPO"] = str(spec.cwd)
        if spec.attempt is not None:
            env["LOOPKIT_ATTEMPT"] = str(spec.attempt)
        if spec.task_id:
            env["LOOPKIT_TASK_ID"] = spec.task_id
        if spec.model:
            env["LOOPKIT_MODEL"] = spec.model
        if spec.resume:
            env["LOOPKIT_RESUME"] = spec.resume
        if spec.read_only:
            env["LOOPKIT_READ_ONLY"] = "1"
        argv = [SHELL, "-c", spec.command, *(["sh", *spec.extra_args] if spec.extra_args else [])]
        return base.Invocation(
            argv=argv,
            env=env,
            cwd=spec.cwd,
            stdin=spec.prompt.encode("utf-8"),
            files={handoff: spec.prompt},
            cost_trusted=False,
        )

    def locate(self, inv: base.Invocation) -> str | None:
        """The shell, when the program the command starts is there (a program on PATH, a
        path to one from the repository, or the shell's own word); None when it is not:
        a set-up error before the worker starts, never its crash."""
        return None if self._absent(inv) else SHELL

    def not_found(self, inv: base.Invocation) -> str:
        program = self._absent(inv)
        where = "from the repository" if "/" in str(program) else "on PATH"
        return f"worker.command: {program} not found {where} (or not executable)"

    def _absent(self, inv: base.Invocation) -> str | None:
        return absent_program(inv.argv[2], path=inv.env.get("PATH"), cwd=str(inv.cwd))

    def parser(self) -> CommandParser:
        return CommandParser()

    def classify(self, state: base.RunState, end: base.Exit) -> base.Outcome:
        if (stopped := base.stopped_outcome(end)) is not None:
            return stopped
        if end.exit_code == 0:
            return base.Outcome("completed", False, None, claimed_complete=True)
        last = state.last_text or _last_line(end.stderr_tail) or "no output"
        if end.exit_code == TEMPFAIL:
            return base.Outcome(
                "api_error", True, clip(f"transient failure (exit 75): {last}", 500)
            )
        if end.exit_code == 127:
            last = _last_line(end.stderr_tail) or last
            return base.Outcome("crashed", True, clip(f"command not found (exit 127): {last}", 500))
        return base.Outcome("crashed", True, clip(f"command exited {end.exit_code}: {last}", 500))


class CommandParser(base.StreamParser):
    """Plain lines: only the last non-empty one is kept (memory stays flat)."""

    def feed(self, line: bytes | str) -> list[base.Event]:
        self.state.lines += 1
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        s = line.strip()
        if s:
            self.state.last_text = clip(s, 2000)
        return []

    def finish(self) -> base.RunState:
        self.state.final_message = self.state.last_text
        self.state.result_seen = True
        return self.state


def _last_line(text: str) -> str | None:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else None
