"""What is running now, read from the state folder (no daemon): ``lk status``.

A loop leaves everything a person needs on disk as it goes: the recipes keep each
stage's document under ``runs/<task>/<run>/`` (``N-admit.json``, ``N-invoke.json``, ...)
hold the work tree's lock (``lk task begin``: ``<git-dir>/loopkit/loop.lock``, with the
loop's pid) while they run; lk-invoke writes the
worker's native stream into the attempt's artifact folder line by line; the ledger holds
what each finished attempt cost. From these: which task, which attempt, which stage,
for how long, the worker's last actions and the spend so far.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import git
from loopkit.boundary import usage as wire_usage
from loopkit.decision import ledger as ledgers
from loopkit.files import newest
from loopkit.text import clean, clip
from loopkit.worker import providers
from loopkit.worker.providers.base import detect

if TYPE_CHECKING:
    from typing import Required, TypedDict

    class Lock(TypedDict):
        """The loop's lock: its pid, and whether that process runs."""

        pid: int
        alive: bool

    class Worker(TypedDict):
        """A slice's loop at work beside this one (recipes/parallel.sh)."""

        task: str
        run: str
        round: int
        stage: str | None

    class Status(TypedDict, total=False):
        """schemas/status.json: what ``lk status`` prints."""

        kind: Required[str]
        version: Required[int]
        state_dir: Required[str]
        running: Required[bool]
        pid: int | None
        task: Required[str | None]
        run: str
        round: int
        stage: str | None
        last_document: str | None
        elapsed_s: float | None
        since_last_document_s: float | None
        attempt_id: str | None
        last_actions: list[str]
        workers: list[Worker]
        live: Spend
        spent: Spend
        wire: wire_usage.Tally

    class Spend(TypedDict, total=False):
        """What a worker or a task has spent so far, as far as it is known."""

        attempts: int
        input_tokens: int
        output_tokens: int
        cost_usd: float | None
        turns: int


STAGES = ("admit", "invoke", "diff", "verify", "judge", "decide")
#: What runs after each stage's document is written (the stage now in progress).
_NEXT = {
    "start": "admit",
    "admit": "invoke",
    "invoke": "diff",
    "diff": "verify",
    "verify": "judge or decide",
    "judge": "decide",
    "decide": "admit (the next attempt)",
}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def lock(state: Path, root: Path | None = None) -> Lock | None:
    """The loop's lock, when there is one: its pid and whether it runs. It lives with the
    work tree at ``root`` (loopkit.ratchet.lock); without one, the state folder's."""
    folder = state
    if root is not None:
        try:
            folder = git.git_dirs(root).own / "loopkit"
        except git.GitError:
            folder = state
    path = folder / "loop.lock" / "pid"
    try:
        pid = int(path.read_text(encoding="utf-8").strip() or "0")
    except (OSError, ValueError):
        return None
    return {"pid": pid, "alive": pid > 0 and _pid_alive(pid)}


def _stage(run_dir: Path) -> tuple[int, str | None, str | None, float | None]:
    """(round, the stage in progress, the last document written whole, when) for a run
    folder. A recipe opens a stage's document as the stage starts (empty until the
    command prints it): the newest empty one is the stage in progress."""
    found: list[tuple[float, int, str, int]] = []
    for p in run_dir.glob("*-*.json"):
        head, _, tail = p.stem.partition("-")
        if not head.isdigit() or tail not in STAGES:
            continue
        st = p.stat()
        found.append((st.st_mtime, int(head), tail, st.st_size))
    found.sort()
    done = [f for f in found if f[3] > 0]
    last = done[-1] if done else None
    current = found[-1] if found and found[-1][3] == 0 else None
    round_ = (current or last or (0.0, 0, "", 0))[1]
    last_name = last[2] if last else ("start" if (run_dir / "start.json").exists() else None)
    in_progress = current[2] if current else _NEXT.get(last_name or "")
    return round_, in_progress, last_name, last[0] if last else None


def _last_actions(folder: Path, limit: int = 5) -> tuple[list[str], Spend]:
    """The worker's last tool calls and its spend so far, from its stream on disk."""
    stream = next((p for p in (folder / "stream.jsonl", folder / "output.log") if p.exists()), None)
    if stream is None:
        return [], {}
    parser = providers.get(detect(stream)).parser()
    actions: list[str] = []
    with open(stream, "rb") as f:
        for line in f:
            for event in parser.feed(line):
                tool = getattr(event, "tool", None)
                if event.kind == "tool_call" and tool is not None:
                    what = tool.command or ", ".join(tool.files_written or tool.files_read)
                    actions.append(f"{tool.name} {what}".strip())
    st = parser.state
    spend: Spend = {
        "input_tokens": st.input_tokens,
        "output_tokens": st.output_tokens,
        "cost_usd": st.cost_usd,
        "turns": st.turns,
    }
    return actions[-limit:], spend


