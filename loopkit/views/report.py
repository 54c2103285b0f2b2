"""The ledger summarized for a person: per task, and the loop's health.

Per task: attempts, outcome, why it stopped, cost (trusted, and untrusted apart), tokens,
time. Health: termination reasons, the share of runs that used more than 80% of a budget,
p95 verification attempts per task, cost per completed task; with the stacks ``lk stack``
recorded, the pull-request panel (``pull_requests``: terminal tasks that ended without a
pull request against its SLO, cost per merged pull request, landings and returns).
Rendered as a terminal
table, JSON (``schemas/report.json``) or one self-contained HTML page with a timeline of
attempts coloured by outcome.
"""

from __future__ import annotations

import html
import math
import re
import shutil
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loopkit import timing
from loopkit.boundary.egress import refused_text
from loopkit.decision import budget
from loopkit.text import clean, clip, clip_words

if TYPE_CHECKING:
    from loopkit.sections import (
        DraftRates,
        Estimates,
        Health,
        PullRequests,
        Report,
        StageTimes,
        TaskReport,
    )

NEAR_LIMIT = 0.8
#: Outcome -> colour of its box in the HTML timeline.
COLOURS = {
    "complete": "#2e9e44",
    "retry": "#e0a800",
    "replan": "#e8710a",
    "blocked": "#7b4fc9",
    "failed": "#d93025",
    "budget_exhausted": "#8c1c13",
    "cancelled": "#6b7280",
    "admitted": "#c7d2fe",
}


