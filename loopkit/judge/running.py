"""Running the judge: its settings, a live read-only run or a saved transcript, one judgement.

A live run goes through ``invoke.execute`` read-only (in the worker's sandbox when there
is one), the tree hashed before and after; a transcript is judged without running
anything. ``evaluate`` is lk-judge's whole work: the goal, the prompt, the run, the
section. Signals during a run end the judge's process group, then raise ``Interrupted``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import git, loader
from loopkit.boundary import containment
from loopkit.errors import BadInput, Interrupted
from loopkit.judge.observation import Observed, observe, own_words, tree_changes
from loopkit.judge.prompt import Goal, build_prompt, goal_for
from loopkit.judge.ruling import section
from loopkit.state import artifacts, cancel
from loopkit.text import file_tail
from loopkit.worker import invoke, providers
from loopkit.worker.invoke import Jail
from loopkit.worker.providers import base
from loopkit.worker.providers.base import Exit, RunSpec
from loopkit.workspace import Workspace

if TYPE_CHECKING:
    from loopkit.sections import Attempt, Judge
    from loopkit.worker.providers.base import RunState

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_TURNS = 25

#: The judge's own folder inside the attempt's artifacts (prompt, stream, stderr).
JUDGE_FOLDER = "judge"


@dataclass(repr=False, eq=False, match_args=False)
class Settings:
    """How to run the judge, from the contract's ``judge`` section and the flags."""

    provider: str
    model: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    max_turns: int = DEFAULT_MAX_TURNS
    command: str | None = None
    agent: str | None = None  # acp: the agent by name
    env_allow: list[str] = field(default_factory=list)

    @classmethod
    def resolve(
        cls,
        contract: Mapping[str, Any] | None,
        *,
        provider: str | None = None,
        model: str | None = None,
    ) -> Settings:
        judge = dict((contract or {}).get("judge") or {})
        chosen = provider or judge.get("provider")
        if not chosen:
            raise BadInput(
                "--provider",
                "no judge provider: pass --provider NAME (claude, codex, ...) or set judge.provider "
                "in the contract",
            )
        same = chosen == judge.get("provider")
        if chosen == "command" and not (same and judge.get("command")):
            raise BadInput("--provider", "a command judge needs judge.command in the contract")
        return cls(
            provider=str(chosen),
            model=model or (judge.get("model") if same else None),
            timeout=float(judge.get("timeout") or DEFAULT_TIMEOUT_S),
            max_turns=int(judge.get("max_turns") or DEFAULT_MAX_TURNS),
            command=judge.get("command") if same else None,
            agent=judge.get("agent") if same else None,
            env_allow=list(judge.get("env_allow") or []),
        )


#: The longest reply read in full (the providers clip their final message to a few KB,
#: keeping its head: the verdict line is at the end).
MAX_REPLY_CHARS = 200_000


class Reply:
    """The judge's last message, in full, from the normalized events of its stream."""

    def __init__(self) -> None:
        self.text: str | None = None

    def see(self, events: Iterable[Any]) -> None:
        for event in events:
            if getattr(event, "kind", None) == "message" and isinstance(event.text, str):
                if event.text.strip():
                    self.text = event.text.strip()[-MAX_REPLY_CHARS:]

    def final(self, state: RunState) -> str | None:
        """The full last message, unless the stream's final answer is another text."""
        clipped = state.final_message
        if self.text is None:
            return clipped
        if clipped is None or self.text.startswith(clipped.rstrip("\u2026")):
            return self.text
        return clipped


@dataclass(repr=False, eq=False, match_args=False)
class Run:
    """A finished live judge run."""

    observed: Observed
    model: str | None
    session_id: str | None
    duration_s: float
    transcript: str | None
    argv: list[str]
    tool_calls: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)


