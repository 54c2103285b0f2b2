"""Budgets across runs: a task's history folded from its ledger records, and admission.

A task's *history* is a small, fixed-size mapping (totals and counters, never a list of
attempts) so the controller's cost does not grow with the ledger. ``fold`` is the only
way history changes: the ledger index and ``lk-decide --replay`` both fold the same
records the same way, so a recorded history can always be re-derived and checked.

Costs: only trusted costs (``run.cost.trusted``) count against ``cost_usd``; untrusted
figures are totalled apart (a CLI's price table for a model it does not serve is
fiction). Tokens always count. Wall time is the measured time of runs and checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from loopkit.evidence import fingerprint

if TYPE_CHECKING:
    from loopkit.sections import Admission, Granted, History, PoolAdmission, Reservation, Spent

#: Budgets that accumulate across attempts (contract ``budgets`` key -> history key).
ACCUMULATING: dict[str, str] = {
    # a transient failure (overloaded, throttled) does not spend an attempt
    "attempts": "spent_attempts",
    "wall_seconds": "wall_s",
    "cost_usd": "cost_usd",
    "tokens": "tokens",
    "turns": "turns",
    "verify_attempts": "verify_attempts",
}
#: A reservation nobody settled is dropped this long after its run's time was up.
RESERVATION_GRACE_S = 300.0
#: The budgets a run's pool holds (contract ``pool``), shared by the workers of one run
#: side by side: the ones that span runs (as ``loopkit.forge.fleet.SHARED_BUDGETS``).
POOLED = ("cost_usd", "tokens", "wall_seconds")
#: The ledger key of a pool's records: no task id (ids never start with ':').
POOL_PREFIX = ":pool:"


def empty_history() -> History:
    return {
        "attempts": 0,  # every attempt run (its number)
        "spent_attempts": 0,  # the ones the attempts budget counts: all but transient
        "verify_attempts": 0,
        "cost_usd": 0.0,
        "cost_untrusted_usd": 0.0,
        "tokens": 0,
        "turns": 0,
        "wall_s": 0.0,
        "last_fingerprint": None,
        "same_failure": 0,
        "timeouts": 0,
        "transient_streak": 0,
        "no_op_streak": 0,
        "last_violations": None,  # the previous attempt's scope violations, as a signature
        "same_violation": 0,
        "last_crash": None,  # the previous attempt's crash, as a signature
        "same_crash": 0,
        "last_outcome": None,
        "last_class": None,
        "resume_after": None,
        "reserved": [],
        "epoch": 0,  # how often a person reopened the task (a new budget each time)
    }


_EMPTY = empty_history()


def usage_of(document: Mapping[str, Any]) -> Spent:
    """What one attempt spent, read from its run and verify sections."""
    run = document.get("run") or {}
    usage = run.get("usage") or {}
    cost = run.get("cost") or {}
    verify = document.get("verify") or {}
    usd = cost.get("usd")
    checks_s = sum(float(c.get("duration_s") or 0) for c in verify.get("checks") or [])
    input_tokens = int(usage.get("input_tokens") or 0)
    output_tokens = int(usage.get("output_tokens") or 0)
    return {
        "cost_usd": float(usd) if isinstance(usd, (int, float)) else None,
        "cost_source": cost.get("source"),
        "cost_trusted": bool(cost.get("trusted")) and isinstance(usd, (int, float)),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tokens": input_tokens + output_tokens,
        "turns": int(usage.get("turns") or 0),
        "wall_s": round(float(run.get("duration_s") or 0) + checks_s, 3),
        "verified": bool(document.get("verify")),
    }


def filled(history: Mapping[str, Any] | None) -> History:
    """A copy of ``history`` (as read from JSON) with every key a history has: one from
    before a key was added lacks it."""
    h = cast("History", {**_EMPTY, **(history or {})})
    h["reserved"] = [cast("Reservation", dict(r)) for r in h["reserved"]]  # the only nested value
    return h


def fold(history: Mapping[str, Any] | None, record: Mapping[str, Any]) -> History:
    """The history after one ledger record (pure; the input is not changed)."""
    h = filled(history)
    if record.get("type") == "reopen":
        # A person reopened a parked task: a new budget epoch. The attempt numbers go on
        # (the ledger's records stay unique); everything the budgets count starts again.
        fresh = empty_history()
        fresh["attempts"] = h["attempts"]
        fresh["epoch"] = int(h.get("epoch") or 0) + 1
        return fresh
    if record.get("type") == "interrupted":
        # An attempt whose loop died before deciding: it counts, and frees its share --
        # unless its worker never ran (killed between the admission and the worker).
        h["attempts"] += 1
        if record.get("ran") is not False:
            h["spent_attempts"] += 1
        h["reserved"] = h["reserved"][1:]
        h["last_outcome"] = "interrupted"
        return h
    if record.get("type") == "draft":
        # lk-plan draft's outcome, under a key no task has: counted, nothing spent.
        h["attempts"] += 1
        return h
    if record.get("type") == "pool":
        return _fold_pool(h, record.get("pool") or {})
    if record.get("type") == "admission":
        admission = record.get("admission") or {}
        if admission.get("admitted"):
            h["reserved"] = [
                *h["reserved"],
                cast("Reservation", admission.get("reservation") or {}),
            ]
        return h
    usage = record.get("usage") or {}
    decision = record.get("decision") or {}
    evidence = record.get("evidence") or {}
    h["attempts"] += 1
    stop = (record.get("run") or {}).get("stop_reason")
    if stop not in TRANSIENT_STOPS and not _free(record):
        h["spent_attempts"] += 1
    if h["reserved"]:
        h["reserved"] = h["reserved"][1:]
    usd = usage.get("cost_usd")
    if usd is not None:
        _charge(h, float(usd), trusted=bool(usage.get("cost_trusted")))
    h["tokens"] += int(usage.get("tokens") or 0)
    h["turns"] += int(usage.get("turns") or 0)
    h["wall_s"] = round(h["wall_s"] + float(usage.get("wall_s") or 0), 3)
    if usage.get("verified"):
        h["verify_attempts"] += 1
    # Only fresh evidence moves the fingerprint: a stale verification proves nothing.
    if evidence.get("verified") and not evidence.get("stale"):
        fp = None if evidence.get("passed") else evidence.get("fingerprint")
        if fp is not None and fp == h["last_fingerprint"]:
            h["same_failure"] += 1
        else:
            h["same_failure"] = 0
        h["last_fingerprint"] = fp
    if stop == "timeout":
        h["timeouts"] += 1
    h["transient_streak"] = h["transient_streak"] + 1 if stop in TRANSIENT_STOPS else 0
    sig = violation_signature(decision.get("violations"))
    h["same_violation"] = h["same_violation"] + 1 if sig and sig == h["last_violations"] else 0
    h["last_violations"] = sig
    crash = decision.get("crash") if stop == "crashed" else None
    h["same_crash"] = h["same_crash"] + 1 if crash and crash == h["last_crash"] else 0
    h["last_crash"] = crash
    h["no_op_streak"] = h["no_op_streak"] + 1 if decision.get("failure_class") == "no_op" else 0
    h["last_outcome"] = decision.get("outcome")
    h["last_class"] = decision.get("failure_class")
    # A usage limit's reset time holds until a later attempt gets through.
    h["resume_after"] = (
        decision.get("resume_after") if decision.get("outcome") == "blocked" else None
    )
    return h


def _fold_pool(h: History, event: Mapping[str, Any]) -> History:
    """A pool's history after one of its records: a worker's share reserved, or an
    attempt settled (its reservation returned, what it spent charged)."""
    if event.get("event") == "reserve":
        h["reserved"] = [*h["reserved"], cast("Reservation", dict(event.get("reservation") or {}))]
        return h
    task, attempt = event.get("task"), event.get("attempt")
    mine = [i for i, r in enumerate(h["reserved"]) if r.get("task") == task]
    exact = [i for i in mine if h["reserved"][i].get("attempt") == attempt]
    for i in (exact or mine)[:1]:
        del h["reserved"][i]
    spent = event.get("spent") or {}
    h["attempts"] += 1
    usd = spent.get("cost_usd")
    if usd is not None:
        _charge(h, float(usd), trusted=bool(spent.get("cost_trusted")))
    h["tokens"] += int(spent.get("tokens") or 0)
    h["wall_s"] = round(h["wall_s"] + float(spent.get("wall_s") or 0), 3)
    return h


def _charge(h: History, usd: float, *, trusted: bool) -> None:
    """Add ``usd`` to the history's trusted cost, or to its untrusted one."""
    if trusted:
        h["cost_usd"] = round(h["cost_usd"] + usd, 6)
    else:
        h["cost_untrusted_usd"] = round(h["cost_untrusted_usd"] + usd, 6)


