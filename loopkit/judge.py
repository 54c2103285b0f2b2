"""The judge: a read-only model decides a goal no command can check, and must show its work.

A judge run goes through a provider in read-only mode (claude limited to reading tools,
codex ``--sandbox read-only``). What it says counts only under three conditions:

* its reply ends with a well-formed ``VERDICT:`` line (``loopkit.verdict``) and the run
  ended normally -- a failed, cut or cancelled run is NOT_MET;
* a MET is *grounded*: the judge's own event stream shows it opened at least one file
  of the repository (a successful read tool call, or a read-only shell command such as
  ``cat``/``sed``/``nl``/``rg``). A MET without one is ``grounded: false``,
  ``trusted: false`` and counts as NOT_MET with the reason ``ungrounded``;
* it changed nothing: the working tree's hash is taken before and after, and any change
  (or a write the stream shows succeeding) refuses the verdict and reports what changed.

Its explanation, bounded, becomes ``judge.feedback`` for the next attempt's handoff.
The core raises ``LoopkitError`` subclasses and never prints.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from loopkit import verdict as verdicts
from loopkit.errors import BadInput, Interrupted
from loopkit.text import bound, clean, file_tail

if TYPE_CHECKING:
    from loopkit.providers.base import Outcome, RunState

#: Why a verdict is NOT_MET (``judge.reason``); None when the judge's MET stands.
NOT_MET = "not_met"  # the judge itself said NOT MET
UNGROUNDED = "ungrounded"  # MET without a single file read
NO_VERDICT = verdicts.NO_VERDICT  # no VERDICT line at all
MALFORMED = verdicts.MALFORMED  # the last VERDICT line says something else
TRUNCATED = "truncated"  # the stream ended before the provider's final result
RUN_FAILED = "run_failed"  # the run failed: API error, max turns, timeout, cancelled, ...
TREE_CHANGED = "tree_changed"  # the working tree's hash changed while the judge ran
NOT_READ_ONLY = "not_read_only"  # the stream shows a write that succeeded
REASONS = (
    NOT_MET,
    UNGROUNDED,
    NO_VERDICT,
    MALFORMED,
    TRUNCATED,
    RUN_FAILED,
    TREE_CHANGED,
    NOT_READ_ONLY,
)

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_TURNS = 25
#: Bounds: what goes into the judge's prompt and what comes back as feedback.
MAX_FEEDBACK_CHARS = 4000
MAX_PROMPT_FILES = 60
MAX_CHECK_TAIL_CHARS = 1500
MAX_GOAL_CHARS = 4000
#: The judge's own folder inside the attempt's artifacts (prompt, stream, stderr).
JUDGE_FOLDER = "judge"
#: Files that never count as reading the work: git's own and loopkit's state.
_NOT_WORK = (".git", ".loopkit")


# --------------------------------------------------------------------------- the goal


@dataclass(frozen=True)
class Goal:
    text: str
    source: str  # "--goal", "task", "contract"


def goal_for(
    *,
    goal: str | None,
    document: Mapping[str, Any] | None,
    contract: Mapping[str, Any] | None,
) -> Goal:
    """The goal to judge: --goal, else the piped task's GOAL text, else ``judge.goal``."""
    if goal is not None:
        if not goal.strip():
            raise BadInput("--goal", "empty: expected the goal to judge")
        return Goal(goal.strip(), "--goal")
    task = (document or {}).get("task")
    if isinstance(task, Mapping) and task.get("kind") == "goal":
        text = str(task.get("text") or "").strip()
        text = text[5:].strip() if text.upper().startswith("GOAL:") else text
        if not text:
            raise BadInput("<stdin>", "the goal task has no text", path="$.task.text")
        return Goal(text, "task")
    judge = (contract or {}).get("judge")
    if isinstance(judge, Mapping) and isinstance(judge.get("goal"), str) and judge["goal"].strip():
        return Goal(judge["goal"].strip(), "contract")
    raise BadInput(
        "--goal",
        "no goal to judge: pass --goal TEXT, pipe an attempt whose task is a GOAL, "
        "or set judge.goal in the contract",
    )


