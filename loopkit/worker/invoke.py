"""One bounded worker attempt: handoff, limits, live parsing, breaker, side effects, record.

``attempt(...)`` is what ``lk-invoke`` runs: it builds the handoff from the piped document
(task, contract, the previous attempt's feedback, the memory file), starts the provider's
CLI through ``proc.spawn`` with an allow-listed environment, saves its native stream under
``.loopkit/artifacts/<attempt_id>/`` while parsing it line by line, stops the whole process
group on the wall-clock timeout, on cancellation (``lk cancel``) or when the breaker trips,
and turns what it saw into the ``run`` record (schemas/run.json).

``execute(provider, spec, ...)`` is the reusable middle: any caller (the read-only judge)
can run one provider invocation with the same limits and get the record and parsed state.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from loopkit import control as controls
from loopkit import git, handoff, proc
from loopkit.boundary import containment, dialects, secrets
from loopkit.document import attach
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.evidence import cleanroom, specialfiles, statcache, verify
from loopkit.state import artifacts, cancel
from loopkit.state.artifacts import relative
from loopkit.text import clean, file_tail
from loopkit.values import field, record
from loopkit.worker import providers
from loopkit.worker.breaker import DEFAULT_REPEATS, Breaker
from loopkit.worker.providers.base import (
    Event,
    Exit,
    Invocation,
    JsonObject,
    Outcome,
    Provider,
    RunSpec,
    RunState,
    StreamParser,
    detect,
)
from loopkit.worker.providers.shell import side_effects
from loopkit.workspace import clear_cache, remembered, resolve_contract, state_folder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.containment import SandboxRecord
    from loopkit.boundary.usage import MeterSection
    from loopkit.sections import Attempt, Contract, JSONObject

DEFAULT_TIMEOUT_S = 900.0
MAX_SIDE_EFFECTS = 100
STREAM_NAME = "stream.jsonl"
OUTPUT_NAME = "output.log"
STDERR_NAME = "stderr.log"
HANDOFF_NAME = "handoff.md"


class RunUsage(TypedDict):
    input_tokens: int
    output_tokens: int
    turns: int
    tool_calls: int


class RunCost(TypedDict, total=False):
    usd: float | None
    source: str
    trusted: bool
    reported_usd: float | None


class SideEffect(TypedDict):
    tool: str
    command: str
    kinds: list[str]


class RunRecord(TypedDict, total=False):
    """The ``run`` section (schemas/run.json): what one worker run did and how it ended,
    what loopkit saw of it (its meter, its sandbox) and, from ``attempt``, of the tree."""

    provider: str
    command: list[str]
    session_id: str | None
    exit_code: int | None
    is_error: bool
    stop_reason: str
    claimed_complete: bool
    final_message: str | None
    effective_model: str | None
    usage: RunUsage
    cost: RunCost
    api_retries: int
    api_error_status: int | None
    tool_errors: int
    duration_s: float
    transcript: str | None
    resume_after: str | None
    error: str | None
    side_effects: list[SideEffect]
    stuck: JsonObject | None
    files_read: list[str]
    files_written: list[str]
    permission_denials: list[JsonObject]
    terminal_reason: str | None
    refused: list[JsonObject]
    meter: MeterSection
    sandbox: SandboxRecord
    handoff: str
    stderr: str
    attempt_id: str
    base: str
    git_control: JsonObject
    ignored_at_start: list[str]
    special_files: list[Any]
    carry: Any
    state_seal: Any


@record
class Result:
    record: RunRecord
    state: RunState
    outcome: Outcome
    invocation: Invocation


class _Watch:
    """Live observers fed every normalized event."""

    breaker: Breaker | None
    stop: Callable[[str], None]
    side_effects: list[SideEffect]

    def __init__(
        self,
        breaker: Breaker | None,
        stop: Callable[[str], None],
        side_effects: list[SideEffect] | None = None,
    ) -> None:
        self.breaker = breaker
        self.stop = stop
        self.side_effects = [] if side_effects is None else side_effects

    def __call__(self, event: Event) -> None:
        tool = event.tool
        if tool is None:
            return
        if event.kind == "tool_call":
            if not tool.command:
                return
            kinds = side_effects(tool.command)
            if kinds and len(self.side_effects) < MAX_SIDE_EFFECTS:
                self.side_effects.append(
                    {"tool": tool.name, "command": tool.command[:500], "kinds": kinds}
                )
        elif event.kind == "tool_result" and self.breaker is not None and tool.ok is not None:
            if tool.ok:
                self.breaker.observe(tool.name, True, wrote=bool(tool.files_written))
                return
            small = {k: v for k, v in tool.input.items() if not isinstance(v, str) or len(v) < 300}
            if self.breaker.observe(tool.name, False, tool.error, input=small):
                self.stop("stuck")


def execute(
    provider: Provider,
    spec: RunSpec,
    *,
    artifacts: Path,
    root: Path | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    breaker_repeats: int | None = DEFAULT_REPEATS,
    should_stop: Callable[[], str | None] | None = None,
    jail: Jail | None = None,
    progress: Any = None,
    started_mark: Path | None = None,
) -> Result:
    """Run one invocation to its end (or its limit) and return the normalized record.

    With ``jail`` the worker starts inside the sandbox it describes (``run.sandbox``
    records what was used, and why). When the provider talks to a model API and a key
    for it is set (``worker.meter`` not off), the worker talks through the run's meter
    (``loopkit.boundary.meter``): it gets a token, never the key, and ``run.meter``
    records what went over the wire.
    """
    artifacts.mkdir(parents=True, exist_ok=True)
    if spec.handoff_path is None:
        spec.handoff_path = artifacts / HANDOFF_NAME
    inv = provider.build(spec)
    if provider.locate(inv) is None:
        raise EnvironmentProblem(provider.not_found(inv))
    meter = _meter_for(provider, spec, artifacts, timeout)
    try:
        if meter is not None:
            inv = provider.metered(inv, meter.url, meter.token, meter.upstream)
            # Metered, the worker holds the run's token and no other credential of the
            # person's (another vendor's key, an OAuth token, a cloud login) unless the
            # contract names it and marks it unmetered.
            kept = secrets.withhold(
                inv.env,
                token=meter.token,
                named=spec.env_allow,
                unmetered=spec.unmetered,
                metering=meter.upstream.key_var,
            )
            inv = inv.but(env=kept.env)
            meter.withheld, meter.unmetered = kept.withheld, kept.unmetered
        if jail is not None:
            jail.way = _way_for(jail, meter)
        return _execute(
            provider,
            spec,
            inv,
            artifacts=artifacts,
            root=root,
            timeout=timeout,
            breaker_repeats=breaker_repeats,
            should_stop=should_stop,
            jail=jail,
            progress=progress,
            started_mark=started_mark,
            meter=meter,
        )
    finally:
        if jail is not None and jail.way is not None:
            jail.way.stop()
        if meter is not None:
            meter.stop()


def _way_for(jail: Jail, meter: Any) -> Any:
    """The run's egress (``loopkit.boundary.egress``) when its sandbox will have no
    network but the meter and the allowed hosts: ``sandbox.network: egress``, the default
    for a metered worker, where a sandbox can start."""
    from loopkit.boundary import egress, sandbox

    if jail.policy.mode == "off" or jail.policy.network_for(meter is not None) != "egress":
        return None
    if not sandbox.probe().available:
        return None
    return egress.Way.start(jail.policy.hosts, meter)


#: Transient answers in a row on the wire (429, 5xx) after which the meter stops a worker
#: that keeps retrying them in silence: the loop's own backoff takes over from there.
WIRE_STREAK = 8
METER_LOG = "meter.jsonl"


def _meter_for(provider: Provider, spec: RunSpec, artifacts: Path, timeout: float | None) -> Any:
    """The run's meter, started; None when it is off or there is no key to hide."""
    if spec.meter is False or spec.meter == "off":
        return None
    upstream = provider.upstream(spec)
    if not dialects.wanted(spec.meter, upstream):
        if spec.meter in ("on", True) and provider.api is not None:
            names = " or ".join(provider.api.key_vars)
            raise EnvironmentProblem(f"worker.meter: on, but no key to meter: set {names}")
        return None
    assert upstream is not None
    from loopkit.boundary import meter as metering  # the proxy's http modules: only metered

    ttl = (timeout or DEFAULT_TIMEOUT_S) + metering.TTL_MARGIN_S
    try:
        return metering.Meter.start(upstream, ttl_s=ttl, log=artifacts / METER_LOG)
    except ValueError as e:
        raise BadInput("worker.upstream", str(e)) from None