def _free(record: Mapping[str, Any]) -> bool:
    """An attempt the attempts budget does not count: a check that could not run (the
    environment's failure), or a reproduction of the failure on the untouched tree (no
    worker ran: ``evidence.reproduction``)."""
    decision = record.get("decision") or {}
    evidence = record.get("evidence") or {}
    return decision.get("failure_class") == "environment" or bool(evidence.get("reproduction"))


#: Stop reasons of a transient failure: retried with backoff, no attempt spent.
TRANSIENT_STOPS = ("api_error", "rate_limited")


def violation_signature(violations: Any) -> str | None:
    """The set of scope violations as one comparable string (None for none)."""
    if not isinstance(violations, list) or not violations:
        return None
    pairs = sorted(f"{v.get('rule')}:{v.get('path')}" for v in violations if isinstance(v, Mapping))
    return "\n".join(pairs) or None


def crash_signature(run: Any) -> str | None:
    """A crash as one comparable string: its exit status and its last line, noise
    removed (paths, numbers, addresses), so the same crash in another run compares equal."""
    if not isinstance(run, Mapping):
        return None
    text = str(run.get("error") or run.get("final_message") or "")
    return fingerprint.of_output(
        text.encode("utf-8", "replace"), exit_code=run.get("exit_code"), timed_out=False
    )