def run(
    prompt: str,
    settings: Settings,
    *,
    root: Path,
    artifacts: Path,
    should_stop: Callable[[], str | None] | None = None,
    before: str | None = None,
    jail: Any = None,
) -> Run:
    """Run the judge read-only in ``root``; prove the tree unchanged; return what it showed.

    ``jail`` (an ``invoke.Jail``) runs it in the worker's sandbox, the repository
    read-only there too.

    The run goes through ``invoke.execute`` (the same limits, breaker and process-group
    handling as a worker); its files go to ``artifacts/judge/`` (prompt, stream, stderr).
    Raises EnvironmentProblem (exit 4) when the provider's CLI is not installed.
    """
    provider = providers.get(settings.provider)
    folder = artifacts / JUDGE_FOLDER
    spec = RunSpec(
        prompt=prompt,
        cwd=root,
        model=settings.model,
        max_turns=settings.max_turns,
        sandbox="read-only",
        read_only=True,
        command=settings.command,
        agent=settings.agent,
        env_allow=settings.env_allow,
        handoff_path=folder / invoke.HANDOFF_NAME,
    )
    before = before or git.tree_hash(root)
    done = invoke.execute(
        provider,
        spec,
        artifacts=folder,
        root=root,
        timeout=settings.timeout,
        should_stop=should_stop,
        jail=jail,
    )
    after = git.tree_hash(root)
    record = done.record
    stream = root / str(record["transcript"]) if record.get("transcript") else None
    reply = _full_reply(settings.provider, stream, done.state)
    if settings.provider == "command":  # plain output: what it printed of a file is not its word
        reply = own_words(reply, root=root, tree=before)
    observed = observe(
        settings.provider,
        done.state,
        done.outcome,
        root=root,
        state_dir=os.path.relpath(artifacts.parent.parent, root),
        reply=reply,
    )
    observed.tree_before, observed.tree_after = before, after
    observed.changes = tree_changes(root, before, after)
    return Run(
        observed=observed,
        model=record.get("effective_model") or settings.model,
        session_id=record.get("session_id"),
        duration_s=float(record.get("duration_s") or 0.0),
        transcript=str(stream) if stream is not None else None,
        argv=list(record.get("command") or []),
        tool_calls=done.state.tool_call_count,
        usage=dict(record.get("usage") or {}),
        cost=dict(record.get("cost") or {}),
    )


def _full_reply(provider: str, stream: Path | None, state: RunState) -> str | None:
    """The last message read again from the saved stream, in full."""
    if stream is None or not stream.is_file():
        return state.final_message
    if provider == "command":  # plain output: its tail is the reply, reasons included
        text = file_tail(stream, MAX_REPLY_CHARS).strip()
        return text or state.final_message
    parser = providers.get(provider).parser()
    reply = Reply()
    with open(stream, "rb") as f:
        for line in f:
            reply.see(parser.feed(line))
    return reply.final(state)


