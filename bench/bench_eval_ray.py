"""lk eval run --ray's cost beside --jobs: what fanning the trials out on Ray adds.

One suite (four tasks, two configurations of a scripted command agent that fixes its task
at once, two repeats: 16 trials) runs with `--jobs 2` here, then with `--ray` on a
cluster of two nodes of one CPU each (real node processes on 127.0.0.1, started by this
bench: tests/helpers/ray_cluster.py), so both run two trials at once. Printed: each
run's wall time, the Ray run's extra time per trial (connecting, shipping the runner,
each task's dispatch, a worker process per node), and each try's own overhead at the
median (the tree, lk attempt's stages: measured inside the try, the same on both). The
agent takes no time, the worst case for the ratio. Target: at most 3 s more per trial
on Ray -- 5 % of a 60 s agent turn. Exit 1 if missed. Needs the extra loopkit-agents[ray].
Usage: python bench/bench_eval_ray.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_eval import calc_suite

from tests.helpers import ray_cluster

TARGET_S = 3.0


def _run(lk: Path, suite: Path, root: Path, env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(lk), "eval", "run", str(suite), "--no-validate", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return time.perf_counter() - started


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        suite, env = calc_suite(root)
        lk = Path(sys.executable).parent / "lk"
        here = _run(lk, suite, root, env, "--jobs", "2", "--state", str(root / "here"))
        with ray_cluster.cluster() as address:
            there = _run(lk, suite, root, env, "--ray", address, "--state", str(root / "there"))
        lines = {
            where: [json.loads(x) for x in (root / where / "trials.jsonl").read_text().splitlines()]
            for where in ("here", "there")
        }
    n = len(lines["here"])
    extra = (there - here) / n
    print(f"eval --ray: {n} trials of a scripted agent, two at once both ways")
    print(f"  --jobs 2 here           {here:.1f} s")
    print(f"  --ray, two 1-CPU nodes  {there:.1f} s")
    for where in ("here", "there"):
        over = statistics.median(t["overhead_s"] for t in lines[where])
        print(f"  a try's own overhead ({where}) median {over:.2f} s")
    print(f"  Ray's extra per trial   {extra:.2f} s ({extra / 60 * 100:.1f}% of a 60 s turn)")
    ok = extra <= TARGET_S
    print(f"  target: at most {TARGET_S:.0f} s more per trial -- {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