def _p95(values: list[int]) -> int | None:
    """Nearest-rank 95th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _run_fractions(rec: Mapping[str, Any]) -> dict[str, float]:
    """How close one run came to each budget: across runs (the task's totals) and per run."""
    inputs = rec.get("inputs") or {}
    doc = inputs.get("document") or {}
    contract = doc.get("contract") or {}
    after = budget.fold(inputs.get("history") or budget.empty_history(), rec)
    out = budget.fractions(after, contract)
    worker = contract.get("worker") or {}
    usage = rec.get("usage") or {}
    run = rec.get("run") or {}
    for name, used, limit in (
        ("run.turns", usage.get("turns"), worker.get("max_turns")),
        ("run.seconds", (run or {}).get("duration_s"), worker.get("timeout")),
        ("run.cost_usd", usage.get("cost_usd"), worker.get("max_cost_usd")),
    ):
        if used is not None and limit:
            out[name] = round(float(used) / float(limit), 4)
    return out


#: Outcomes that end a task (a retry or a replan does not).
TERMINAL = ("complete", "failed", "blocked", "budget_exhausted", "cancelled")
#: Reference 002's SLO: fewer than this share of terminal runs end without a pull request.
PR_SLO = 0.05


def pull_requests(
    tasks: Sequence[Mapping[str, Any]],
    stacks: Sequence[Mapping[str, Any]],
    queue: Sequence[Mapping[str, Any]] = (),
) -> PullRequests:
    """The pull-request panel: which terminal tasks a stack's slice carries to review
    (a pull request, or a pushed branch on a plain remote), what each merged one cost
    (every task's spend, parked ones too, over the merged slices), landings and returns:
    the stacks' (merged slices, refused landings and restacks) and the merge queue's
    (``lk queue``'s entries by status)."""
    offered: set[str] = set()
    merged = returns = 0
    for stack in stacks:
        plain = stack.get("forge") == "plain"
        for s in stack.get("slices") or []:
            if s.get("pr") is not None or (plain and s.get("pushed")):
                offered.add(str(s.get("id")))
                task = (s.get("evidence") or {}).get("task")
                if task:
                    offered.add(str(task))
            if s.get("merged"):
                merged += 1
        returns += len(stack.get("returned") or [])
    terminal = [t for t in tasks if t.get("outcome") in TERMINAL]
    without = [str(t["task_id"]) for t in terminal if str(t["task_id"]) not in offered]
    trusted = sum(float(t.get("cost_usd") or 0) for t in tasks)
    untrusted = sum(float(t.get("cost_untrusted_usd") or 0) for t in tasks)
    return {
        "stacks": len(stacks),
        "terminal_tasks": len(terminal),
        "without_pull_request": without,
        "share_without": round(len(without) / len(terminal), 4) if terminal else 0.0,
        "slo_share": PR_SLO,
        "merged": merged,
        "cost_per_merged": {
            "trusted_usd": round(trusted / merged, 6) if merged else None,
            "untrusted_usd": round(untrusted / merged, 6) if merged else None,
        },
        "landings": merged,
        "returns": returns,
        "queue": {
            status: sum(1 for e in queue if e.get("status") == status)
            for status in ("landed", "returned", "queued")
        },
    }


#: The plans' SLO: at least this share of drafted plans carry a valid budget, file list
#: and end marker.
DRAFT_SLO = 0.95


def plan_drafts(outcomes: Sequence[str]) -> DraftRates:
    """The plan-draft panel: of ``lk-plan draft``'s outcomes, the share valid the first
    time and the share valid at all (first time or after repair), against the SLO."""
    n = len(outcomes)
    first = sum(1 for o in outcomes if o == "first_time")
    repaired = sum(1 for o in outcomes if o == "repaired")
    return {
        "drafts": n,
        "valid_first_time": first,
        "valid_after_repair": repaired,
        "given_up": sum(1 for o in outcomes if o == "given_up"),
        "first_time_share": round(first / n, 4) if n else None,
        "after_repair_share": round((first + repaired) / n, 4) if n else None,
        "slo_share": DRAFT_SLO,
    }


def estimates(
    landed: Sequence[Mapping[str, Any]], attempts: int, over: int, splits: int
) -> Estimates:
    """The estimates panel: of the plan tasks that landed, the share whose diff stayed
    within the estimate (their ``budget:``) and the median actual/estimate; the attempts
    that over-ran their estimate, and the slices re-split (``lk-plan split``)."""
    within = sum(1 for e in landed if e.get("within"))
    return {
        "landed": len(landed),
        "within": within,
        "within_share": round(within / len(landed), 4) if landed else None,
        "attempts": attempts,
        "over_estimate": over,
        "resplit": splits,
        "median_lines_ratio": _median_ratio(landed, "lines_ratio"),
        "median_files_ratio": _median_ratio(landed, "files_ratio"),
    }


def _median_ratio(landed: Sequence[Mapping[str, Any]], key: str) -> float | None:
    ratios = [float(e[key]) for e in landed if e.get(key) is not None]
    return round(statistics.median(ratios), 4) if ratios else None


def stages(timed: Sequence[Sequence[Mapping[str, Any]]]) -> StageTimes:
    """Where the timed attempts' time went (their records' ``timings``, loopkit.timing):
    per stage in the order stages run, the median seconds and git processes an attempt,
    and the median worker and check seconds."""
    seconds: dict[str, list[float]] = {}
    processes: dict[str, list[int]] = {}
    for entries in timed:
        for e in entries:
            if not isinstance(e, Mapping) or not isinstance(e.get("s"), (int, float)):
                continue
            stage = str(e.get("stage"))
            seconds.setdefault(stage, []).append(float(e["s"]))
            processes.setdefault(stage, []).append(_git_processes(e))
            if isinstance(e.get("worker_s"), (int, float)):
                seconds.setdefault("worker", []).append(float(e["worker_s"]))
            for c in e.get("checks") or ():
                if isinstance(c, Mapping) and isinstance(c.get("s"), (int, float)):
                    seconds.setdefault(f"check {c.get('name')}", []).append(float(c["s"]))
    per = {
        stage: {
            "attempts": len(values),
            "median_s": round(statistics.median(values), 4),
            **(
                {"median_git_processes": statistics.median(processes[stage])}
                if stage in processes
                else {}
            ),
        }
        for stage, values in seconds.items()
    }
    git = [sum(_git_processes(e) for e in t) for t in timed]
    return {
        "attempts": len(timed),
        "per_stage": per,
        "median_git_processes": statistics.median(git) if git else None,
    }


def _git_processes(entry: object) -> int:
    """A timing entry's git processes (0 for a damaged one: ledger lines are input)."""
    git = entry.get("git") if isinstance(entry, Mapping) else None
    count = git.get("processes") if isinstance(git, Mapping) else None
    return count if isinstance(count, int) else 0


def build(
    records: Sequence[tuple[int, Mapping[str, Any]]],
    problems: list[Mapping[str, Any]] | None = None,
    *,
    ledger: str = "",
    generated_at: str = "",
    stacks: Sequence[Mapping[str, Any]] | None = None,
    queue: Sequence[Mapping[str, Any]] = (),
) -> Report:
    """The report document for a ledger's records (in ledger order)."""
    tally = _Tally()
    for _, rec in records:
        tally.add(rec)
    task_list = list(tally.tasks.values())
    health = _health(tally, task_list)
    if stacks is not None:
        health["pull_requests"] = pull_requests(task_list, stacks, queue)
    return {
        "kind": "loopkit/report",
        "version": 1,
        "ledger": ledger,
        "generated_at": generated_at,
        "records": len(records),
        "tasks": task_list,
        "health": health,
        "problems": list(problems or []),
    }


class _Tally:
    """The ledger's records folded, one at a time, into the report's tasks and the
    counts its health is made of."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskReport] = {}
        self.runs = 0
        self.near_limit_runs = 0
        self.near_by_budget: Counter[str] = Counter()
        self.refused_hosts: Counter[str] = Counter()
        self.verify_refused_hosts: Counter[str] = Counter()  # the checks' (verify.network)
        self.triggers: Counter[str] = Counter()
        self.draft_outcomes: list[str] = []
        self.last_estimate: dict[str, Mapping[str, Any]] = {}  # per task: its last attempt's
        self.estimated = self.over_estimate = self.splits = 0
        self.timed: list[Sequence[Mapping[str, Any]]] = []

    def add(self, rec: Mapping[str, Any]) -> None:
        if rec.get("type") == "draft":  # lk-plan draft's outcome: no task, no run
            draft = rec.get("draft") or {}
            self.draft_outcomes.append(str(draft.get("outcome") or ""))
            self.splits += bool(draft.get("split")) and draft.get("outcome") != "given_up"
            return
        if rec.get("type") == "pool":  # a run's pool: its tasks' own records tell their runs
            return
        est = rec.get("estimate")
        if isinstance(est, Mapping):
            self.last_estimate[str(rec.get("task_id") or "")] = est
            self.estimated += 1
            self.over_estimate += est.get("within") is False
        t = self.task(rec)
        t["last_at"] = rec.get("recorded_at")
        decision = rec.get("decision") or None
        if rec.get("type") == "admission":
            if decision is None:
                t["timeline"].append(
                    {
                        "attempt": rec.get("attempt"),
                        "outcome": "admitted",
                        "at": rec.get("recorded_at"),
                        "failure_class": None,
                        "reason": clean(str(rec["reason"])) if rec.get("reason") else None,
                    }
                )
                return
        else:
            self.ran(t, rec)
        if decision is not None:
            _decided(t, decision, rec)

    def task(self, rec: Mapping[str, Any]) -> TaskReport:
        """The record's task as the report shows it (started by its first record)."""
        tid = str(rec.get("task_id") or "")
        return self.tasks.setdefault(
            tid,
            {
                "task_id": tid,
                "attempts": 0,
                "verify_attempts": 0,
                "outcome": None,
                "failure_class": None,
                "why": None,
                "cost_usd": 0.0,
                "cost_untrusted_usd": 0.0,
                "tokens": 0,
                "wall_s": 0.0,
                "first_at": rec.get("started_at") or rec.get("recorded_at"),
                "last_at": None,
                "timeline": [],
            },
        )

    def ran(self, t: TaskReport, rec: Mapping[str, Any]) -> None:
        """An attempt that ran: what it spent, the hosts refused, its stages' times, the
        budgets it came near."""
        self.runs += 1
        self.triggers[str((rec.get("trigger") or {}).get("kind") or "manual")] += 1
        t["attempts"] += 1
        usage = rec.get("usage") or {}
        if usage.get("verified"):
            t["verify_attempts"] += 1
        usd = usage.get("cost_usd")
        if usd is not None and usage.get("cost_trusted"):
            t["cost_usd"] = round(t["cost_usd"] + float(usd), 6)
        elif usd is not None:
            t["cost_untrusted_usd"] = round(t["cost_untrusted_usd"] + float(usd), 6)
        t["tokens"] += int(usage.get("tokens") or 0)
        t["wall_s"] = round(t["wall_s"] + float(usage.get("wall_s") or 0), 3)
        for host, n in (((rec.get("run") or {}).get("refused_hosts")) or {}).items():
            self.refused_hosts[host] += int(n)
        for host, n in (((rec.get("verify") or {}).get("refused_hosts")) or {}).items():
            self.verify_refused_hosts[host] += int(n)
        if isinstance(rec.get("timings"), list):
            self.timed.append(rec["timings"])
        over = [k for k, v in _run_fractions(rec).items() if v > NEAR_LIMIT]
        if over:
            self.near_limit_runs += 1
            self.near_by_budget.update(over)


def _decided(t: TaskReport, decision: Mapping[str, Any], rec: Mapping[str, Any]) -> None:
    """The task's outcome as of its latest decision, and the decision on its timeline."""
    t["outcome"] = decision.get("outcome")
    t["failure_class"] = decision.get("failure_class")
    reason = clean(str(decision.get("reason") or ""))
    t["why"] = reason.splitlines()[0] if reason.strip() else ""
    t["timeline"].append(
        {
            "attempt": rec.get("attempt"),
            "outcome": decision.get("outcome"),
            "failure_class": decision.get("failure_class"),
            "at": rec.get("recorded_at"),
            "reason": t["why"],
        }
    )


def _health(tally: _Tally, task_list: list[TaskReport]) -> Health:
    """The loop's health from the folded records: why tasks ended, how close runs came to
    their budgets, what completed tasks cost, the estimates, the stages' times."""
    runs = tally.runs
    completed = [t for t in task_list if t["outcome"] == "complete"]
    trusted = sum(t["cost_usd"] for t in completed)
    untrusted = sum(t["cost_untrusted_usd"] for t in completed)
    return {
        "tasks": len(task_list),
        "runs": runs,
        "termination_reasons": dict(Counter(str(t["outcome"]) for t in task_list if t["outcome"])),
        "failure_classes": dict(
            Counter(str(t["failure_class"]) for t in task_list if t["failure_class"])
        ),
        "runs_near_budget": {
            "threshold": NEAR_LIMIT,
            "runs": tally.near_limit_runs,
            "share": round(tally.near_limit_runs / runs, 4) if runs else 0.0,
            "by_budget": dict(tally.near_by_budget),
        },
        "triggers": dict(tally.triggers),
        "p95_verify_attempts": _p95([t["verify_attempts"] for t in task_list if t["attempts"]]),
        "completed_tasks": len(completed),
        "cost_per_completed_task": {
            "trusted_usd": round(trusted / len(completed), 6) if completed else None,
            "untrusted_usd": round(untrusted / len(completed), 6) if completed else None,
        },
        "cost_total": {
            "trusted_usd": round(sum(t["cost_usd"] for t in task_list), 6),
            "untrusted_usd": round(sum(t["cost_untrusted_usd"] for t in task_list), 6),
        },
        "refused_hosts": dict(tally.refused_hosts.most_common()),
        "verify_refused_hosts": dict(tally.verify_refused_hosts.most_common()),
        "plan_drafts": plan_drafts(tally.draft_outcomes),
        "estimates": estimates(
            [
                tally.last_estimate[t["task_id"]]
                for t in completed
                if t["task_id"] in tally.last_estimate
            ],
            tally.estimated,
            tally.over_estimate,
            tally.splits,
        ),
        "stages": stages(tally.timed),
    }


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:.2f}"