def from_transcript(
    path: str | os.PathLike[str],
    *,
    provider: str | None = None,
    root: str | os.PathLike[str] | None = None,
) -> tuple[Observed, RunState]:
    """Judge a saved judge transcript (claude stream-json or json, codex JSONL); runs nothing."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(str(path), "no such file" if not p.exists() else "not a file")
    if provider is None and base.detect(p) == "command":
        raise BadInput(
            str(path), "not a judge transcript: expected claude stream-json or codex JSONL"
        )
    name = provider or base.detect(p)
    parser = providers.get(name).parser()
    reply = Reply()
    with open(p, "rb") as f:
        for line in f:
            reply.see(parser.feed(line))
    state = parser.finish()
    if not state.lines:
        raise BadInput(str(path), "empty: expected a judge transcript")
    # A saved stream has no exit status: without its final result it was cut short.
    outcome = (
        providers.get(name).classify(state, Exit(exit_code=0 if not state.result_is_error else 1))
        if state.result_seen
        else None
    )
    observed = observe(
        name,
        state,
        outcome,
        root=root if root is not None else stream_cwd(p),
        reply=reply.final(state),
    )
    return observed, state


def stream_cwd(path: Path, *, lines: int = 20) -> str | None:
    """The working directory a saved stream announces at its start (claude's init), if any.

    Paths the judge read are made relative to it, as they would be in a live run.
    """
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f):
                if n >= lines:
                    break
                try:
                    obj = loader.json_loads(raw)
                except ValueError:
                    continue
                cwd = obj.get("cwd") if isinstance(obj, dict) else None
                if isinstance(cwd, str) and os.path.isabs(cwd):
                    return cwd
    except OSError:
        return None
    return None


# --------------------------------------------------------------------------- one judgement


def evaluate(
    document: Attempt | None,
    *,
    contract_path: str | None = None,
    goal: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    transcript: str | None = None,
    cwd: str | os.PathLike[str] = ".",
) -> Judge:
    """One judgement: the ``judge`` section for ``document`` (which gains an attempt_id).

    With ``transcript`` a saved stream is judged and nothing runs (no contract, goal or
    repository needed). Otherwise the judge runs live in the repository at ``cwd``.
    """
    if transcript is not None:
        try:
            the_goal: Goal | None = goal_for(goal=goal, document=document, contract=None)
        except BadInput:
            the_goal = None  # the goal is in the transcript's prompt; not needed to read it
        observed, state = from_transcript(transcript, provider=provider)
        return section(
            observed,
            goal=the_goal,
            model=state.model,
            extra={
                "session_id": state.session_id,
                "transcript": str(transcript),
                "tool_calls": state.tool_call_count,
            },
        )

    ws = Workspace.open(contract_path=contract_path, document=document, cwd=cwd)
    contract = ws.contract
    the_goal = goal_for(goal=goal, document=document, contract=contract)
    settings = Settings.resolve(contract, provider=provider, model=model)
    root = ws.root
    doc: Mapping[str, Any] = document or {}
    before = git.tree_hash(root)
    prompt = build_prompt(
        the_goal.text,
        root=root,
        objective=contract.get("objective") if contract else None,
        diff=doc.get("diff"),
        verify=doc.get("verify"),
        tree=before,
    )
    state_dir = ws.state
    folder = artifacts.attempt_dir(
        state_dir, artifacts.assign_attempt_id(document if document is not None else {})
    )

    signals: list[str] = []

    def should_stop() -> str | None:
        return "cancelled" if signals or cancel.requested(state_dir) else None

    jail = read_only_jail(ws)
    with _caught(signals):
        done = run(
            prompt,
            settings,
            root=root,
            artifacts=folder,
            should_stop=should_stop,
            before=before,
            jail=jail,
        )
    if signals:
        raise Interrupted(f"{signals[0]}: the judge's process group was ended")
    return section(
        done.observed,
        goal=the_goal,
        model=done.model,
        extra={
            "session_id": done.session_id,
            "duration_s": done.duration_s,
            "transcript": artifacts.relative(Path(done.transcript), root)
            if done.transcript
            else None,
            "command": _shown_argv(done.argv),
            "tool_calls": done.tool_calls,
            # What the judge spent, for budgets that span runs (shapes as in run.json).
            "usage": done.usage,
            "cost": done.cost,
        },
    )


def read_only_jail(ws: Workspace) -> Any:
    """The worker's sandbox for a model that may read the repository but change nothing:
    the judge's, and the one that drafts a plan (``loopkit.plan.drafting``)."""
    return Jail(
        policy=containment.Policy.of(ws.contract),
        root=ws.root,
        git_dirs=[ws.index.parent, git.common_dir(ws.root)],
        state=ws.state,
        repo_writable=False,
    )


def run_read_only(
    prompt: str,
    settings: Settings,
    ws: Workspace,
    *,
    artifacts: Path,
    should_stop: Callable[[], str | None] | None = None,
) -> Run:
    """``run`` in ``ws``'s repository, in the read-only sandbox, SIGINT/SIGTERM ending the
    model's process group (``Interrupted``)."""
    signals: list[str] = []

    def stop() -> str | None:
        if signals:
            return "cancelled"
        return should_stop() if should_stop is not None else None

    with _caught(signals):
        done = run(
            prompt,
            settings,
            root=ws.root,
            artifacts=artifacts,
            should_stop=stop,
            jail=read_only_jail(ws),
        )
    if signals:
        raise Interrupted(f"{signals[0]}: the model's process group was ended")
    return done


@contextlib.contextmanager
def _caught(seen: list[str]) -> Iterator[None]:
    """SIGINT/SIGTERM noted instead of raised while the judge runs.

    The judge's CLI runs in a session of its own (so a timeout can end its whole group),
    out of reach of the terminal's Ctrl-C: the watchdog ends it when a signal is noted.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, _frame: Any) -> None:
        seen.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shown_argv(argv: list[str]) -> list[str]:
    """The judge's argv as recorded: the (long) prompt argument cut short."""
    return [a if len(a) <= 200 else a[:197] + "..." for a in argv]
