"""The ACP client's cost per question: a permission request or a file write, answered
from the contract's scope, round trip.

loopkit's ACP client (``python -m loopkit.worker.acp``) runs a small ACP agent
(tests/helpers/acp_agent.py) that asks N permissions for edits (half in scope, half out),
then makes N writes through ``fs/write_text_file`` (half refused), each waiting for its
answer before the next, as an agent does. The same agent with an empty plan is the
baseline (both processes' start-up, the handshake); what is left, divided by the number
of questions, is what one question costs: the agent's JSON, the pipe, the gate, the
write, and the stream line loopkit keeps. Measured as the CPU time of both processes
(steady on a shared machine; the wall time is printed beside it). Target: at most 1 ms a
question (an agent's own step -- a model call -- takes seconds), and both processes up,
through the handshake and one turn in at most 300 ms. Median of 5 rounds.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
AGENT = ROOT / "tests" / "helpers" / "acp_agent.py"
N = 1000
TARGET_QUESTION_MS = 1.0
TARGET_START_MS = 300.0
ROUNDS = 5


def plan(repo: Path) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = []
    for i in range(N):
        where = "src" if i % 2 == 0 else "docs"
        steps.append(
            {"ask": {"title": f"Write {where}/m{i}.py", "kind": "edit",
                     "locations": [{"path": str(repo / where / f"m{i}.py")}]}}
        )  # fmt: skip
    for i in range(N):
        where = "src" if i % 2 == 0 else "docs"
        steps.append({"fs_write": {"path": str(repo / where / f"w{i}.py"), "content": "x = 1\n"}})
    return steps


def once(repo: Path, steps: list[dict[str, object]]) -> tuple[float, float]:
    config = repo.parent / "acp.json"
    plan_file = repo.parent / "plan.json"
    plan_file.write_text(json.dumps(steps))
    config.write_text(
        json.dumps(
            {
                "agent": [sys.executable, str(AGENT), f"@{plan_file}"],
                "cwd": str(repo),
                "prompt": "bench",
                "scope": {"writable": ["src/**"]},
            }
        )
    )
    env = {**os.environ, "LOOPKIT_ACP_CONFIG": str(config)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "loopkit.worker.acp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"the client failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "src").mkdir(parents=True)
        steps = plan(repo)
        base, full = [], []
        for _ in range(ROUNDS):
            base.append(once(repo, []))
            full.append(once(repo, steps))
        written = len(list((repo / "src").iterdir()))
        refused_on_disk = (repo / "docs").exists()
    start_ms = statistics.median(c for c, _ in base) * 1000
    question_ms = (
        (statistics.median(c for c, _ in full) - statistics.median(c for c, _ in base))
        * 1000
        / (2 * N)
    )
    wall_ms = (
        (statistics.median(w for _, w in full) - statistics.median(w for _, w in base))
        * 1000
        / (2 * N)
    )
    print(
        f"start, handshake, one turn: {start_ms:.0f} ms CPU, both processes (target <= {TARGET_START_MS:.0f})"
    )
    print(
        f"one question (permission or fs write), round trip: {question_ms * 1000:.0f} us CPU, both processes (target <= {TARGET_QUESTION_MS * 1000:.0f}); {wall_ms * 1000:.0f} us wall on this machine now"
    )
    print(
        f"{2 * N} questions: {N} allowed, {N} refused; files written in scope: {written}; out of scope on disk: {refused_on_disk}"
    )
    ok = start_ms <= TARGET_START_MS and question_ms <= TARGET_QUESTION_MS and not refused_on_disk
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
