"""lk eval's overhead per trial beside the agent's time.

A small suite (four tasks, two configurations of a scripted command agent that fixes its
task at once, two repeats: 16 trials) runs through `lk eval run`; each trial's wall time
is split into the agent's run (`run.duration_s`) and the rest: the worktree at the base,
the trial's contract, lk attempt's admission, lk-diff, lk-verify in the clean room and
lk-decide, and the worktree's removal. The agent here takes no time, the worst case for
the ratio; a real agent takes tens of seconds to minutes. Target: at most 3 s of overhead
per trial at the median -- 5 % of a 60 s agent turn (one attempt's own stages take about
a second on a busy 2-core machine). Also timed: naming every trial (the hashes of its
configuration, executable, contract and task), once per run. Exit 1 if missed.
Usage: python bench/bench_eval.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loopkit.eval.suite import load
from loopkit.eval.trials import Runner
from tests.helpers.evals import command_config, make_repo, write_suite

TARGET_S = 3.0


def calc_suite(root: Path) -> tuple[Path, dict[str, str]]:
    """The bench's suite in ``root`` (16 trials) and the environment to run it with."""
    names = ["add", "mul", "neg", "inc"]
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    os.environ.update(env)
    repo = make_repo(root, names)
    subprocess.run(["git", "branch", "-M", "main"], cwd=repo, check=True)
    suite = write_suite(
        root,
        repo,
        names,
        [command_config("a", fix=names), command_config("b", fix=names[:2])],
        repeats=2,
    )
    return suite, env


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        suite, env = calc_suite(root)
        lk = Path(sys.executable).parent / "lk"
        done = subprocess.run(
            [str(lk), "eval", "run", str(suite), "--json"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            print(done.stderr)
            return 1
        trials = [
            json.loads(x)
            for x in (root / ".loopkit/eval/calc/trials.jsonl").read_text().splitlines()
        ]
        runner = Runner(load(suite), root / ".loopkit/eval/calc")
        runner.prepare(clear=False)
        started = time.perf_counter()
        runner.trials()
        naming = time.perf_counter() - started
    wall = statistics.median(t["wall_s"] for t in trials)
    agent = statistics.median(t["agent_s"] for t in trials)
    over = statistics.median(t["overhead_s"] for t in trials)
    p90 = sorted(t["overhead_s"] for t in trials)[int(len(trials) * 0.9)]
    print(f"eval: {len(trials)} trials of a scripted agent")
    print(f"  trial wall time  median {wall:.2f} s")
    print(f"  agent's run      median {agent:.2f} s")
    print(f"  eval overhead    median {over:.2f} s   p90 {p90:.2f} s")
    print(f"  of a 60 s agent turn: {over / 60 * 100:.1f}% (target at most 5%)")
    print(f"  naming {len(trials)} trials (hashes, once per run): {naming * 1000:.0f} ms")
    ok = over <= TARGET_S
    print(
        f"  target: at most {TARGET_S:.0f} s of overhead per trial -- {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