# --------------------------------------------------------------------------- the prompt


def build_prompt(
    goal: str,
    *,
    root: str | os.PathLike[str] | None = None,
    objective: str | None = None,
    diff: Mapping[str, Any] | None = None,
    verify: Mapping[str, Any] | None = None,
    tree: str | None = None,
) -> str:
    """The judge's instructions: the goal, what changed, the checks, and how to answer.

    Bounded: at most ``MAX_PROMPT_FILES`` changed files and ``MAX_CHECK_TAIL_CHARS`` of
    each failing check's output. Checks recorded for another ``tree`` than the current
    one are marked stale. The worker's own claims are left out on purpose: the judge
    looks at the files, not at what anyone says about them.
    """
    parts = [
        "You are a strict, read-only judge. Decide whether the GOAL below is met in the "
        + (f"repository at {root}." if root else "repository in the current directory."),
        "You may only read: open files, list and search them. Do not create, edit, move "
        "or delete anything, and run nothing that changes the repository.",
        "",
        "GOAL:",
        bound(goal.strip(), MAX_GOAL_CHARS),
    ]
    if objective and objective.strip() and objective.strip() != goal.strip():
        parts += ["", "CONTEXT (the loop's objective):", bound(objective.strip(), 1000)]
    parts += ["", *_changes(diff)]
    checks = _checks(verify, tree)
    if checks:
        parts += ["", *checks]
    parts += [
        "",
        "HOW TO JUDGE:",
        "1. Open and read the files that decide the goal. A verdict given without opening "
        "a file is not trusted, whatever it says.",
        "2. Judge only what the files show, not what anyone claims about them.",
        "3. Give your reasons. If the goal is not met, say concretely what is missing or "
        "wrong, and where, so the next attempt can fix it.",
        "4. Be brief: a few sentences, at most a short list.",
        "5. End your reply with one line, exactly one of:",
        "VERDICT: MET",
        "VERDICT: NOT MET",
        "Write the word VERDICT followed by a colon nowhere else in your reply.",
    ]
    return "\n".join(parts) + "\n"


