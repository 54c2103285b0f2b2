"""What an eval found, per configuration and for pairs of them (schemas/eval.json).

Per configuration: pass@1 over tasks with a task-level bootstrap interval, with the
infrastructure's failures counted as failures and without them (those trials left
out); pass@k and pass^k (k = the repeats); cost per verified success; median wall time
and the agent's part of it; the false-claim rate (the agent said done, loopkit did not
verify it; of the trials where it said so) and the scope-violation rate. Then each
configuration against the first (or the pair asked for), paired by task.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from html import escape as e
from typing import Any

from loopkit.eval import stats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.sections import EvalPlan, EvalPlanRow, EvalReport

KIND = "loopkit/eval"
PLAN_KIND = "loopkit/eval-plan"
#: The repeats ``lk eval plan`` lists.
PLAN_REPEATS = (1, 2, 3, 5, 10)


#: The readings of infrastructure failures: as the agent's failures, or left out.
READINGS = ("counted", "excluded")
#: Verdicts from the least to the most favourable to the candidate: the strict reading
#: is the one whose verdict comes first.
ORDER = ("worse", "inconclusive", "no difference", "better")


def summarize(
    results: Sequence[dict[str, Any]],
    *,
    suite: Any,
    base: str,
    bases: dict[str, str] | None = None,
    compare: tuple[str, str] | None = None,
    reading: str = "strict",
    stale: int = 0,
) -> EvalReport:
    """The report of ``results`` (the suite's current trials). ``reading``: which count of
    the infrastructure's failures the comparisons (and the gate) use -- ``counted`` as
    the agent's failures, ``excluded`` (left out), or ``strict``: per comparison, the
    one less favourable to the candidate."""
    configs = [c.name for c in suite.configs]
    tasks = [t.id for t in suite.tasks]
    per: dict[str, Any] = {}
    rates: dict[str, dict[str, dict[str, float]]] = {}
    for name in configs:
        mine = [r for r in results if r["config"] == name]
        per[name], rates[name] = _config(mine, tasks, suite)
    pairs: list[tuple[str, str]] = []
    if compare is not None:
        pairs = [compare]
    elif len(configs) > 1:
        pairs = [(c, configs[0]) for c in configs[1:]]
    found: dict[str, list[dict[str, Any]]] = {}
    for how in READINGS:
        found[how] = [
            stats.paired(
                rates[a][how],
                rates[b][how],
                repeats=suite.repeats,
                seed=suite.seed,
                margin=suite.margin,
            )
            for a, b in pairs
        ]
        if len(pairs) > 1:
            _correct(found[how])
    comparisons = []
    for i, (a, b) in enumerate(pairs):
        both = {how: found[how][i] for how in READINGS}
        chosen = (
            min(READINGS, key=lambda how: ORDER.index(both[how]["verdict"]))
            if reading == "strict"
            else reading
        )
        comparisons.append(
            {
                "candidate": a,
                "baseline": b,
                **both[chosen],
                "reading": chosen,
                "correction": "holm" if len(pairs) > 1 else "none",
                "readings": both,
            }
        )
    expected = len(configs) * len(tasks) * suite.repeats
    return {
        "kind": KIND,
        "version": 1,
        "suite": suite.name,
        "base": base,
        "bases": dict(bases or {}),
        "repeats": suite.repeats,
        "seed": suite.seed,
        "infra_reading": reading,
        "trials": {"expected": expected, "finished": len(results), "stale": stale},
        "configs": per,
        "comparisons": comparisons,
    }


def _correct(found: list[dict[str, Any]]) -> None:
    """Holm's correction over the comparisons of one reading: each verdict again, on its
    adjusted p-value."""
    adjusted = stats.holm([float(f["p"]) for f in found])
    for f, p in zip(found, adjusted, strict=True):
        f["p_adjusted"] = round(p, 4)
        f["verdict"] = stats.verdict(
            int(f["tasks"]),
            float(f["difference"]),
            p,
            tuple(f["interval"]),
            float(f["detectable"]),
            float(f["margin"]),
        )


def _config(
    mine: Sequence[dict[str, Any]], tasks: Sequence[str], suite: Any
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """A configuration's row, and its per-task pass rates in both readings."""
    with_infra: dict[str, float] = {}
    without: dict[str, float] = {}
    counts: dict[str, dict[str, tuple[int, int]]] = {how: {} for how in READINGS}
    for t in tasks:
        trials = [r for r in mine if r["task"] == t]
        if not trials:
            continue
        ok = sum(1 for r in trials if r["status"] == "passed")
        with_infra[t] = ok / len(trials)
        counts["counted"][t] = (len(trials), ok)
        clean = [r for r in trials if r["status"] != "infra"]
        if clean:
            without[t] = ok / len(clean)
            counts["excluded"][t] = (len(clean), ok)
    k = suite.repeats
    at_k: dict[str, float | None] = {}
    hat_k: dict[str, float | None] = {}
    for how in READINGS:
        full = [nc for nc in counts[how].values() if nc[0] >= k]
        at_k[how] = (
            round(stats.mean([stats.pass_at_k(n, c, k) for n, c in full]), 4) if full else None
        )
        hat_k[how] = (
            round(stats.mean([stats.pass_hat_k(n, c, k) for n, c in full]), 4) if full else None
        )
    passed = [r for r in mine if r["status"] == "passed"]
    agent_trials = [r for r in mine if r["status"] != "infra"]
    claimed = [r for r in agent_trials if r.get("claimed")]
    costs = [r["cost_usd"] for r in mine if isinstance(r.get("cost_usd"), (int, float))]
    cost_known = len(costs) == len(mine) and bool(mine)
    seed = suite.seed
    row = {
        "trials": len(mine),
        "passed": len(passed),
        "infra": sum(1 for r in mine if r["status"] == "infra"),
        "pass_at_1": _rate(with_infra, seed),
        "pass_at_1_without_infra": _rate(without, seed),
        "k": k,
        "pass_at_k": at_k["counted"],
        "pass_hat_k": hat_k["counted"],
        "pass_at_k_without_infra": at_k["excluded"],
        "pass_hat_k_without_infra": hat_k["excluded"],
        # Over the trials whose cost is known (every trial, when cost_complete): what a
        # success cost stays in the report through an outage.
        "cost_per_success_usd": round(sum(costs) / len(passed), 6) if passed and costs else None,
        "cost_usd": round(sum(costs), 6) if costs else None,
        "cost_complete": cost_known,
        "tokens": sum(int(r.get("tokens") or 0) for r in mine),
        "wall_s_median": _median([r["wall_s"] for r in mine]),
        "agent_s_median": _median([r["agent_s"] for r in mine]),
        "overhead_s_median": _median([r["overhead_s"] for r in mine]),
        "claims": len(claimed),
        "false_claims": sum(1 for r in claimed if r.get("false_claim")),
        "false_claim_rate": round(sum(1 for r in claimed if r.get("false_claim")) / len(claimed), 4)
        if claimed
        else None,
        "scope_violation_rate": round(
            sum(1 for r in agent_trials if r.get("scope_violation")) / len(agent_trials), 4
        )
        if agent_trials
        else None,
        "per_task": {t: round(v, 4) for t, v in without.items()},
        "per_task_with_infra": {t: round(v, 4) for t, v in with_infra.items()},
    }
    return row, {"counted": with_infra, "excluded": without}


def _rate(per_task: dict[str, float], seed: int) -> dict[str, Any]:
    values = [per_task[t] for t in sorted(per_task)]
    lo, hi = stats.bootstrap(values, seed=seed)
    return {
        "value": round(stats.mean(values), 4) if values else None,
        "interval": [round(lo, 4), round(hi, 4)] if values else None,
        "tasks": len(values),
    }


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def plan(*, effect: float, rate: float, spread: float, configs: int, power: float) -> EvalPlan:
    """``lk eval plan``: per number of repeats, the tasks (and trials) a comparison of
    ``configs`` configurations needs to detect ``effect`` (schemas/eval-plan.json)."""
    rows: list[EvalPlanRow] = []
    for r in PLAN_REPEATS:
        n = stats.plan(
            effect=effect, rate=rate, repeats=r, spread=spread, comparisons=configs - 1, power=power
        )
        rows.append({"repeats": r, "tasks": n, "trials": n * r * configs})
    return {
        "kind": PLAN_KIND,
        "version": 1,
        "effect": effect,
        "rate": rate,
        "spread": spread,
        "configs": configs,
        "power": power,
        "alpha": stats.ALPHA,
        "plan": rows,
    }


def plan_text(doc: EvalPlan) -> str:
    lines = [
        f"to detect {doc['effect'] * 100:.0f} points over a {doc['rate'] * 100:.0f}% baseline "
        f"(5% two-sided, {doc['power'] * 100:.0f}% power, {doc['configs']} configurations, "
        f"task-to-task spread {doc['spread']}):"
    ]
    for row in doc["plan"]:
        lines.append(
            f"  {row['repeats']:>2} repeats: {row['tasks']:>5} tasks, {row['trials']:>6} trials"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- text


def _pct(rate: dict[str, Any]) -> str:
    if rate.get("value") is None:
        return "-"
    lo, hi = rate["interval"]
    return f"{rate['value'] * 100:.0f}% [{lo * 100:.0f}-{hi * 100:.0f}]"


def _frac(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:.4f}"


_READ = {
    "strict": "both ways, each verdict the less favourable to the candidate",
    "counted": "as the agent's failures",
    "excluded": "as left out",
}


def text(doc: EvalReport) -> str:
    """The report a person reads in a minute."""
    t = doc["trials"]
    lines = [
        f"eval {doc['suite']} at {doc['base'][:12]}: {t['finished']} of {t['expected']} trials, "
        f"{doc['repeats']} per task and configuration (seed {doc['seed']})",
        "",
    ]
    head = (
        "config",
        "pass@1 [95%]",
        "w/o infra",
        f"pass@{doc['repeats']}",
        f"pass^{doc['repeats']}",
        "infra",
        "false claims",
        "scope",
        "$/success",
        "wall (agent)",
    )
    rows = [head]
    for name, c in doc["configs"].items():
        rows.append(
            (
                name,
                _pct(c["pass_at_1"]),
                _pct(c["pass_at_1_without_infra"]),
                _frac(c["pass_at_k"]),
                _frac(c["pass_hat_k"]),
                f"{c['infra']}/{c['trials']}",
                f"{c['false_claims']}/{c['claims']}",
                _frac(c["scope_violation_rate"]),
                _money(c["cost_per_success_usd"]),
                f"{c['wall_s_median'] or 0:.1f}s ({c['agent_s_median'] or 0:.1f}s)",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    if doc["comparisons"]:
        lines.append("")
    for c in doc["comparisons"]:
        lo, hi = c["interval"]
        held = f"; Holm-adjusted p={c['p_adjusted']:.3f}" if "p_adjusted" in c else ""
        lines.append(
            f"{c['candidate']} vs {c['baseline']}: {c['verdict'].upper()} -- difference "
            f"{c['difference'] * 100:+.0f} points [{lo * 100:+.0f}, {hi * 100:+.0f}] over "
            f"{c['tasks']} tasks ({c['wins']} better, {c['losses']} worse, {c['ties']} tied; "
            f"p={c['p']:.3f}{held}; sign test p={c['sign_test_p']:.2f}); infra "
            f"{c['reading']}; this sample detects differences of "
            f"{c['detectable'] * 100:.0f} points or more"
        )
    lines.append("")
    lines.append(
        "pass@1: share of trials verified complete by loopkit, averaged over tasks; infra: "
        "trials the provider or environment failed (retried, then set apart); comparisons "
        f"read them {_READ[doc['infra_reading']]}"
    )
    if doc["trials"].get("stale"):
        lines.append(
            f"{doc['trials']['stale']} trial(s) in the log are of an earlier configuration, "
            "task or base: not counted"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- html


#: A trial's cell in the page: its status and the link to its documents (or None).
Cell = tuple[str, str | None]
GLYPH = {"passed": "✓", "failed": "✗", "infra": "!"}


def html(doc: EvalReport, cells: dict[str, dict[str, list[Cell]]] | None = None) -> str:
    """One self-contained page: pass@1 per configuration with its interval, cost against
    pass rate (the frontier), the comparisons, and per task (hardest first) each trial's
    outcome linked to its transcript or documents (``cells``: config -> task -> trials)."""
    parts = [_bars(doc), _frontier(doc)]
    body = f"<pre>{e(text(doc))}</pre>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>loopkit eval: {e(doc['suite'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}pre{font-size:13px}"
        "td,th{padding:2px 8px;text-align:center}td.t{text-align:left}"
        "a{text-decoration:none}.passed{color:#1a7f37}.failed{color:#cf222e}"
        ".infra{color:#9a6700}</style></head><body>"
        f"<h1>loopkit eval: {e(doc['suite'])}</h1>"
        "<h2>pass@1 per configuration (95% interval over tasks)</h2>"
        + parts[0]
        + "<h2>Cost against pass rate (the frontier: no configuration both cheaper and "
        "better)</h2>"
        + parts[1]
        + "<h2>Per task, hardest first</h2>"
        + _tasks_table(doc, cells or {})
        + "<h2>Summary</h2>"
        + body
        + "</body></html>\n"
    )


def _bars(doc: EvalReport) -> str:
    names = list(doc["configs"])
    bar_h, gap, left, width = 22, 10, 160, 420
    height = len(names) * (bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" height="{height}" '
        'role="img" aria-label="pass@1 per configuration, with its 95% interval">'
    ]
    for pct in (0, 25, 50, 75, 100):
        x = left + width * pct / 100
        parts.append(
            f'<line x1="{x}" y1="0" x2="{x}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x}" y="{height - 5}" font-size="11" text-anchor="middle">{pct}%</text>'
        )
    for i, name in enumerate(names):
        c = doc["configs"][name]["pass_at_1"]
        y = i * (bar_h + gap) + 5
        v = c["value"] or 0.0
        parts.append(
            f'<text x="{left - 8}" y="{y + bar_h * 0.7}" font-size="13" text-anchor="end">{e(name)}</text>'
            f'<rect x="{left}" y="{y}" width="{width * v:.1f}" height="{bar_h}" fill="#4a7ab5"/>'
        )
        if c["interval"]:
            lo, hi = c["interval"]
            x1, x2, ym = left + width * lo, left + width * hi, y + bar_h / 2
            parts.append(
                f'<line x1="{x1:.1f}" y1="{ym}" x2="{x2:.1f}" y2="{ym}" stroke="#222" stroke-width="2"/>'
                f'<line x1="{x1:.1f}" y1="{y + 4}" x2="{x1:.1f}" y2="{y + bar_h - 4}" stroke="#222"/>'
                f'<line x1="{x2:.1f}" y1="{y + 4}" x2="{x2:.1f}" y2="{y + bar_h - 4}" stroke="#222"/>'
            )
        parts.append(
            f'<text x="{left + width + 6}" y="{y + bar_h * 0.7}" font-size="12">{v * 100:.0f}%</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def frontier(points: dict[str, tuple[float, float]]) -> list[str]:
    """The configurations no other beats on both cost (lower) and pass rate (higher),
    cheapest first."""
    out: list[str] = []
    for name, (_cost, rate) in sorted(points.items(), key=lambda kv: (kv[1][0], -kv[1][1])):
        if not out or rate > points[out[-1]][1]:
            out.append(name)
    return out


def _frontier(doc: EvalReport) -> str:
    """pass@1 (with its interval) against the mean cost of a trial, per configuration."""
    points: dict[str, tuple[float, float]] = {}
    for name, c in doc["configs"].items():
        if c["pass_at_1"]["value"] is not None and c["cost_usd"] is not None and c["trials"]:
            points[name] = (c["cost_usd"] / c["trials"], c["pass_at_1"]["value"])
    if not points:
        return "<p>No configuration's cost is known.</p>"
    left, top, width, height = 60, 10, 420, 240
    most = max(cost for cost, _ in points.values()) or 1.0
    best = frontier(points)

    def xy(cost: float, rate: float) -> tuple[float, float]:
        return left + width * cost / most, top + height * (1 - rate)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 160}" '
        f'height="{top + height + 40}" role="img" aria-label="cost per trial against pass@1">'
        f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" stroke="#999"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="#999"/>'
        f'<text x="{left + width / 2}" y="{top + height + 32}" font-size="12" text-anchor="middle">'
        f"mean cost per trial (USD, 0 to {most:.4f})</text>"
        f'<text x="12" y="{top + height / 2}" font-size="12" transform="rotate(-90 12 '
        f'{top + height / 2})" text-anchor="middle">pass@1</text>'
    ]
    line = " ".join("{:.1f},{:.1f}".format(*xy(*points[n])) for n in best)
    parts.append(f'<polyline points="{line}" fill="none" stroke="#4a7ab5" stroke-dasharray="4 3"/>')
    for name, (cost, rate) in points.items():
        x, y = xy(cost, rate)
        interval = doc["configs"][name]["pass_at_1"]["interval"]
        if interval:
            y1, y2 = xy(cost, interval[0])[1], xy(cost, interval[1])[1]
            parts.append(
                f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" stroke="#222"/>'
            )
        fill = "#4a7ab5" if name in best else "#bbb"
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}"/>'
            f'<text x="{x + 8:.1f}" y="{y + 4:.1f}" font-size="12">{e(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _tasks_table(doc: EvalReport, cells: dict[str, dict[str, list[Cell]]]) -> str:
    """Rows: tasks, hardest first (the mean pass rate over the configurations, the
    infrastructure's failures left out); a cell per configuration, a mark per trial."""
    names = list(doc["configs"])
    tasks = sorted({t for c in doc["configs"].values() for t in c["per_task"]})
    rate = {
        t: stats.mean([c["per_task"][t] for c in doc["configs"].values() if t in c["per_task"]])
        for t in tasks
    }
    head = "".join(f"<th>{e(n)}</th>" for n in names)
    rows = [f"<table><tr><th>task</th><th>solved</th>{head}</tr>"]
    for t in sorted(tasks, key=lambda t: (rate[t], t)):
        row = [f"<td class='t'>{e(t)}</td><td>{rate[t] * 100:.0f}%</td>"]
        for n in names:
            marks = []
            for status, href in cells.get(n, {}).get(t, []):
                mark = f"<span class='{e(status)}'>{GLYPH.get(status, '?')}</span>"
                marks.append(f"<a href='{e(href)}'>{mark}</a>" if href else mark)
            row.append(f"<td>{' '.join(marks)}</td>")
        rows.append("<tr>" + "".join(row) + "</tr>")
    rows.append("</table>")
    return "".join(rows)