def used(history: Mapping[str, Any]) -> dict[str, float | None]:
    """What each accumulating budget has used so far (by budget name)."""
    return {
        name: spent_attempts(history) if name == "attempts" else history.get(key)
        for name, key in ACCUMULATING.items()
    }


def spent_attempts(history: Mapping[str, Any]) -> int:
    """The attempts the attempts budget counts (a history from before transient failures
    were told apart counts them all)."""
    spent = history.get("spent_attempts")
    return int(history.get("attempts") or 0) if spent is None else int(spent)


def limits(contract: Mapping[str, Any] | None) -> dict[str, float]:
    budgets = (contract or {}).get("budgets") or {}
    return {k: float(budgets[k]) for k in ACCUMULATING if budgets.get(k) is not None}


def exhausted(history: Mapping[str, Any], contract: Mapping[str, Any] | None) -> list[str]:
    """Accumulating budgets that are spent (used >= limit), in a fixed order."""
    out = []
    spent = used(history)
    for name, limit in limits(contract).items():
        if float(spent[name] or 0) >= limit:
            out.append(name)
    return out


def fractions(history: Mapping[str, Any], contract: Mapping[str, Any] | None) -> dict[str, float]:
    """How much of each accumulating budget is used (0.0 .. >1.0)."""
    spent = used(history)
    return {
        name: round(float(spent[name] or 0) / limit, 4) for name, limit in limits(contract).items()
    }


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def live_reservations(history: Mapping[str, Any], now: str) -> list[Reservation]:
    """Reservations not yet settled by an attempt and not abandoned (past their time)."""
    t_now = parse_time(now)
    out = []
    for r in history.get("reserved") or []:
        at = parse_time(r.get("at"))
        if at is None or t_now is None:
            continue
        if (t_now - at).total_seconds() <= float(r.get("wall_s") or 0) + RESERVATION_GRACE_S:
            out.append(cast("Reservation", dict(r)))
    return out


def held(live: Iterable[Mapping[str, Any]], name: str) -> float:
    """What the ``live`` reservations hold of the budget ``name``."""
    return sum(float(r.get(name) or 0) for r in live)