def _changes(diff: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(diff, Mapping):
        return ["WHAT CHANGED: not recorded; look at the repository as it is."]
    files = [f for f in diff.get("files") or () if isinstance(f, Mapping)]
    base = diff.get("base")
    head = f"WHAT CHANGED (since {base}):" if base else "WHAT CHANGED:"
    if not files:
        return [head, "  nothing: the working tree is the same as its base."]
    lines = [head]
    for f in files[:MAX_PROMPT_FILES]:
        lines.append(
            f"  {f.get('status', '?')} {f.get('path')} (+{f.get('added', 0)} -{f.get('deleted', 0)})"
        )
    if len(files) > MAX_PROMPT_FILES:
        lines.append(f"  ... and {len(files) - MAX_PROMPT_FILES} more files")
    for v in (diff.get("violations") or ())[:10]:
        if isinstance(v, Mapping):
            lines.append(f"  scope violation: {v.get('rule')} {v.get('path')}")
    return lines


def _checks(verify: Mapping[str, Any] | None, tree: str | None) -> list[str]:
    if not isinstance(verify, Mapping):
        return []
    checks = [c for c in verify.get("checks") or () if isinstance(c, Mapping)]
    if not checks:
        return []
    stale = tree is not None and verify.get("tree") not in (None, tree)
    where = "on an EARLIER state of the tree: stale" if stale else "on this tree"
    lines = [f"CHECKS (run by loopkit {where}):"]
    for c in checks:
        mark = "PASS" if c.get("passed") else "FAIL"
        lines.append(f"  {mark} {c.get('name')}: {c.get('command')} (exit {c.get('exit_code')})")
        tail = str(c.get("output_tail") or "").strip()
        if not c.get("passed") and tail:
            cut = tail[-MAX_CHECK_TAIL_CHARS:]
            lines += ["    " + line for line in cut.splitlines()]
    return lines


# --------------------------------------------------------------------------- grounding


def grounding(
    paths: Iterable[str], *, root: str | os.PathLike[str] | None, state_dir: str | None = None
) -> list[str]:
    """The files that ground a verdict: read inside the repository, relative to its root.

    Absolute paths under ``root`` become relative; paths outside it, escaping it with
    ``..``, or inside ``.git`` / loopkit's state folder do not count. Without a root (a
    transcript judged elsewhere) absolute paths are kept as they are.
    """
    top = Path(root).resolve() if root is not None else None
    hidden = set(_NOT_WORK)
    if state_dir and not os.path.isabs(state_dir) and PurePosixPath(state_dir).parts:
        hidden.add(PurePosixPath(state_dir).parts[0])
    out: dict[str, None] = {}
    for raw in paths:
        if not isinstance(raw, str) or not raw.strip():
            continue
        rel = _inside(raw.strip(), top)
        if rel is None:
            continue
        parts = PurePosixPath(rel).parts
        if not parts or (parts[0] in hidden and not os.path.isabs(rel)):
            continue
        out.setdefault(rel, None)
    return list(out)


def _inside(path: str, top: Path | None) -> str | None:
    if os.path.isabs(path):
        if top is None:
            return os.path.normpath(path)
        for candidate in (Path(os.path.normpath(path)), Path(os.path.realpath(path))):
            try:
                rel = candidate.relative_to(top)
            except ValueError:
                continue
            return rel.as_posix() if rel.parts and ".." not in rel.parts else None
        return None
    norm = os.path.normpath(path).replace(os.sep, "/")
    if norm == "." or norm == ".." or norm.startswith("../"):
        return None
    return norm


# --------------------------------------------------------------------------- the verdict


@dataclass
class Observed:
    """What a judge run (or a saved transcript of one) showed, as loopkit saw it."""

    provider: str
    reply: str | None
    files_read: list[str]  # grounding(): inside the repository
    ended: bool  # the stream reached the provider's final result
    failed: bool  # the run failed (API error, max turns, timeout, cancelled, crash)
    stop_reason: str | None = None
    error: str | None = None
    files_written: list[str] = field(default_factory=list)  # writes the stream shows succeed
    denied: list[str] = field(default_factory=list)  # tool calls the read-only mode refused
    tree_before: str | None = None
    tree_after: str | None = None
    changes: list[dict[str, str]] = field(default_factory=list)


def decide(observed: Observed) -> tuple[verdicts.Reading, str | None]:
    """(what the reply says, why the verdict is NOT_MET or None when MET stands)."""
    reading = verdicts.parse(observed.reply)
    if observed.tree_before and observed.tree_after and observed.tree_before != observed.tree_after:
        return reading, TREE_CHANGED
    if observed.files_written:
        return reading, NOT_READ_ONLY
    if observed.failed:
        return reading, RUN_FAILED
    if not observed.ended:
        return reading, TRUNCATED
    if reading.reason is not None:
        return reading, reading.reason
    if reading.said == verdicts.NOT_MET:
        return reading, NOT_MET
    if not observed.files_read:
        return reading, UNGROUNDED
    return reading, None


def section(
    observed: Observed,
    *,
    goal: Goal | None = None,
    model: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``judge`` section of the attempt document."""
    reading, reason = decide(observed)
    met = reason is None
    grounded = bool(observed.files_read)
    body: dict[str, Any] = {
        "verdict": verdicts.MET if met else verdicts.NOT_MET,
        "grounded": grounded,
        "trusted": met or (reason == NOT_MET and grounded),
        "files_read": list(observed.files_read),
        "feedback": feedback(observed, reading, reason),
        "provider": observed.provider,
        "reason": reason,
        "said": reading.said,
        "verdict_line": clean(reading.line) if reading.line is not None else None,
        "model": model,
        "stop_reason": observed.stop_reason,
        "error": clean(observed.error) if observed.error is not None else None,
        "denied": [clean(d) for d in observed.denied],
        "files_written": list(observed.files_written),
        "read_only": {
            "checked": observed.tree_before is not None and observed.tree_after is not None,
            "tree_before": observed.tree_before,
            "tree_after": observed.tree_after,
            "changed": bool(
                observed.tree_before
                and observed.tree_after
                and observed.tree_before != observed.tree_after
            ),
            "changes": list(observed.changes),
        },
    }
    if goal is not None:
        body["goal"] = goal.text
        body["goal_source"] = goal.source
    if extra:
        body.update(extra)
    return body


def feedback(observed: Observed, reading: verdicts.Reading, reason: str | None) -> str:
    """What the next attempt's handoff carries: the judge's reasons, bounded."""
    said = reading.reasons.strip()
    if reason is None:
        head = "The judge found the goal met."
    elif reason == NOT_MET:
        head = "The judge found the goal NOT met." + (" Its reasons:" if said else "")
    elif reason == UNGROUNDED:
        head = (
            "The judge said MET without opening a single file; an ungrounded verdict is not "
            "trusted, so the goal still counts as not met."
        )
    elif reason == TREE_CHANGED:
        paths = ", ".join(f"{c['status']} {c['path']}" for c in observed.changes[:20])
        head = (
            "The judge changed the working tree"
            + (f" ({paths})" if paths else "")
            + "; its verdict is refused."
        )
    elif reason == NOT_READ_ONLY:
        head = (
            "The judge wrote "
            + ", ".join(observed.files_written[:20])
            + " although it runs read-only; its verdict is refused."
        )
    elif reason == RUN_FAILED:
        head = f"The judge's run failed ({observed.stop_reason or 'error'}"
        head += f": {observed.error})." if observed.error else ")."
    elif reason == TRUNCATED:
        head = "The judge's reply was cut short (no final result in its stream)."
    elif reason == NO_VERDICT:
        head = "The judge gave no VERDICT line, so the goal counts as not met."
    else:
        head = f"The judge's last VERDICT line is not a verdict: {reading.line!r}."
    text = head if not said else f"{head}\n{said}"
    return bound(clean(text), MAX_FEEDBACK_CHARS)  # the reply is the judge's own words


def passed(body: Mapping[str, Any]) -> bool:
    """Exit 0 material: a MET that is grounded (and so trusted)."""
    return bool(
        body.get("verdict") == verdicts.MET and body.get("grounded") and body.get("trusted")
    )


# --------------------------------------------------------------------------- running


@dataclass
class Settings:
    """How to run the judge, from the contract's ``judge`` section and the flags."""

    provider: str
    model: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    max_turns: int = DEFAULT_MAX_TURNS
    command: str | None = None
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
                "no judge provider: pass --provider claude|codex or set judge.provider "
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


def observe(
    provider: str,
    state: RunState,
    outcome: Outcome | None,
    *,
    root: str | os.PathLike[str] | None,
    state_dir: str | None = None,
    reply: str | None = None,
) -> Observed:
    """Turn a parsed stream (and how the run ended) into what the verdict is decided on."""
    failed = outcome.is_error if outcome is not None else bool(state.result_is_error)
    denied = [_denial(d) for d in state.permission_denials if isinstance(d, Mapping)] + [
        f"{t.command or t.name}: {(t.error or 'failed').splitlines()[-1]}"[:300]
        for t in state.tool_calls
        if t.ok is False and (_is_write(t.name) or _writes(t.command))
    ]
    written = grounding(state.files_written, root=root) if root is not None else state.files_written
    return Observed(
        provider=provider,
        reply=reply if reply is not None else state.final_message,
        files_read=grounding(state.files_read, root=root, state_dir=state_dir),
        ended=bool(state.result_seen),
        failed=failed,
        stop_reason=outcome.stop_reason if outcome is not None else None,
        error=outcome.error if outcome is not None and outcome.is_error else None,
        files_written=list(written),
        denied=denied[:50],
    )


def _denial(d: Mapping[str, Any]) -> str:
    tool = str(d.get("tool") or "?")
    inp = d.get("input")
    target = ""
    if isinstance(inp, Mapping):
        target = str(inp.get("file_path") or inp.get("command") or inp.get("path") or "")
    return f"{tool} {target}".strip()[:300]


def _is_write(name: str) -> bool:
    return name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch", "file_change")


_WRITING = re.compile(
    r"(^|[^<>&0-9])>>?\s*[^&\s>]|\b(tee|rm|mv|cp|touch|mkdir|rmdir|truncate|chmod|ln|dd)\s"
    r"|\bsed\s+(-[a-zA-Z]*i|--in-place)|\bgit\s+(add|commit|checkout|reset|restore|rm|mv|stash|apply)\b"
)


def _writes(command: str | None) -> bool:
    """Whether a shell command line looks like it changes files (a judge must not)."""
    return bool(command) and _WRITING.search(command or "") is not None


def tree_changes(root: Path, before: str, after: str) -> list[dict[str, str]]:
    """What differs between two tree hashes: [{status, path}], statuses as lk-diff words."""
    from loopkit import git

    if before == after:
        return []
    return [
        {"status": _STATUS.get(status, status), "path": path}
        for path, status in git.changed_paths(root, before, after)
    ][:200]


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}


@dataclass
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
    from loopkit import git, invoke, providers
    from loopkit.providers.base import RunSpec

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
    observed = observe(
        settings.provider,
        done.state,
        done.outcome,
        root=root,
        state_dir=os.path.relpath(artifacts.parent.parent, root),
        reply=_full_reply(settings.provider, stream, done.state),
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
    from loopkit import providers

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
    from loopkit.providers import base

    p = Path(path)
    if not p.is_file():
        raise BadInput(str(path), "no such file" if not p.exists() else "not a file")
    if provider is None and base.detect(p) == "command":
        raise BadInput(
            str(path), "not a judge transcript: expected claude stream-json or codex JSONL"
        )
    from loopkit import providers

    name = provider or base.detect(p)
    parser = providers.get(name).parser()
    reply = Reply()
    with open(p, "rb") as f:
        for line in f:
            reply.see(parser.feed(line))
    state = parser.finish()
    if not state.lines:
        raise BadInput(str(path), "empty: expected a judge transcript")
    from loopkit.providers.base import Exit

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
    from loopkit import loader

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
    document: dict[str, Any] | None,
    *,
    contract_path: str | None = None,
    goal: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    transcript: str | None = None,
    cwd: str | os.PathLike[str] = ".",
) -> dict[str, Any]:
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

    from loopkit import artifacts, cancel, git
    from loopkit.workspace import Workspace

    ws = Workspace.open(contract_path=contract_path, document=document, cwd=cwd)
    contract = ws.contract
    the_goal = goal_for(goal=goal, document=document, contract=contract)
    settings = Settings.resolve(contract, provider=provider, model=model)
    root = ws.root
    doc = document or {}
    before = git.tree_hash(root)
    prompt = build_prompt(
        the_goal.text,
        root=root,
        objective=(contract or {}).get("objective"),
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

    from loopkit import containment
    from loopkit.invoke import Jail

    jail = Jail(
        policy=containment.Policy.of(contract),
        root=root,
        git_dirs=[ws.index.parent, git.common_dir(root)],
        state=state_dir,
        repo_writable=False,
    )
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


@contextlib.contextmanager
def _caught(seen: list[str]) -> Iterator[None]:
    """SIGINT/SIGTERM noted instead of raised while the judge runs.

    The judge's CLI runs in a session of its own (so a timeout can end its whole group),
    out of reach of the terminal's Ctrl-C: the watchdog ends it when a signal is noted.
    """
    import signal
    import threading

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