def _execute(
    provider: Provider,
    spec: RunSpec,
    inv: Invocation,
    *,
    artifacts: Path,
    root: Path | None,
    timeout: float | None,
    breaker_repeats: int | None,
    should_stop: Callable[[], str | None] | None,
    jail: Jail | None,
    progress: Any,
    started_mark: Path | None,
    meter: Any,
) -> Result:
    assert spec.handoff_path is not None
    inv.write_files()
    if spec.handoff_path not in inv.files:
        spec.handoff_path.write_text(spec.prompt, encoding="utf-8")
    stream_path = artifacts / (OUTPUT_NAME if provider.name == "command" else STREAM_NAME)
    stderr_path = artifacts / STDERR_NAME
    start, sandboxed, scratch = inv, None, None
    if jail is not None:
        contained = jail.apply(provider, inv)
        start = inv.but(argv=contained.argv, env=contained.env)
        sandboxed, scratch = contained.record, contained.scratch
    parser = provider.parser()
    started = time.monotonic()
    already = should_stop() if should_stop is not None else None
    if not already and started_mark is not None:
        try:
            started_mark.write_bytes(b"")
        except OSError:
            pass  # a missing mark only means the attempt is charged: the safe side
    finished, watch = _run(
        start,
        f"{inv.argv[0]} not found: {provider.install_hint}",
        parser,
        stream_path=stream_path,
        stderr_path=stderr_path,
        timeout=timeout,
        breaker_repeats=breaker_repeats,
        should_stop=should_stop,
        progress=progress,
        meter=meter,
        already=already,
    )
    if scratch is not None and not already:
        shutil.rmtree(scratch, ignore_errors=True)
    if not already and sandboxed is not None and sandboxed.get("used"):
        _started_in_sandbox(finished.exit_code, stream_path, stderr_path, started_mark)
    state = parser.finish()
    end = Exit(
        exit_code=finished.exit_code,
        stopped=finished.stopped,
        stderr_tail=file_tail(stderr_path),
    )
    outcome = provider.classify(state, end)
    metered = meter.section() if meter is not None else None
    if metered is not None:
        outcome = _wire_outcome(outcome, finished.stopped, metered)
    if finished.stopped == "stuck" and watch.breaker and watch.breaker.tripped:
        trip = watch.breaker.tripped
        outcome.error = trip.message()
    record = record_from(
        provider.name,
        state,
        outcome,
        argv=inv.argv,
        exit_code=finished.exit_code,
        duration_s=time.monotonic() - started,
        transcript=_rel(stream_path, root),
        cost_trusted=inv.cost_trusted,
    )
    record["side_effects"] = watch.side_effects
    if metered is not None:
        _apply_meter(record, metered, root)
    if sandboxed is not None:
        record["sandbox"] = sandboxed
        if jail is not None and jail.way is not None and sandboxed.get("used"):
            sandboxed["egress"] = jail.way.section()
    record["stuck"] = (
        watch.breaker.tripped.as_dict() if watch.breaker and watch.breaker.tripped else None
    )
    record["handoff"] = _rel(spec.handoff_path, root)
    record["stderr"] = _rel(stderr_path, root)
    if record["effective_model"] is None:
        record["effective_model"] = inv.model or spec.model
    record["files_read"] = [_inside(f, spec.cwd) for f in record["files_read"]]
    record["files_written"] = [_inside(f, spec.cwd) for f in record["files_written"]]
    return Result(record=record, state=state, outcome=outcome, invocation=inv)