def verify_reserve_s(contract: Mapping[str, Any]) -> float:
    """Wall time kept back for verification: budgets.verify_reserve_s, else the checks' timeouts."""
    budgets = contract.get("budgets") or {}
    if budgets.get("verify_reserve_s"):
        return float(budgets["verify_reserve_s"])
    return float(sum(float(c.get("timeout") or 0) for c in contract.get("criteria") or []))


def admit(
    history: Mapping[str, Any],
    contract: Mapping[str, Any],
    *,
    now: str,
    pool: Mapping[str, Any] | None = None,
) -> Admission:
    """May the next run start? Reserve its share of every budget, keep verification's reserve.

    ``pool``: the run's pool this worker reserves from as well (``id``, ``jobs``, its
    ``history``; ``admit_pool``). Pure: ``now`` (RFC 3339) is an input so a recorded
    admission can be replayed.
    """
    budgets = contract.get("budgets") or {}
    worker = contract.get("worker") or {}
    live = live_reservations(history, now)
    short: list[str] = []
    granted: Granted = {"timeout_s": None, "cost_usd": None, "turns": None}
    remaining: dict[str, float] = {}

    def left(name: str, used: float) -> float | None:
        if budgets.get(name) is None:
            return None
        value = float(budgets[name]) - used - held(live, name)
        remaining[name] = round(value, 6)
        return value

    attempts_left = left("attempts", float(spent_attempts(history)) + len(live))
    if attempts_left is not None and attempts_left < 1:
        short.append("attempts")
    verify_left = left("verify_attempts", float(history.get("verify_attempts") or 0))
    if verify_left is not None and verify_left < 1:
        short.append("verify_attempts")

    reserve = verify_reserve_s(contract)
    timeout = worker.get("timeout")
    wall_left = left("wall_seconds", float(history.get("wall_s") or 0))
    if wall_left is not None:
        for_worker = wall_left - reserve
        if for_worker <= 0:
            short.append("wall_seconds")
        timeout = min(float(timeout), for_worker) if timeout else for_worker
    granted["timeout_s"] = round(float(timeout), 3) if timeout else None

    cost_left = left("cost_usd", float(history.get("cost_usd") or 0))
    share = worker.get("max_cost_usd")
    if share is None and history.get("attempts") and history.get("cost_usd"):
        share = float(history["cost_usd"]) / float(history["attempts"])  # the average run
    if cost_left is not None:
        if cost_left <= 0:
            short.append("cost_usd")
        share = min(float(share), cost_left) if share else cost_left
    granted["cost_usd"] = round(float(share), 6) if share else None

    for name, key in (("tokens", "tokens"), ("turns", "turns")):
        value = left(name, float(history.get(key) or 0))
        if value is not None and value <= 0:
            short.append(name)
    turns = worker.get("max_turns")
    if "turns" in remaining and remaining["turns"] > 0:
        turns = min(int(turns), int(remaining["turns"])) if turns else int(remaining["turns"])
    granted["turns"] = turns

    blocked_until = history.get("resume_after")
    t_resume, t_now = parse_time(blocked_until), parse_time(now)
    blocked = bool(t_resume and t_now and t_now < t_resume)
    admitted = not short and not blocked
    if short:
        reason = "budget exhausted: " + ", ".join(short)
    elif blocked:
        reason = f"blocked until {blocked_until} ({history.get('last_class')}): not before then"
    else:
        reason = "admitted: the next run's share is reserved"
    out: Admission = {
        "admitted": admitted,
        "blocked_until": blocked_until if blocked else None,
        "attempt": int(history.get("attempts") or 0) + len(live) + 1,
        "exhausted": short,
        "granted": granted,
        "verify_reserve_s": reserve,
        "remaining": remaining,
        "reason": reason,
    }
    if admitted:
        out["reservation"] = {
            "at": now,
            "wall_s": granted["timeout_s"] or 0,
            "wall_seconds": granted["timeout_s"] or 0,
            "cost_usd": granted["cost_usd"] or 0,
        }
    if pool is not None and pool_limits(contract):
        _with_pool(out, admit_pool(pool, contract, out, now=now))
    return out


