"""lk-decide's work, apart from its command line: contract, state, ledger, decision, record.

The pure parts live in ``loopkit.decision.decide`` (the decision), ``loopkit.decision.budget`` (history
and admission) and ``loopkit.decision.records`` (the ledger's records, their replay); this module
gathers their inputs from the world (the tree on disk, the cancellation intent, the
ledger's index) and writes their results back (the ledger record, a checkpoint on
exhaustion with ``loopkit.decision.checkpoint``, artifact retention on completion). It prints
nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import git, loader, timing
from loopkit.background import Background
from loopkit.decision import budget, checkpoint, records
from loopkit.decision import decide as decider
from loopkit.decision import ledger as ledgers
from loopkit.decision.records import (
    admission_decision,
    admission_record,
    attempt_record,
    pool_record,
    replay,
)
from loopkit.document import attach, new_attempt, vouched
from loopkit.errors import BadInput
from loopkit.evidence import statcache
from loopkit.evidence.verify import RECORD_NAME, keep_as_base
from loopkit.exitcodes import OUTCOME_CODES
from loopkit.state import cancel, retention
from loopkit.state.artifacts import assign_attempt_id
from loopkit.values import field, record
from loopkit.workspace import Workspace, for_state_only

if TYPE_CHECKING:
    from loopkit.sections import Attempt, Contract, JSONObject, PoolAsk, Record, View


@record
class Result:
    document: Mapping[str, Any]
    code: int
    summary: str
    warnings: list[str] = field(default_factory=list)
    #: Normal events a person may want to know of (a checkpoint written, artifacts pruned).
    notes: list[str] = field(default_factory=list)


@record
class _Setup:
    document: Attempt
    contract: Contract
    root: Path
    state: Path
    ledger: ledgers.Ledger


def _setup(document: Attempt | None, contract_path: str | None, ledger_path: str | None) -> _Setup:
    doc = document if document is not None else new_attempt()
    ws = Workspace.open(contract_path=contract_path, document=doc, require_contract=True)
    contract = ws.terms
    ws.stamp(doc)
    path = Path(ledger_path) if ledger_path else ws.state / ledgers.DEFAULT_NAME
    assign_attempt_id(doc)
    return _Setup(doc, contract, ws.root, ws.state, ledgers.Ledger(path))


def tree_on_disk(
    root: Path,
    state: Path,
    run: Any,
    *,
    keep_as: Path | None = None,
    handed: statcache.Handoff | None = None,
) -> str:
    """The work tree's hash as lk-decide binds the evidence to it: through loopkit's own
    stat cache (the worker's index is never trusted after it ran), which keeps the result
    -- the recipes' hash and the next attempt's start from it (kept as ``keep_as`` instead
    when given). ``run``: the document's run section (its state seal); ``handed``: the
    index lk-diff left in the same ``lk attempt``, started from while it is unchanged."""
    kept = keep_as or statcache.path(state)
    if handed is not None and (given := handed.seed()) is not None:
        return git.tree_hash(root, seed=given, keep=kept, held=handed.tree)
    seed = statcache.seed(state, run.get("state_seal") if isinstance(run, Mapping) else None)
    return git.tree_hash(root, seed=seed, keep=kept if seed is not None else None)


class EarlyTree:
    """``tree_on_disk`` begun in a thread before lk-decide asks for it: ``lk attempt``
    starts it the moment the last check in the clean room has ended, so it runs beside the
    clean room's own hash after the checks (two git walks at once on two cores). Nothing
    loopkit runs after that moment writes the work tree: the checks ran in the clean
    room. lk-decide takes it for the same work tree and state folder (``take``); until
    then the stat cache it leaves waits beside the sealed one, which a hash taken instead
    (``drop``: the base's checks or the judge ran in between) still starts from."""

    def __init__(
        self, root: Path, state: Path, run: Any, *, handed: statcache.Handoff | None = None
    ) -> None:
        self.root, self.state = root, state
        self._kept = statcache.beside(state, "early")
        self._hash = Background(
            lambda: tree_on_disk(root, state, run, keep_as=self._kept, handed=handed),
            name="lk-early-tree",
        )

    def take(self, root: Path, state: Path) -> str | None:
        """The hash, once it is done (its stat cache now the stat cache); None, and nothing
        kept, when it was taken for another work tree or state folder."""
        if (root, state) != (self.root, self.state):
            self.drop()
            return None
        try:
            tree = str(self._hash.result())
        except BaseException:
            self.drop()
            raise
        if self._kept.exists():
            os.replace(self._kept, statcache.path(state))
        return tree

    def wait(self) -> None:
        """Wait for the hash to be done (before loopkit writes files of its own again: the
        state folder may lie in the work tree, and a worker's .gitignore may take it in)."""
        self._hash.wait()

    def drop(self) -> None:
        """Wait for the hash and forget it."""
        self._hash.wait()
        with contextlib.suppress(OSError):
            self._kept.unlink()


def decide(
    document: Attempt | None,
    *,
    contract_path: str | None = None,
    ledger_path: str | None = None,
    trigger: str | None = None,
    env: Mapping[str, str] | None = None,
    early: EarlyTree | None = None,
) -> Result:
    """Decide one attempt, append its record, and route its artifacts. ``early``: the tree
    on disk, hashed since the checks ended (``EarlyTree``)."""
    s = _setup(document, contract_path, ledger_path)
    doc = s.document
    view = decider.inputs(doc, s.contract)
    view["verify_recorded"] = _recorded_verify(s.state, doc)
    run = doc.get("run")
    if isinstance(run, Mapping) and run.get("state_seal"):
        view["state_tampered"] = ledgers.tampered(run["state_seal"], s.state)
    tree = None
    if doc.get("verify") or doc.get("diff"):
        tree = early.take(s.root, s.state) if early is not None else None
        if tree is None:
            tree = tree_on_disk(s.root, s.state, run)
    intent = cancel.requested(s.state)
    tid = decider.task_id(view)
    how = ledgers.detect_trigger(trigger, env if env is not None else os.environ)
    warnings: list[str] = []
    notes: list[str] = []
    with s.ledger.transaction() as txn:
        history = txn.history(tid)
        decision = decider.decide(view, history, tree_on_disk=tree, cancel=intent)
        earlier = doc.get("timings")
        timings = [*(earlier if isinstance(earlier, list) else ()), timing.entry("decision", {})]
        record = attempt_record(
            view,
            history,
            decision,
            tree_on_disk=tree,
            cancel=intent,
            trigger=how,
            started_at=doc.get("started_at"),
            recorded_at=ledgers.now_iso(),
            timings=timings,
        )
        txn.append(record)
        _settle_pool(txn, tid, history, record, trigger=how)
        if decision["outcome"] == "complete":
            verified = doc.get("verify")
            if (
                isinstance(verified, Mapping)
                and verified.get("tree") == tree
                and view.get("verify_recorded") == "match"
            ):
                # The tree that lands is the next task's base: its checks' results are
                # that base's (evidence.verify.keep_as_base).
                keep_as_base(s.state, verified, s.contract.get("criteria") or [])
            pruned = retention.on_complete(
                s.state, tid, s.ledger.attempt_ids(tid), s.contract.get("artifacts")
            )
            if pruned:
                notes.append(f"pruned the bulky artifacts of {len(pruned)} completed attempt(s)")
        elif decision["outcome"] == "budget_exhausted":
            after = txn.history(tid)
            path = checkpoint.write(
                s.state, tid, checkpoint.build(tid, decision, after, s.contract)
            )
            notes.append(f"checkpoint written to {path}")
    warnings[:0] = [f"ledger {s.ledger.path}: {p}" for p in s.ledger.problems]
    attach(doc, "decision", decision)
    doc["timings"] = timings
    summary = f"{decision['outcome']}"
    if decision["failure_class"]:
        summary += f" ({decision['failure_class']})"
    summary += f", attempt {decision['attempt']}: {decision['reason'].splitlines()[0]}"
    return Result(doc, int(OUTCOME_CODES[decision["outcome"]]), summary, warnings, notes)


def _recorded_verify(state: Path, doc: Mapping[str, Any]) -> str | None:
    """Whether the piped verify section is the one lk-verify recorded for this attempt:
    "match", "differs", "missing" (none recorded), or None (no verify section)."""
    verify = doc.get("verify")
    attempt = doc.get("attempt_id")
    if not isinstance(verify, Mapping) or not isinstance(attempt, str):
        return None
    try:
        path = state / "artifacts" / attempt / RECORD_NAME
        recorded = loader.json_loads(path.read_bytes())
    except (OSError, ValueError):
        return "missing"
    return "match" if recorded == verify else "differs"


def interrupted(task_id: str, *, reason: str, ledger_path: str | None = None) -> Record:
    """Append an ``interrupted`` record for ``task_id`` (records.interrupted_record)."""
    path = Path(ledger_path) if ledger_path else for_state_only().state / ledgers.DEFAULT_NAME
    book = ledgers.Ledger(path)
    with book.transaction() as txn:
        history = txn.history(task_id)
        record = records.interrupted_record(task_id, history, reason=reason, now=ledgers.now_iso())
        appended = txn.append(record)
        _settle_pool(txn, task_id, history, record, trigger=record["trigger"])
        return appended


#: How often a worker waiting for the run's pool asks again (seconds).
POOL_POLL_S = 0.5
POOL_ENV = "LOOPKIT_POOL"
POOL_JOBS_ENV = "LOOPKIT_POOL_JOBS"


def _settle_pool(
    txn: ledgers.Transaction,
    tid: str,
    history: Mapping[str, Any],
    record: Mapping[str, Any],
    *,
    trigger: Mapping[str, Any],
) -> None:
    """The record settles the task's oldest reservation (``budget.fold``): when that one
    was reserved from a run's pool too, the pool gets its share back and is charged what
    the attempt spent (an interrupted attempt: nothing known, nothing charged)."""
    reserved = history.get("reserved") or []
    pool_id = reserved[0].get("pool") if reserved and isinstance(reserved[0], Mapping) else None
    if not isinstance(pool_id, str) or not pool_id:
        return
    usage = record.get("usage") or {}
    spent = {
        "cost_usd": usage.get("cost_usd"),
        "cost_trusted": bool(usage.get("cost_trusted")),
        "tokens": int(usage.get("tokens") or 0),
        "wall_s": float(usage.get("wall_s") or 0),
    }
    key = budget.pool_key(pool_id)
    event = {"event": "settle", "task": tid, "attempt": record.get("attempt"), "spent": spent}
    txn.append(
        pool_record(pool_id, txn.history(key), event, now=ledgers.now_iso(), trigger=trigger)
    )


def admit(
    document: Attempt | None,
    *,
    contract_path: str | None = None,
    ledger_path: str | None = None,
    trigger: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Result:
    """Admission before a run: reserve its share of the budgets, or refuse (22).

    Within a run's pool (``LOOPKIT_POOL`` names it, ``LOOPKIT_POOL_JOBS`` its workers; the
    contract's ``pool`` its limits) the worker's share is reserved from the pool too, in
    the same ledger transaction; while the pool cannot cover it and a running worker's
    share may still come back, the admission waits (nothing recorded meanwhile)."""
    s = _setup(document, contract_path, ledger_path)
    doc = s.document
    view = decider.inputs(doc, s.contract)
    tid = decider.task_id(view)
    intent = cancel.requested(s.state)
    if intent:
        return _cancelled(s, view, tid, intent)
    environ = env if env is not None else os.environ
    how = ledgers.detect_trigger(trigger, environ)
    contract: Mapping[str, Any] = view.get("contract") or {}
    pool_id = environ.get(POOL_ENV, "").strip() if budget.pool_limits(contract) else ""
    warnings: list[str] = []
    notes: list[str] = []
    started = time.monotonic()
    while True:
        now = ledgers.now_iso()
        with s.ledger.transaction() as txn:
            history = txn.history(tid)
            pool: PoolAsk | None = None
            if pool_id:
                _reconcile_pool(txn, pool_id, trigger=how)
                pool = {
                    "id": pool_id,
                    "jobs": _jobs(environ.get(POOL_JOBS_ENV)),
                    "task": tid,
                    "history": txn.history(budget.pool_key(pool_id)),
                }
            admission = budget.admit(history, contract, now=now, pool=pool)
            pooled = admission.get("pool")
            waiting = bool(pooled and pooled["wait"])
            if not waiting:
                # The pool's share first: a process killed between the two appends leaves
                # a share no task holds, which the next admission returns (_reconcile_pool)
                # -- never a running worker the pool does not count.
                reservation = pooled.get("reservation") if pooled else None
                if pool is not None and admission["admitted"] and reservation:
                    event = {
                        "event": "reserve",
                        "task": tid,
                        "attempt": admission["attempt"],
                        "reservation": reservation,
                    }
                    txn.append(pool_record(pool_id, pool["history"], event, now=now, trigger=how))
                txn.append(
                    admission_record(view, history, admission, now=now, trigger=how, pool=pool)
                )
                refused = admission_decision(admission)
                if (
                    refused is not None
                    and refused["outcome"] == "budget_exhausted"
                    and admission.get("exhausted")  # the task's own budgets, not the pool's
                ):
                    path = checkpoint.write(
                        s.state, tid, checkpoint.build(tid, refused, history, s.contract)
                    )
                    notes.append(f"checkpoint written to {path}")
                break
        if intent := cancel.requested(s.state):
            return _cancelled(s, view, tid, intent)
        time.sleep(POOL_POLL_S)
    waited = time.monotonic() - started
    if waited >= POOL_POLL_S:
        notes.append(f"waited {waited:.1f}s for the run's pool ({pool_id})")
    warnings[:0] = [f"ledger {s.ledger.path}: {p}" for p in s.ledger.problems]
    undeclared: JSONObject = vouched(doc)  # the run's share, read by lk-invoke
    undeclared["admission"] = admission
    if refused is not None:
        attach(doc, "decision", refused)
        return Result(
            doc, int(OUTCOME_CODES[refused["outcome"]]), refused["reason"], warnings, notes
        )
    granted = ", ".join(f"{k} {v}" for k, v in admission["granted"].items() if v is not None)
    return Result(
        doc,
        0,
        f"admitted attempt {admission['attempt']}" + (f" ({granted})" if granted else ""),
        warnings,
        notes,
    )


def _reconcile_pool(txn: ledgers.Transaction, pool_id: str, *, trigger: Mapping[str, Any]) -> None:
    """Settle the pool's shares whose tasks settled theirs by a record that did not (an
    interrupted attempt recorded by ``lk task begin``'s recovery): nothing known spent."""
    key = budget.pool_key(pool_id)
    for r in txn.history(key).get("reserved") or []:
        task = str(r.get("task") or "")
        held = txn.history(task).get("reserved") or [] if task else []
        if any(isinstance(x, Mapping) and x.get("pool") == pool_id for x in held):
            continue
        event: JSONObject = {"event": "settle", "task": task, "attempt": r.get("attempt")}
        event["spent"] = {}
        txn.append(
            pool_record(pool_id, txn.history(key), event, now=ledgers.now_iso(), trigger=trigger)
        )


def _cancelled(s: _Setup, view: View, tid: str, intent: Any) -> Result:
    """Not admitted: a person asked the loop to stop."""
    decision = decider.decide(view, None, tree_on_disk=None, cancel=intent)
    with s.ledger.transaction() as txn:
        decision["attempt"] = int(txn.history(tid).get("attempts") or 0) + 1
    attach(s.document, "decision", decision)
    return Result(
        s.document, int(OUTCOME_CODES["cancelled"]), f"not admitted: {decision['reason']}"
    )


def _jobs(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        raise BadInput(POOL_JOBS_ENV, f"{value!r}: expected a whole number of workers") from None


def replay_ledger(path: str) -> Result:
    """Re-derive every decision of a ledger; code 1 when any record disagrees."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(path, "no such ledger file")
    # One record at a time: the ledger may hold more records than fit in memory at once.
    problems: list[ledgers.Problem] = []
    count = [0]

    def counted() -> Iterator[tuple[int, Record]]:
        for item in ledgers.stream(p, problems):
            count[0] += 1
            yield item

    disagreements = replay(counted())
    records = count[0]
    doc = {
        "kind": "loopkit/replay",
        "version": 1,
        "ledger": str(p),
        "records": records,
        "agree": not disagreements,
        "disagreements": disagreements,
        "problems": [x.as_dict() for x in problems],
    }
    bad = {d["line"] for d in disagreements}
    summary = (
        f"all {records} recorded decisions re-derive"
        if not disagreements
        else f"{len(bad)} of {records} records disagree with their re-derivation"
    )
    return Result(doc, 1 if disagreements else 0, summary, [str(x) for x in problems])