def _run(
    inv: Invocation,
    missing: str,
    parser: StreamParser,
    *,
    stream_path: Path,
    stderr_path: Path,
    timeout: float | None,
    breaker_repeats: int | None,
    should_stop: Callable[[], str | None] | None,
    progress: Any,
    meter: Any,
    already: str | None,
) -> tuple[proc.Finished, _Watch]:
    """Start ``inv`` and read its stream to the end: saved line by line, parsed, watched
    (the breaker, side effects, the progress line, the meter's streak of transient
    answers); the whole process group stopped on an interrupt. ``missing``: the one line
    when its program is not there. ``already``: why it is not started at all (a stop
    asked before the start: a persisted ``lk cancel``)."""

    if already:
        stream_path.write_bytes(b"")
        stderr_path.write_bytes(b"")
        watch = _Watch(breaker=None, stop=lambda reason: None)
        return proc.Finished(exit_code=None, duration_s=0.0, stopped=already), watch
    try:
        running = proc.spawn(
            inv.argv,
            cwd=inv.cwd,
            env=inv.env,
            stdin=inv.stdin,
            stderr_path=stderr_path,
            timeout=timeout,
            should_stop=should_stop,
        )
    except FileNotFoundError:
        raise EnvironmentProblem(missing) from None
    watch = _Watch(breaker=Breaker(breaker_repeats) if breaker_repeats else None, stop=running.stop)
    if meter is not None:
        meter.watch(WIRE_STREAK, lambda: running.stop("transient"))
    try:
        with open(stream_path, "wb") as sink:
            for line in running.lines():
                sink.write(line)
                for event in parser.feed(line):
                    watch(event)
                    if progress is not None:
                        progress.event(event, parser.state)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or failing: the worker runs in a session of its
        # own, so no signal reaches it unless loopkit ends its group here.
        running.stop("cancelled")
        running.wait()
        raise
    return running.wait(), watch


def _started_in_sandbox(
    exit_code: int | None, stream: Path, stderr: Path, started_mark: Path | None
) -> None:
    """A sandbox that never started (bwrap's own complaint alone, exit 1, no output) is a
    set-up error: the worker never ran, so its attempt is not charged (the mark goes) and
    the run is not its crash. Raises :class:`SandboxUnavailable` then (exit 4)."""
    from loopkit.boundary import sandbox

    if exit_code != 1 or stream.stat().st_size:
        return
    why = sandbox.failed_to_start(exit_code, file_tail(stderr).encode("utf-8"))
    if why:
        if started_mark is not None:
            started_mark.unlink(missing_ok=True)
        raise sandbox.SandboxUnavailable(f"the worker's sandbox did not start: {why}")