def pool_key(pool_id: str) -> str:
    """The ledger key of a pool's records."""
    return POOL_PREFIX + pool_id


def pool_limits(contract: Mapping[str, Any] | None) -> dict[str, float]:
    """The contract's ``pool``: what one run's workers may spend together."""
    section = (contract or {}).get("pool") or {}
    return {k: float(section[k]) for k in POOLED if section.get(k) is not None}


def pool_share(
    admission: Mapping[str, Any], limits: Mapping[str, float], jobs: int
) -> dict[str, float]:
    """What one worker reserves from the pool: what its task's admission grants it (the
    cost share ``worker.max_cost_usd``, the timeout, the task's tokens left), else the
    pool divided by the run's workers."""
    granted = admission.get("granted") or {}
    remaining = admission.get("remaining") or {}
    own = {
        "cost_usd": granted.get("cost_usd"),
        "tokens": remaining.get("tokens"),
        "wall_seconds": granted.get("timeout_s"),
    }
    out = {}
    for name, limit in limits.items():
        mine = own.get(name)
        figure = float(mine) if mine else limit / max(1, jobs)
        out[name] = round(int(figure) if name == "tokens" else figure, 6)
    return out


def admit_pool(
    pool: Mapping[str, Any],
    contract: Mapping[str, Any],
    admission: Mapping[str, Any],
    *,
    now: str,
) -> PoolAdmission:
    """May this worker take its share of the run's pool? ``pool``: ``id``, ``jobs``, the
    ``task`` reserving, and the pool's ``history`` (folded from its ledger records by
    ``fold``). Admitted: the share is reserved; else ``wait`` while the live reservations
    (running workers') would free enough once settled, refused when they would not.
    Pure, like ``admit``."""
    history = pool.get("history") or empty_history()
    limits = pool_limits(contract)
    live = live_reservations(history, now)
    spent = {
        "cost_usd": float(history.get("cost_usd") or 0),
        "tokens": float(history.get("tokens") or 0),
        "wall_seconds": float(history.get("wall_s") or 0),
    }
    share = pool_share(admission, limits, int(pool.get("jobs") or 1))
    left = {
        name: round(limit - spent[name] - held(live, name), 6) for name, limit in limits.items()
    }
    short = [name for name in limits if share[name] > left[name] + 1e-9]
    # Short even were every live share returned unspent: nothing to wait for.
    never = [name for name in short if share[name] > limits[name] - spent[name] + 1e-9]
    waiting = bool(short) and bool(live) and not never
    out: PoolAdmission = {
        "id": pool.get("id"),
        "admitted": not short,
        "wait": waiting,
        "exhausted": [] if not short or waiting else (never or short),
        "short": short,
        "share": share,
        "left": left,
        "running": len(live),
    }
    if short:
        what = ", ".join(
            f"{n} {left[n]:g} left of {limits[n]:g}, share {share[n]:g}" for n in short
        )
        out["reason"] = f"the run's pool cannot cover this worker's share ({what}): " + (
            f"waiting for {len(live)} running worker(s) to settle"
            if waiting
            else "nothing running holds a share that could free it"
        )
    else:
        out["reason"] = "the worker's share of the run's pool is reserved"
        mine: dict[str, object] = {
            "at": now,
            "task": pool.get("task"),
            "attempt": admission.get("attempt"),
            "wall_s": (admission.get("reservation") or {}).get("wall_s") or 0,
            **share,
        }
        out["reservation"] = cast("Reservation", mine)
    return out


def _with_pool(admission: Admission, pool: PoolAdmission) -> None:
    """The task's admission joined with its pool's: admitted only when both are."""
    admission["pool"] = pool
    if not admission["admitted"]:  # refused for the task's own budgets: nothing to wait for
        pool.pop("reservation", None)
        pool["wait"] = False
        return
    if pool["admitted"]:
        admission["reservation"]["pool"] = pool["id"]
        return
    admission["admitted"] = False
    admission.pop("reservation", None)
    admission["reason"] = "pool: " + pool["reason"]