def text(report: Mapping[str, Any], *, width: int | None = None) -> str:
    """A terminal table per task, then the loop's health. ``width`` (default: the
    terminal's, else 100) bounds each line: the reason column gets what is left, cut at a
    word with an ellipsis."""
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    h = report["health"]
    lines = [
        *_task_table(report["tasks"], width),
        "",
        *_health_lines(h, report["records"]),
        *_pull_request_lines(h.get("pull_requests")),
        *_plan_lines(h.get("plan_drafts"), h.get("estimates")),
        *_stage_lines(h.get("stages")),
    ]
    if report["problems"]:
        lines.append(
            f"  ledger problems: {len(report['problems'])} line(s) skipped (torn or damaged)"
        )
    # Ledger lines are input (hand edits, older writers): nothing reaches the terminal raw.
    return clean("\n".join(lines)) + "\n"


def _task_table(tasks: Sequence[Mapping[str, Any]], width: int) -> list[str]:
    """One row per task; the reason column gets what ``width`` leaves."""
    rows = [
        ("task", "attempts", "outcome", "cost", "untrusted", "tokens", "time", "why it stopped")
    ]
    for t in tasks:
        rows.append(
            (
                t["task_id"],
                str(t["attempts"]),
                str(t["outcome"] or "-"),
                _money(t["cost_usd"]),
                _money(t["cost_untrusted_usd"]) if t["cost_untrusted_usd"] else "-",
                str(t["tokens"]),
                f"{t['wall_s']:.0f}s",
                t["why"] or "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    room = max(20, width - sum(widths) - 2 * len(widths))
    return [
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True))
        + "  "
        + clip_words(r[-1], room)
        for r in rows
    ]