def _wire_outcome(outcome: Outcome, stopped: str | None, metered: MeterSection) -> Outcome:
    """The outcome with what the meter saw on the wire: a worker the meter stopped after
    ``WIRE_STREAK`` transient answers in a row, and a failed run whose CLI hid the status
    (Claude Code reports a 529 it gave up on as no status at all), are rate limited when
    the last answer was a 429 and an API error otherwise -- transient, either way."""
    last = metered.get("last_status")
    wire = "rate_limited" if last == 429 else "api_error"
    if stopped == "transient":
        n = metered.get("transient", 0)
        return Outcome(
            wire,
            True,
            f"the meter saw {n} transient answers (last HTTP {last}); the worker was stopped "
            "while it kept retrying",
        )
    if (
        outcome.is_error
        and outcome.stop_reason in ("api_error", "crashed")
        and isinstance(last, int)
        and (last == 429 or last >= 500)
    ):
        return Outcome(wire, True, outcome.error, outcome.resume_after)
    return outcome


def _apply_meter(record: RunRecord, metered: MeterSection, root: Path | None) -> None:
    """``run.meter``, and what it settles in the rest of the record: the retries seen on
    the wire (whichever CLI hid them), the last failing status, the model actually served,
    and the cost -- the metered usage at the price table's prices, trusted over the
    CLI's own figure (which prices the model *name* it sent) when the answers came from
    the vendor's own hosts or a host the table names for that model."""
    section = metered.copy()
    section.pop("listed", None)
    log = section.get("log")
    if log:
        section["log"] = _rel(Path(log), root)
    record["meter"] = section
    record["api_retries"] = max(int(record.get("api_retries") or 0), int(section["retried"]))
    last = section.get("last_status")
    if record.get("is_error") and record.get("api_error_status") is None and isinstance(last, int):
        if last == 429 or last >= 500:
            record["api_error_status"] = last
    if section["models"]:
        record["effective_model"] = section["models"][-1]
    cost = section["cost"]
    reported = record["cost"].get("usd")
    if cost.get("usd") is not None and (cost.get("trusted") or reported is None):
        source = f"loopkit meter: {cost['source']}"
        if not cost.get("trusted"):
            source += f"; the upstream {section['upstream']} is not the vendor's"
        record["cost"] = {
            "usd": cost["usd"],
            "source": source,
            "trusted": bool(cost.get("trusted")),
            "reported_usd": reported,
        }


@record
class Jail:
    """Where a run's sandbox is: the repository, its git folders, the state folder and
    the control files, and the contract's policy (``loopkit.boundary.containment``)."""

    policy: Any
    root: Path
    git_dirs: list[Path]
    state: Path
    read_only: list[Path] = field(default_factory=list)
    repo_writable: bool = True
    way: Any = None  # the run's egress, when its sandbox has no network (set by apply)

    def apply(self, provider: Provider, inv: Invocation) -> Any:

        inner, writable = provider.contained(inv) if self.policy.mode != "off" else (inv, [])
        state = str(self.state.resolve())
        visible = {
            var: Path(value)
            for var, value in inner.env.items()
            if value.startswith(state + os.sep) and os.path.isfile(value)
        }
        return containment.contain(
            inner.argv,
            inner.env,
            policy=self.policy,
            root=self.root,
            git_dirs=self.git_dirs,
            state=self.state,
            writable=writable,
            read_only=self.read_only,
            visible=visible,
            repo_writable=self.repo_writable,
            way=self.way,
        )


def record_from(
    provider: str,
    state: RunState,
    outcome: Outcome,
    *,
    argv: list[str] | None = None,
    exit_code: int | None = None,
    duration_s: float | None = None,
    transcript: str | None = None,
    cost_trusted: bool = False,
) -> RunRecord:
    """The ``run`` section (schemas/run.json) from a parsed stream and its outcome."""
    usd = state.cost_usd
    record: RunRecord = {
        "provider": provider,
        "command": list(argv or []),
        "session_id": state.session_id,
        "exit_code": exit_code,
        "is_error": outcome.is_error,
        "stop_reason": outcome.stop_reason,
        "claimed_complete": outcome.claimed_complete,
        # The worker's words, shown later on terminals and in reports: no control sequences.
        "final_message": clean(state.final_message) if state.final_message is not None else None,
        "effective_model": state.model,
        "usage": {
            "input_tokens": state.input_tokens,
            "output_tokens": state.output_tokens,
            "turns": state.turns,
            "tool_calls": state.tool_call_count,
        },
        "cost": {
            "usd": usd,
            "source": state.cost_source or f"not reported by {provider}",
            "trusted": bool(cost_trusted and usd is not None),
        },
        "api_retries": state.api_retries,
        "api_error_status": state.api_error_status,
        "tool_errors": state.tool_errors,
        "duration_s": round(duration_s, 3) if duration_s is not None else 0.0,
        "transcript": transcript,
        "resume_after": outcome.resume_after,
        "error": clean(outcome.error) if outcome.error is not None else None,
        "side_effects": [],
        "stuck": None,
        "files_read": state.files_read[:200],
        "files_written": state.files_written[:200],
        "permission_denials": state.permission_denials,
        "terminal_reason": state.terminal_reason,
    }
    if state.refused or provider == "acp":
        # A provider that asks before a write (acp): what loopkit refused, and why.
        record["refused"] = state.refused
    return record


