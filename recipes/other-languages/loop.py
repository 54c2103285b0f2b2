#!/usr/bin/env python3
"""loop.py -- the ratchet for one task in Python, on loopkit's published surface only:
the commands, their exit codes and their JSON documents. Nothing of loopkit is imported
and git is never called: the lock, the saves, the commit and the park are `lk task` steps.

    python3 loop.py --contract loop.yaml --task-id fix-value --task "Make value good"
    lk-plan next TASKS.md --contract loop.yaml > next.json && python3 loop.py --tasks TASKS.md next.json

lk task begin   the work tree's lock; whatever a stopped loop left is finished first
lk attempt      one round: admission, the worker, diff, checks [, judge], the decision
  0 complete    lk task land (40 when the branch moved: nothing committed), marked done
  10/11         lk task save; the decided document (its feedback) feeds the next round
  20/21/22      lk task park: saved, reverted, RESET_PATHS reset, retrospective, parked
  30            lk task cancel: saved, the tree left as it is
lk task end     the lock released (a task still open is kept for the next begin)
Exit codes: those of loop.sh (0, 20, 21, 22, 30, 40 not landed, 41 runaway, 4 setup).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} loop.py: {msg}", file=sys.stderr)


def lk(*args: str, input: str | None = None) -> tuple[int, dict | None, str]:
    """One loopkit command: its exit code, its last JSON line, its stdout."""
    try:
        done = subprocess.run(["lk", *args], input=input, stdout=subprocess.PIPE, text=True)
    except OSError as e:
        log(f"lk: {e}")
        sys.exit(4)
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else None, done.stdout


class Loop:
    def __init__(self) -> None:
        self.owner = str(os.getpid())
        self.begun = False

    def finish(self, code: int) -> None:
        if self.begun:
            self.begun = False
            lk("task", "end", "--owner", self.owner)
        sys.exit(code)

    def must(self, *args: str) -> dict:
        code, doc, _ = lk(*args)
        if code != 0 or doc is None:
            self.finish(code or 70)
        return doc  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("start", nargs="?", help="the start document (lk-plan next's)")
    ap.add_argument("--contract")
    ap.add_argument("--tasks")
    ap.add_argument("--task-id")
    ap.add_argument("--task")
    ap.add_argument("--goal", action="store_true")
    ap.add_argument("--allow-dirty", action="store_true")
    ap.add_argument("--reset-path", action="append", default=[])
    ap.add_argument("--max-rounds", type=int, default=50)
    a = ap.parse_args()
    contract = ["--contract", os.path.abspath(a.contract)] if a.contract else []
    begin = [*([a.start] if a.start else []), *contract]
    for flag, value in (("--tasks", a.tasks), ("--task-id", a.task_id), ("--task", a.task)):
        begin += [flag, value] if value else []
    begin += ["--goal"] * a.goal + ["--allow-dirty"] * a.allow_dirty
    if a.reset_path:  # the clean room reads them too
        os.environ["RESET_PATHS"] = " ".join([os.environ.get("RESET_PATHS", ""), *a.reset_path])

    loop = Loop()
    code, task, _ = lk("task", "begin", *begin, "--owner", loop.owner)
    if code != 0 or task is None:
        sys.exit(code or 70)
    loop.begun = True
    if "finished" in task:  # the stopped loop's task, finished by begin
        loop.finish(task["finished"])
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: (log("interrupted: the rerun finishes the task"), loop.finish(130)))
    log(f"task {task['task']}: starting at {task['base'][:12]}; documents in {task['run_dir']}")
    text, session = Path(task["start"]).read_text(), ""
    for round_ in range(1, a.max_rounds + 1):
        keep = os.path.join(task["run_dir"], str(round_))
        args = ["attempt", "--keep", keep, *contract, "--base", task["diff_base"]]
        if session and os.environ.get("LK_RESUME") != "never":
            args += ["--resume", session]
        code, doc, out = lk(*args, input=text)
        files = [f for f in (f"{keep}-decide.json", f"{keep}-admit.json") if os.path.exists(f) and os.path.getsize(f)]
        if code not in (0, 10, 11, 20, 21, 22, 30) or doc is None or not files:
            log(f"lk attempt failed with exit {code}; see {task['run_dir']}")
            loop.finish(code or 70)
        decision = doc.get("decision") or {}
        label = str(decision.get("attempt") or round_)
        log(f"{task['task']} attempt {label}: {decision.get('outcome')} -- {(decision.get('reason') or '').splitlines()[0]}")
        if code == 0:
            landed = loop.must("task", "land", files[0], "--label", label, "--stat-cache")
            log(f"committed {task['task']} as {landed['commit'][:12]}")
            loop.finish(0)
        elif code in (10, 11):
            loop.must("task", "save", label, "--why", str(decision.get("outcome")))
            if (decision.get("backoff_s") or 0) > 0:
                time.sleep(decision["backoff_s"])
            session, text = (doc.get("run") or {}).get("session_id") or "", out
        elif code == 30:
            saved = loop.must("task", "cancel", files[0], "--label", label)
            log(f"{task['task']}: cancelled; the tree is left as it is (saved as {saved['ref']})")
            loop.finish(30)
        else:
            parked = loop.must("task", "park", files[0], "--label", label)
            log(f"parked {task['task']} ({decision.get('outcome')}); the attempt is saved as {parked['ref']}")
            loop.finish(code)
    lk("task", "save", "runaway", "--why", "runaway")
    log(f"{task['task']}: more than {a.max_rounds} rounds; stopped")
    loop.finish(41)


if __name__ == "__main__":
    main()