def _health_lines(h: Mapping[str, Any], records: int) -> list[str]:
    """The loop's health: why tasks ended, triggers, budgets neared, cost, refused hosts."""
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(h["termination_reasons"].items())) or "-"
    near = h["runs_near_budget"]
    cpt = h["cost_per_completed_task"]
    lines = [
        f"loop health ({h['tasks']} tasks, {h['runs']} runs, {records} records)",
        f"  termination reasons: {reasons}",
        "  triggers: " + (", ".join(f"{k} {v}" for k, v in sorted(h["triggers"].items())) or "-"),
        f"  runs that used >{int(near['threshold'] * 100)}% of a budget: {near['runs']} "
        f"({near['share'] * 100:.0f}%)",
        f"  p95 verification attempts per task: {h['p95_verify_attempts'] if h['p95_verify_attempts'] is not None else '-'}",
        f"  cost per completed task: {_money(cpt['trusted_usd'])} trusted"
        + (
            f", {_money(cpt['untrusted_usd'])} untrusted (shown apart)"
            if cpt["untrusted_usd"]
            else ""
        ),
    ]
    if h.get("refused_hosts"):
        lines.append(f"  hosts the egress gate refused: {refused_text(h['refused_hosts'])}")
    if h.get("verify_refused_hosts"):
        refused = refused_text(h["verify_refused_hosts"])
        lines.append(f"  hosts the egress gate refused the checks: {refused}")
    return lines