def _inside(path: str, root: Path) -> str:
    """A path the worker named, relative to the repository when it is inside it."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return path


def _rel(path: Path, root: Path | None) -> str:
    if root is None:
        return str(path)

    return relative(path.resolve(), root.resolve())


# --------------------------------------------------------------------------- lk-invoke


@record
class Request:
    """What lk-invoke was asked to do (flags win over the contract)."""

    document: Attempt | None = None
    contract_path: str | None = None
    provider: str | None = None
    command: str | None = None
    model: str | None = None
    resume: str | None = None
    timeout: float | None = None
    cwd: Path = field(default_factory=Path.cwd)
    environ: Mapping[str, str] | None = None
    #: Live lines for a person (``loopkit.worker.progress.Progress``); None: silent.
    progress: Any = None
    #: A file written the moment the worker is about to start (``lk attempt --keep``'s
    #: ``PREFIX-worker``): a recovery tells an attempt whose worker ran from one that
    #: stopped before it (``ratchet.steps.worker_ran``).
    started_mark: Path | None = None


@record
class Plan:
    provider: Provider
    spec: RunSpec
    contract: Contract | None
    worker: dict[str, Any]
    timeout: float


def plan(req: Request, *, root: Path | None = None) -> Plan:
    """Resolve contract, provider and handoff; nothing is started."""

    found = resolve_contract(req.contract_path, req.document, start=req.cwd, root=root)
    contract = found.contract
    worker: dict[str, Any] = dict((contract.get("worker") if contract else None) or {})
    name = req.provider or ("command" if req.command else worker.get("provider") or "command")
    try:
        provider = providers.get(name)
    except KeyError as e:
        raise BadInput("--provider", str(e.args[0])) from None
    command = req.command or (worker.get("command") if name == "command" else None)
    if name == "command" and not command:
        raise BadInput(
            "--command",
            "the command provider needs a command: --command CMD or worker.command in the contract",
        )
    doc: Mapping[str, Any] = req.document or {}
    task = doc.get("task") if isinstance(doc.get("task"), dict) else None
    if not task and not contract and name != "command":
        raise BadInput(
            "<stdin>",
            "nothing to hand off: pipe an attempt document with a task, or give --contract",
        )
    base = root or req.cwd
    previous = handoff.previous_attempt(req.document)
    memory = handoff.read_memory(base, contract.get("memory") if contract else None)
    prompt = handoff.build(task=task, contract=contract, previous=previous, memory=memory)
    env = req.environ if req.environ is not None else os.environ
    spec = RunSpec.from_section(
        worker if worker.get("provider", name) == name else {},
        prompt=prompt,
        cwd=base,
        model=req.model,
        resume=req.resume,
        command=command,
        task_id=task.get("id") if task else None,
        scope=contract.get("scope") if contract else None,
        control=_steering(base, req, contract, found.source),
        attempt=_attempt_number(req.document, env),
        environ=env,
    )
    timeout = float(req.timeout or worker.get("timeout") or DEFAULT_TIMEOUT_S)
    # An admitted document (lk-decide --admit) carries the run's share of the wall-clock
    # budget: the worker gets no more, so the verification reserve stays for the checks.
    admission = doc.get("admission")
    granted = admission.get("granted") if isinstance(admission, dict) else None
    share = granted.get("timeout_s") if isinstance(granted, dict) else None
    if not req.timeout and isinstance(share, (int, float)) and share > 0:
        timeout = min(timeout, float(share))
    return Plan(provider=provider, spec=spec, contract=contract, worker=worker, timeout=timeout)


def _steering(
    root: Path, req: Request, contract: Mapping[str, Any] | None, source: str | None
) -> list[str]:
    """The files that steer the loop, repository-relative (``_control_files``, and the
    contract file found by default): a provider that asks before a write refuses them."""
    top = root.resolve()
    found = _control_files(top, req, contract)
    if source and source != "<stdin>":
        path = Path(os.path.abspath(source if os.path.isabs(source) else req.cwd / source))
        if path.is_file() and path.is_relative_to(top) and path not in found:
            found.append(path)
    return [f.relative_to(top).as_posix() for f in found]


def _attempt_number(document: Mapping[str, Any] | None, env: Mapping[str, str]) -> int | None:
    raw = env.get("LOOPKIT_ATTEMPT")
    if raw and raw.isdigit():
        return int(raw)
    decision = (document or {}).get("decision")
    if isinstance(decision, Mapping) and isinstance(decision.get("attempt"), int):
        return int(decision["attempt"]) + 1
    return None


def dry_run(req: Request) -> dict[str, Any]:
    p = plan(req)
    inv = p.provider.build(p.spec)
    return {
        "provider": p.provider.name,
        "argv": inv.argv,
        "cwd": str(inv.cwd),
        "env": sorted(inv.env),
        "stdin": "handoff" if inv.stdin is not None else "/dev/null",
        "timeout_s": p.timeout,
        "handoff": p.spec.prompt,
    }


def attempt(req: Request) -> dict[str, Any]:
    """Run one attempt; return the document to print (attempt with ``run``, or run alone)."""
    from loopkit.background import Background  # the attempt's own: not lk-judge's
    from loopkit.decision import ledger

    # Where the tree started: a worker that commits its own change must not hide it from
    # lk-diff, which compares against this base when no other is given. One git call finds
    # the root and the commit at HEAD (None in a repository without commits).
    where = git.locate(req.cwd, base="HEAD", unborn_ok=False)
    root, base = where.root, where.base
    p = plan(req, root=root)
    configured = p.contract.get("state_dir") if p.contract else None
    state_path = state_folder(root, where.index, env=req.environ, configured=configured)
    # What git ignores before the worker, asked beside the rest of this set-up (git's
    # walk of the tree meanwhile; the state folder is left out of it).
    ignoring = Background(
        lambda: _ignored_at_start(req.document, root, state_path), name="lk-invoke-ignored"
    )
    doc = _fresh(req.document)
    folder = artifacts.attempt_dir(state_path, artifacts.assign_attempt_id(doc))
    # The carried paths (what the checks see of the ignored files): read-only to the
    # worker in its sandbox; fingerprinted before it where it could write them (no
    # sandbox, or the contract makes them writable), and lk-verify refuses them if moved.
    policy = containment.Policy.of(p.contract)
    carry = [c.name for c in cleanroom.carried(root, p.contract)]
    writable_carry = _writable_carry(root, carry, policy)
    carried = cleanroom.fingerprint(root, writable_carry) if writable_carry else None

    def cancelled() -> str | None:
        return "cancelled" if cancel.requested(state_path) else None

    # What steers git and loopkit under .git, before the worker (loopkit's own exclude
    # line for the state folder is already written): lk-diff reports any change. Read
    # beside the rest of the set-up, and waited for before the worker starts.
    controlling = Background(lambda: controls.control_state(root), name="lk-invoke-control")
    statcache.ensure(state_path, where.index)  # the first attempt's, from the user's index
    # lk-decide refuses a ledger the worker touched; other tasks' records may be appended
    # meanwhile (slices side by side share one ledger), never this task's.
    task_section = req.document.get("task") if req.document else None
    task_id = str(task_section.get("id") or "") if isinstance(task_section, dict) else ""
    sealed = ledger.seal(state_path, task=task_id or None)
    read_only = [
        *_control_files(root, req, p.contract),
        *(root / name for name in carry if name not in writable_carry),
        *(
            root / name
            for name in cleanroom.VIRTUALENVS
            if name not in carry and os.path.isdir(root / name)
        ),
    ]
    git_dirs = [where.index.parent, git.common_dir(root)]
    jail = Jail(policy=policy, root=root, git_dirs=git_dirs, state=state_path, read_only=read_only)

    beside = _base_beside(
        req, root, state_path, base, p.contract, sealed, folder, carry, should_stop=cancelled
    )
    control = controlling.result()
    contracts = remembered(root)
    ignored = ignoring.result()
    # Less a margin: the kernel stamps files from a coarser clock than time_ns() reads.
    started_ns = time.time_ns() - specialfiles.CLOCK_MARGIN_NS
    result = execute(
        p.provider,
        p.spec,
        artifacts=folder,
        root=root,
        timeout=p.timeout,
        breaker_repeats=int(p.worker.get("breaker_repeats") or DEFAULT_REPEATS),
        should_stop=cancelled,
        jail=jail,
        progress=req.progress,
        started_mark=req.started_mark,
    )
    if req.progress is not None:
        req.progress.finished(str(result.record.get("stop_reason")), result.state)
    if beside is not None:
        sealed = beside.sealed(sealed, req.progress)
    special, during = _settle(root, state_path, started_ns, ignored, control, contracts)
    record = {**result.record, "base": base} if base else dict(result.record)
    record["git_control"] = _git_control(req.document, control, during)
    record["ignored_at_start"] = ignored
    if special:
        record["special_files"] = special
    if carried is not None:
        record["carry"] = carried
    record["state_seal"] = sealed
    if req.document is None:
        return {"attempt_id": doc["attempt_id"], **record}
    attach(doc, "run", record)
    if p.contract is not None and not doc.get("contract"):
        # Later commands (and the loop's scripts: memory, budgets) read the contract here.
        doc["contract"] = p.contract
    return doc


def _settle(
    root: Path,
    state_path: Path,
    started_ns: int,
    ignored: list[str],
    control: Any,
    contracts: Any,
) -> tuple[list[Any], Any]:
    """The tree after the worker, before anything lets git look at it: the FIFOs, sockets
    and device nodes it left removed (a FIFO named .gitignore blocks git for ever), what
    it changed of what steers git and loopkit under .git, its contract cache emptied."""
    from loopkit.background import Background

    # Walked beside the reading of .git below (which looks at no file of the tree).
    clearing = Background(
        lambda: specialfiles.clear_new(
            root,
            since_ns=started_ns,
            prune=[os.path.relpath(state_path, root).replace(os.sep, "/"), *ignored],
        ),
        name="lk-invoke-special",
    )
    # Seen before the contract cache is emptied, so a planted entry is still reported.
    during = controls.control_changes(control, controls.control_state(root, since=control))
    # Whatever the worker wrote into the contract cache is never read as a checked contract.
    clear_cache(root, keep=contracts)
    return clearing.result(), during


class _BaseBeside:
    """The contract's criteria on the base tree, run in the clean room while the worker
    works (``loopkit.evidence.verify.baseline``): the base is known before the worker starts, and
    lk-verify needs its results only when a check fails. A result this run wrote is
    sealed with the digest of the very bytes it wrote, so lk-verify trusts it and a file
    the worker put in its place is neither trusted nor unnoticed (``tampered``)."""

    #: The base run starts once the worker has run this long: a worker done sooner (a
    #: scripted fix, a rehearsal) is not kept waiting for checks whose results lk-verify
    #: needs only if one of its checks fails -- it then runs the base itself, as before.
    AFTER_S = 0.5

    def __init__(self, run: Any, started: float) -> None:
        from loopkit.background import Background

        self.written: dict[str, str] = {}
        self.started = started
        self.worker_done = threading.Event()

        def later() -> Any:
            if self.worker_done.wait(self.AFTER_S):
                return None
            return run(self.written)

        self.job = Background(later, name="lk-invoke-base")

    def sealed(self, sealed: dict[str, Any], progress: Any) -> dict[str, Any]:
        """Wait for the base run; the seal with its result added."""
        self.worker_done.set()
        if progress is not None and self.job.running():
            progress.line("waiting for the base's checks (run beside the worker)", force=True)
        try:
            found = self.job.result()
        except Exception:  # lk-verify runs the base itself when it needs it
            return sealed
        if found is None:
            return sealed
        if progress is not None:
            checks = found.get("checks") or []
            ok = sum(1 for c in checks if c.get("passed"))
            spent = time.monotonic() - self.started
            how = f"ran beside the worker ({spent:.1f}s)" if self.written else "known already"
            progress.line(f"the base's checks: {ok} of {len(checks)} pass; {how}", force=True)
        if not self.written:
            return sealed
        return {**sealed, "baseline": {**(sealed.get("baseline") or {}), **self.written}}


def _base_beside(
    req: Request,
    root: Path,
    state: Path,
    base: str | None,
    contract: Mapping[str, Any] | None,
    sealed: Mapping[str, Any],
    folder: Path,
    carry: list[str],
    *,
    should_stop: Callable[[], str | None] | None = None,
) -> _BaseBeside | None:
    """Start the base run beside the worker, in a loop (a piped document) with a base;
    ``should_stop`` (``lk cancel``) ends its running check at once."""
    if req.document is None or not base or not contract or not contract.get("criteria"):
        return None

    env = verify.check_env(contract, req.document, root=root)
    criteria = list(contract["criteria"])

    def run(written: dict[str, str]) -> Mapping[str, Any]:
        return verify.baseline(
            root,
            state,
            base,
            criteria,
            log_dir=folder,
            env=env,
            carry=carry,
            sealed=sealed.get("baseline"),
            contract=contract,
            reset=cleanroom.reset_dirs(root),
            written=written,
            should_stop=should_stop,
        )

    return _BaseBeside(run, time.monotonic())


def _writable_carry(root: Path, carry: list[str], policy: Any) -> list[str]:
    """The carried paths the worker can write: all of them without a sandbox; in one,
    those the contract's ``sandbox.writable`` covers."""
    from loopkit.boundary import sandbox

    if policy.mode == "off" or not sandbox.probe().available:
        return list(carry)
    writable = [os.path.realpath(containment.expand(w, root=root)) for w in policy.writable]
    out = []
    for name in carry:
        real = os.path.realpath(root / name)
        if any(
            real == w or real.startswith(w + os.sep) or w.startswith(real + os.sep)
            for w in writable
        ):
            out.append(name)
    return out


