"""Where an attempt's time goes: each stage's wall time and the git processes it ran.

Each stage command, as it adds its section to the attempt document (``document.attach``),
appends its entry to the document's ``timings``: the stage, its seconds since it began
(``begin``: ``lk attempt`` calls it as each stage starts; a stage run as a command of its
own counts from the moment loopkit was imported), and the git processes it started
(``proc.capture`` tells ``git_ran`` of each: how many, and the sum of their wall times --
git calls on threads overlap, so the sum may pass the stage's own time). lk-invoke's entry
adds the worker's own time, lk-verify's each check's. lk-decide's entry goes into the
ledger record it writes (``timings``), so ``lk report`` and ``lk show`` read them from the
ledger. ``LOOPKIT_TIMINGS=1`` also says each entry on stderr as the stage ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from loopkit.sections import Attempt, JSONObject, Timing

#: Set to 1 to have each stage say its timing on stderr as it ends.
SWITCH_ENV = "LOOPKIT_TIMINGS"
#: The stage that adds each section of the attempt document.
STAGE_OF = {
    "run": "invoke",
    "diff": "diff",
    "verify": "verify",
    "judge": "judge",
    "decision": "decide",
}

_lock = threading.Lock()
_began = time.perf_counter()
_git_processes = 0
_git_s = 0.0


def begin() -> None:
    """A stage begins: its clock and its git tally start from zero."""
    global _began, _git_processes, _git_s
    with _lock:
        _began = time.perf_counter()
        _git_processes, _git_s = 0, 0.0


def git_ran(seconds: float) -> None:
    """One git process ended after ``seconds`` (``proc.capture``)."""
    global _git_processes, _git_s
    with _lock:
        _git_processes += 1
        _git_s += seconds


def git_processes() -> int:
    """git processes started since the stage began."""
    return _git_processes


def entry(section: str, body: Mapping[str, Any]) -> Timing:
    """The timing entry of the stage that adds ``section`` with ``body``, taken now."""
    with _lock:
        took, count, git_s = time.perf_counter() - _began, _git_processes, _git_s
    out: Timing = {
        "stage": STAGE_OF.get(section, section),
        "s": round(took, 4),
        "git": {"processes": count, "s": round(git_s, 4)},
    }
    if section == "run" and isinstance(body.get("duration_s"), (int, float)):
        out["worker_s"] = body["duration_s"]
    elif section == "verify":
        checks = body.get("checks")
        if isinstance(checks, list):
            times: list[Any] = [
                {"name": c.get("name"), "s": c.get("duration_s")}
                for c in checks
                if isinstance(c, dict) and isinstance(c.get("duration_s"), (int, float))
            ]
            out["checks"] = times
    if os.environ.get(SWITCH_ENV) == "1":
        sys.stderr.write(f"{line(out)}\n")
    return out


def add(document: Attempt | JSONObject, section: str, body: Mapping[str, Any]) -> None:
    """Append the stage's entry to the document's ``timings`` (the stages so far)."""
    kept = document.get("timings")
    # The worker's run is an attempt's first timed stage: whatever came before is not its.
    entries = list(kept) if isinstance(kept, list) and section != "run" else []
    entries.append(entry(section, body))
    document["timings"] = entries


def line(e: Mapping[str, Any]) -> str:
    """One entry for a person: ``lk-diff: 0.142 s (git: 4 processes, 0.101 s)``."""
    git = e.get("git") or {}
    text = f"lk-{e.get('stage')}: {e.get('s', 0):.3f} s"
    text += f" (git: {git.get('processes', 0)} processes, {git.get('s', 0):.3f} s)"
    if "worker_s" in e:
        text += f"; the worker {e['worker_s']:.3f} s"
    for c in e.get("checks") or ():
        text += f"; check {c.get('name')} {c.get('s', 0):.3f} s"
    return text