def _pull_request_lines(prs: Mapping[str, Any] | None) -> list[str]:
    """The pull-request panel: only where pull requests are the way work lands (a stack,
    the merge queue); a local loop commits on its branch, and no pull request is missing
    there."""
    if not prs or not (prs["stacks"] or any(prs["queue"].values())):
        return []
    cpm = prs["cost_per_merged"]
    slo = "met" if prs["share_without"] < prs["slo_share"] else "MISSED"
    return [
        f"  ended without a pull request: {len(prs['without_pull_request'])} of "
        f"{prs['terminal_tasks']} terminal tasks ({prs['share_without'] * 100:.0f}%; "
        f"SLO < {prs['slo_share'] * 100:.0f}%: {slo})",
        f"  cost per merged pull request: {_money(cpm['trusted_usd'])} trusted"
        + (f", {_money(cpm['untrusted_usd'])} untrusted" if cpm["untrusted_usd"] else "")
        + f" ({prs['merged']} merged)",
        f"  landings vs returns: stacks {prs['landings']} landed, {prs['returns']} returned"
        f"; queue {prs['queue']['landed']} landed, {prs['queue']['returned']} returned",
    ]


def _plan_lines(drafts: Mapping[str, Any] | None, est: Mapping[str, Any] | None) -> list[str]:
    """How plan drafts fared against their SLO, and the plan tasks' estimates."""
    lines = []
    if drafts and drafts["drafts"]:
        slo = drafts["slo_share"]

        def rate(share: float) -> str:
            return f"{share * 100:.0f}% (SLO >= {slo * 100:.0f}%: {'met' if share >= slo else 'MISSED'})"

        lines += [
            f"  plan drafts: {drafts['drafts']} ({drafts['given_up']} given up)",
            f"    drafts valid first time: {rate(drafts['first_time_share'])}",
            f"    valid after repair: {rate(drafts['after_repair_share'])}",
        ]
    if est and est["attempts"]:
        lines.append(
            f"  estimates: {_share(est['within_share'])} of {est['landed']} landed plan tasks "
            f"within their estimate; median actual/estimate: lines "
            f"{_ratio(est['median_lines_ratio'])}, files {_ratio(est['median_files_ratio'])}; "
            f"{est['over_estimate']} of {est['attempts']} attempts over, "
            f"{est['resplit']} re-split"
        )
    return lines