def gather(state: Path, *, now: float | None = None, root: Path | None = None) -> Status:
    """The status document (schemas/status.json); ``root``: the work tree (where its lock
    is)."""
    now = time.time() if now is None else now
    held = lock(state, root)
    body: Status = {
        "kind": "loopkit/status",
        "version": 1,
        "state_dir": str(state),
        "running": bool(held and held["alive"]),
        "pid": held["pid"] if held else None,
        "task": None,
    }
    runs = [p for p in (state / "runs").glob("*/*") if p.is_dir()]
    run_dir = newest(runs)
    if run_dir is None:
        return body
    round_, stage, last, at = _stage(run_dir)
    started = (
        (run_dir / "start.json").stat().st_mtime if (run_dir / "start.json").exists() else None
    )
    task = run_dir.parent.name
    attempt_dirs = [p for p in (state / "artifacts").glob("*") if p.is_dir()]
    current = newest(attempt_dirs) if stage in ("admit", "invoke") else None
    actions: list[str] = []
    live: Spend = {}
    if current is not None:
        actions, live = _last_actions(current)
    wire = None
    if current is not None:
        wire = wire_usage.tally(current / "meter.jsonl")
    history: Spend = {}  # the task's attempts so far and their trusted cost
    ledger_path = state / ledgers.DEFAULT_NAME
    if ledger_path.exists():
        records, _ = ledgers.read(ledger_path)
        for _, rec in records:
            if rec.get("task_id") == task and rec.get("type") == "attempt":
                usage: Mapping[str, Any] = rec.get("usage") or {}
                history["attempts"] = history.get("attempts", 0) + 1
                if isinstance(usage.get("cost_usd"), (int, float)):
                    history["cost_usd"] = round(
                        (history.get("cost_usd") or 0.0) + float(usage["cost_usd"]), 6
                    )
    # Slices side by side (recipes/parallel.sh): every run folder whose round has begun
    # and not been decided yet is a worker at it.
    workers: list[Worker] = []
    if body["running"]:
        for other in sorted(runs):
            r, st, done_last, _ = _stage(other)
            if r and done_last != "decide":
                workers.append(
                    {"task": other.parent.name, "run": str(other), "round": r, "stage": st}
                )
    body["workers"] = workers
    body["task"] = task
    body["run"] = str(run_dir)
    body["round"] = round_
    body["stage"] = stage if body["running"] else None
    body["last_document"] = last
    body["elapsed_s"] = round(now - started, 1) if started else None
    body["since_last_document_s"] = round(now - at, 1) if at else None
    body["attempt_id"] = current.name if current is not None else None
    body["last_actions"] = [clip(clean(a), 200) for a in actions]
    body["live"] = live
    body["spent"] = history
    if wire is not None:
        body["wire"] = wire
    return body


def text(status: Status) -> str:
    """``lk status`` for a person."""
    if status.get("task") is None:
        return "no loop has run here yet\n"
    state = "running" if status["running"] else "not running"
    lines = [f"{status['task']}: {state} (pid {status.get('pid') or '-'})"]
    if status.get("stage"):
        where = f"stage {status['stage']}"
    elif status.get("last_document"):
        where = f"ended after {status['last_document']}"  # no stage runs: the run is over
    else:
        where = "no stage ran"
    lines.append(
        f"  round {status['round']}, {where}, {_dur(status.get('elapsed_s'))} since the start"
    )
    spent = status.get("spent") or {}
    live = status.get("live") or {}
    if spent or live:
        cost = (spent.get("cost_usd") or 0) + (live.get("cost_usd") or 0)
        tokens = (live.get("input_tokens") or 0) + (live.get("output_tokens") or 0)
        lines.append(
            f"  spent: {spent.get('attempts', 0)} finished attempt(s), ${cost:.2f}"
            + (f", {tokens / 1000:.1f}k tokens in this run" if tokens else "")
        )
    wire = status.get("wire")
    if wire:
        seen = ", ".join(
            f"{n}×{code}" for code, n in sorted(wire["statuses"].items()) if code != "200"
        )
        lines.append(
            f"  wire (meter): {wire['requests']} request(s), {wire['transient']} transient, "
            f"{wire['refused']} refused" + (f" ({seen})" if seen else "")
        )
    for a in status.get("last_actions") or []:
        lines.append(f"  > {a}")
    workers = status.get("workers") or []
    if len(workers) > 1:
        lines.append(f"  {len(workers)} workers side by side:")
        for w in workers:
            lines.append(f"    {w['task']}: round {w['round']}, stage {w['stage'] or '?'}")
    return "\n".join(lines) + "\n"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