def _control_files(root: Path, req: Request, contract: Mapping[str, Any] | None) -> list[Path]:
    """The files that steer the loop, inside the repository: read-only in the sandbox."""

    doc: Mapping[str, Any] = req.document or {}

    def mapping(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    source = mapping(doc.get("contract_source"))
    task_source = mapping(mapping(doc.get("task")).get("source"))
    names = [
        req.contract_path,
        source.get("path"),
        (contract or {}).get("memory"),
        task_source.get("file"),
    ]
    out: list[Path] = []
    for name in names:
        if not isinstance(name, str) or name == "<stdin>":
            continue
        path = Path(name) if os.path.isabs(name) else (req.cwd / name)
        path = Path(os.path.abspath(path))
        if path.is_file() and path.is_relative_to(root.resolve()) and path not in out:
            out.append(path)
    return out


def _git_control(
    document: Mapping[str, Any] | None, before: Mapping[str, str], during: list[str]
) -> dict[str, Any]:
    """``run.git_control``: the control state of .git as the task's first attempt found it
    (a retry carries it on: what one attempt changed, the next cannot make the new
    normal), and what changed while this worker ran."""

    earlier = ((handoff.previous_attempt(document) or {}).get("run") or {}).get("git_control")
    if (
        isinstance(earlier, Mapping)
        and isinstance(earlier.get("digest"), str)
        and isinstance(earlier.get("paths"), Mapping)
    ):
        found = {"digest": earlier["digest"], "paths": dict(earlier["paths"])}
    else:
        found = {
            "digest": controls.control_digest(before),
            "paths": {k: controls.short(v) for k, v in before.items()},
        }
    return {**found, "changed": during}


#: At most this many paths in ``run.ignored_at_start`` (every document after lk-invoke
#: carries it): ignored folders count as one, so only a tree of loose ignored files
#: comes near it.
MAX_IGNORED_AT_START = 20_000


def _ignored_at_start(document: Mapping[str, Any] | None, root: Path, state: Path) -> list[str]:
    """``run.ignored_at_start``: what git ignored when the task's first attempt started (a
    retry carries it on, as ``git_control``). lk-diff holds the change to it: an ignore
    file that is in no commit (a tool's self-ignoring ``.venv/.gitignore``, a
    ``secrets/.gitignore`` holding ``*``) is not among the base's rules, and a worker that
    empties it would otherwise get that folder committed."""

    earlier = ((handoff.previous_attempt(document) or {}).get("run") or {}).get("ignored_at_start")
    if isinstance(earlier, list) and all(isinstance(p, str) for p in earlier):
        return list(earlier)
    own = os.path.relpath(state, root).replace(os.sep, "/") + "/"
    return git.ignored_now(root, leave_out=(own,))[:MAX_IGNORED_AT_START]


def _fresh(document: Attempt | None) -> JSONObject:
    """A new attempt from a piped document: a finished attempt's sections are dropped."""

    if document is None:
        return {}
    doc = {k: v for k, v in document.items() if k not in handoff.PREVIOUS_SECTIONS}
    if handoff.previous_attempt(document):
        doc.pop("attempt_id", None)
        doc.pop("started_at", None)
    doc.setdefault("started_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return doc


def normalize_transcript(path: str, *, provider: str | None = None) -> RunRecord:
    """The ``run`` record of a saved stream (claude stream-json or json, codex --json)."""

    p = Path(path)
    if not p.is_file():
        raise BadInput(path, "no such file: expected a saved worker stream")
    with open(p, "rb") as f:
        if not f.read(4096).strip():
            raise BadInput(path, "empty: expected a saved worker stream")
    name = provider or detect(p)
    prov = providers.get(name)
    parser = prov.parser()
    watch = _Watch(breaker=Breaker(DEFAULT_REPEATS), stop=lambda _reason: None)
    with open(p, "rb") as f:
        for line in f:
            for event in parser.feed(line):
                watch(event)
    state = parser.finish()
    # A saved stream has no exit status: its own result line decides.
    outcome = prov.classify(state, Exit(exit_code=0 if state.result_seen else None))
    trip = watch.breaker.tripped if watch.breaker else None
    if trip is not None and not state.result_seen:
        outcome = Outcome("stuck", True, trip.message())
    record = record_from(name, state, outcome, transcript=str(path))
    record["cost"]["source"] += " (from a transcript)" if state.cost_source else ""
    record["side_effects"] = watch.side_effects
    record["stuck"] = trip.as_dict() if trip is not None else None
    return record