def _stage_lines(timed: Mapping[str, Any] | None) -> list[str]:
    """Where an attempt's time goes, stage by stage (median of the timed attempts)."""
    if not timed or not timed["attempts"]:
        return []
    parts = [
        f"{name} {v['median_s']:.3f}s"
        + (f" (git {v['median_git_processes']:g})" if "median_git_processes" in v else "")
        for name, v in timed["per_stage"].items()
    ]
    return [
        f"  where the time goes (median of {timed['attempts']} timed attempts; "
        f"{timed['median_git_processes']:g} git processes an attempt): " + ", ".join(parts)
    ]


def _box(a: Mapping[str, Any]) -> str:
    title = (
        f"attempt {a.get('attempt')}: {a.get('outcome')} {a.get('failure_class') or ''} "
        f"at {a.get('at')} - {a.get('reason') or ''}"
    )
    colour = COLOURS.get(str(a.get("outcome")), "#999")
    return (
        f'<span class="box" style="background:{colour}" title="{html.escape(title)}">'
        f"{html.escape(str(a.get('attempt') or ''))}</span>"
    )


def page(report: Mapping[str, Any]) -> str:
    """One self-contained HTML page: the table, the health, and a timeline of attempts."""
    e = html.escape
    h = report["health"]
    rows = []
    for t in report["tasks"]:
        boxes = "".join(_box(a) for a in t["timeline"])
        rows.append(
            "<tr>"
            f"<td>{e(t['task_id'])}</td><td>{t['attempts']}</td>"
            f'<td><span class="tag" style="background:{COLOURS.get(str(t["outcome"]), "#999")}">'
            f"{e(str(t['outcome'] or '-'))}</span></td>"
            f"<td>{e(_money(t['cost_usd']))}</td><td>{e(_money(t['cost_untrusted_usd']))}</td>"
            f"<td>{t['tokens']}</td><td>{t['wall_s']:.0f}s</td>"
            f"<td>{e(t['why'] or '')}</td><td class=tl>{boxes}</td>"
            "</tr>"
        )
    legend = "".join(
        f'<span class="box" style="background:{c}"></span>{e(k)} ' for k, c in COLOURS.items()
    )
    near = h["runs_near_budget"]
    cpt = h["cost_per_completed_task"]
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(h["termination_reasons"].items())) or "-"
    drafts = h.get("plan_drafts") or {}
    drafts_item = (
        f"<li>plan drafts: {drafts['drafts']}; valid first time "
        f"{drafts['first_time_share'] * 100:.0f}%, valid after repair "
        f"{drafts['after_repair_share'] * 100:.0f}% (SLO &ge; {drafts['slo_share'] * 100:.0f}%)</li>\n"
        if drafts.get("drafts")
        else ""
    )
    est = h.get("estimates") or {}
    if est.get("attempts"):
        drafts_item += (
            f"<li>estimates: {_share(est['within_share'])} of {est['landed']} landed plan tasks "
            f"within their estimate; median actual/estimate: lines "
            f"{_ratio(est['median_lines_ratio'])}, files {_ratio(est['median_files_ratio'])}; "
            f"{est['over_estimate']} of {est['attempts']} attempts over, {est['resplit']} "
            "re-split</li>\n"
        )
    return clean(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loopkit report</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse}}td,th{{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}
.box{{display:inline-block;min-width:18px;height:18px;margin:1px;border-radius:3px;color:#fff;font-size:11px;text-align:center;line-height:18px}}
.tag{{padding:1px 6px;border-radius:3px;color:#fff}}.tl{{white-space:nowrap}}
</style></head><body>
<h1>loopkit report</h1>
<p>ledger <code>{e(str(report.get("ledger") or ""))}</code>, {report["records"]} records, generated {e(str(report.get("generated_at") or ""))}</p>
<h2>Loop health</h2>
<ul>
<li>termination reasons: {e(reasons)}</li>
<li>runs that used more than {int(near["threshold"] * 100)}% of a budget: {near["runs"]} of {h["runs"]} ({near["share"] * 100:.0f}%)</li>
<li>p95 verification attempts per task: {e(str(h["p95_verify_attempts"]))}</li>
<li>cost per completed task: {e(_money(cpt["trusted_usd"]))} trusted; untrusted (shown apart): {e(_money(cpt["untrusted_usd"]))}</li>
{drafts_item}<li>ledger problems (skipped lines): {len(report["problems"])}</li>
</ul>
<h2>Tasks and timeline</h2>
<p>{legend}</p>
<table><tr><th>task</th><th>attempts</th><th>outcome</th><th>cost</th><th>untrusted</th><th>tokens</th><th>time</th><th>why it stopped</th><th>timeline</th></tr>
{"".join(rows)}
</table>
</body></html>
""")


# --------------------------------------------------------------------------- one task


def task_story(
    records: list[Mapping[str, Any]],
    task_id: str,
    *,
    refs: list[tuple[str, str, str]],
    memory: str | None,
) -> dict[str, Any]:
    """One task's story for ``lk show``: every attempt (decision, failure class, reason,
    duration, cost), where each attempt's tree is saved and how to restore it, and what
    the memory file says about the task."""
    attempts = []
    for rec in records:
        if rec.get("type") != "attempt" or rec.get("task_id") != task_id:
            continue
        decision = rec.get("decision") or {}
        run = rec.get("run") or {}
        usage = rec.get("usage") or {}
        attempts.append(
            {
                "attempt": rec.get("attempt"),
                "attempt_id": rec.get("attempt_id"),
                "recorded_at": rec.get("recorded_at"),
                "outcome": decision.get("outcome"),
                "failure_class": decision.get("failure_class"),
                "reason": decision.get("reason") or rec.get("reason"),
                "hint": (rec.get("verify") or {}).get("hint"),
                "duration_s": run.get("duration_s"),
                "cost_usd": usage.get("cost_usd"),
                "cost_trusted": usage.get("cost_trusted"),
                "refused_hosts": dict(run.get("refused_hosts") or {}),
                "verify_refused_hosts": dict((rec.get("verify") or {}).get("refused_hosts") or {}),
                "timings": rec.get("timings") if isinstance(rec.get("timings"), list) else None,
            }
        )
    # A saved attempt is a commit on the tree its task began from: a cherry-pick without
    # committing applies only what the attempt changed, on top of whatever landed since
    # (later tasks, the memory file, the checklist); a checkout of its whole tree would
    # stage their reversal too.
    saved = [
        {
            "ref": name,
            "commit": commit,
            "subject": subject,
            "restore": f"git cherry-pick --no-commit {name}",
        }
        for name, commit, subject in refs
    ]
    notes = _memory_about(memory, task_id) if memory else []
    return {
        "kind": "loopkit/show",
        "version": 1,
        "task": task_id,
        "attempts": attempts,
        "saved": saved,
        "memory": notes,
    }


def _memory_about(memory: str, task_id: str) -> list[str]:
    """The memory file's sections whose heading names ``task_id``."""
    out: list[str] = []
    current: list[str] | None = None
    for line in memory.splitlines():
        if line.startswith("## "):
            if current:
                out.append("\n".join(current).strip())
            current = [line] if re.search(rf"\b{re.escape(task_id)}\b", line) else None
        elif current is not None:
            current.append(line)
    if current:
        out.append("\n".join(current).strip())
    return out


def story_text(story: Mapping[str, Any]) -> str:
    """``lk show`` for a person."""
    lines = [f"task {story['task']}: {len(story['attempts'])} attempt(s)"]
    rows = [("#", "decision (failure class)", "time", "cost", "reason")]
    for a in story["attempts"]:
        # "?" marks a figure loopkit could not trust, never a missing one ("-": no cost)
        untrusted = a["cost_usd"] is not None and a["cost_trusted"] not in (True, None)
        cost = _money(a["cost_usd"]) + (" (untrusted)" if untrusted else "")
        secs = f"{a['duration_s']:.0f}s" if isinstance(a["duration_s"], (int, float)) else "-"
        klass = f" ({a['failure_class']})" if a["failure_class"] else ""
        rows.append(
            (f"#{a['attempt']}", f"{a['outcome']}{klass}", secs, cost, clip(a["reason"] or "", 160))
        )
    if story["attempts"]:
        widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
        hints = [None, *(a.get("hint") for a in story["attempts"])]
        for r, hint in zip(rows, hints, strict=True):
            cells = [str(c).ljust(w) for c, w in zip(r[:4], widths, strict=True)]
            lines.append(("  " + "  ".join(cells) + "  " + r[4]).rstrip())
            if hint:
                lines.append(f"     note: {clip(hint, 240)}")
        for a in story["attempts"]:
            if a.get("refused_hosts"):
                lines.append(f"  #{a['attempt']} refused hosts: {refused_text(a['refused_hosts'])}")
            if a.get("verify_refused_hosts"):
                refused = refused_text(a["verify_refused_hosts"])
                lines.append(f"  #{a['attempt']} hosts refused to the checks: {refused}")
            if a.get("timings"):
                lines.append(f"  #{a['attempt']} time by stage:")
                lines.extend(f"     {clean(timing.line(e))}" for e in a["timings"])
    if story["saved"]:
        lines.append(
            "saved trees (the command beside one applies what that attempt changed, uncommitted):"
        )
        for s in story["saved"]:
            lines.append(f"  {s['ref']}  {clip_words(s['subject'], 60)}\n    {s['restore']}")
    else:
        lines.append("no saved trees under refs/loopkit/")
    if story["memory"]:
        lines.append("the memory file says:")
        for note in story["memory"]:
            lines.extend("  " + line for line in note.splitlines())
    return "\n".join(lines) + "\n"
