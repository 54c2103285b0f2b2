"""loopkit's own cost for one attempt through recipes/loop.sh, on a 10,000-file repository.

The worker appends one line to one file and the only check is ``true``, so what is left
is the supervisor: admission, lk-invoke (sandbox included), lk-diff, lk-verify (clean room
at the repository's path in the checks' sandbox, base results included), lk-decide, the
commit of the verified tree. The naive ratchet
does the same work with nothing checked: ``edit; true; git add -A; git commit``.

overhead = loop.sh - naive, printed beside the floor every click command pays to start
(a bare click command printing its help) and the sandbox's own start-up.

Target: overhead <= 5x the click floor (the first step: <= 10x). Each run starts from the
same commit of the cached repository; medians of paired runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_diff import GIT_ENV as ENV
from bench.bench_diff import git
from bench.bench_sandbox import startup as sandbox_startup
from bench.floor import CLICK_FLOOR

VERSION = "v2"
FILES = 10_000
PER_DIR = 100
RUNS = 9
TARGET, FIRST_STEP = 5.0, 10.0
CACHE = Path(os.environ.get("LOOPKIT_BENCH_CACHE", "/tmp/loopkit-bench-cache")) / f"loop-{VERSION}"
BIN = Path(sys.executable).parent
RECIPES = Path(__file__).resolve().parents[1] / "recipes"


def build() -> Path:
    repo = CACHE / "repo"
    if (CACHE / "ready").exists():
        return repo
    shutil.rmtree(CACHE, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for i in range(FILES):
        p = repo / f"pkg{i // PER_DIR:03d}" / f"mod_{i % PER_DIR:03d}.py"
        p.parent.mkdir(exist_ok=True)
        p.write_text(f"value_{i} = {i}\n")
    # Inline (/tmp is private in the sandbox); a line of its own each run, as each attempt
    # of a real loop brings a tree of its own (the clean room never holds it already).
    worker = "echo \"edit = '$LOOPKIT_TASK_ID'\" >> pkg000/mod_000.py"
    (repo / "loop.yaml").write_text(
        json.dumps(
            {
                "version": 1,
                "objective": "bench",
                "scope": {"writable": ["pkg000/**"]},
                "criteria": [{"name": "t", "run": "true", "timeout": 60}],
                "budgets": {"attempts": 3},
                "worker": {"provider": "command", "command": worker, "timeout": 60},
            }
        )
    )
    (repo / ".gitignore").write_text("*.pyc\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "generated")
    (CACHE / "ready").write_text(VERSION)
    return repo


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-800:]}")
    return took


def main() -> int:
    repo = build()
    start = git(repo, "rev-parse", "HEAD").strip()
    env = {**os.environ, **ENV, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LOOPKIT_VALIDATE_OUTPUT", None)
    # An installed package has its bytecode cached: the warm-up round writes it (with
    # PYTHONDONTWRITEBYTECODE set, every run would compile loopkit again, ~100 ms).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    naive = "set -e; echo \"edit = '$TASK'\" >> pkg000/mod_000.py; true; git add -A; git commit -q -m naive"
    floor_argv = CLICK_FLOOR
    loops, naives, floors = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env["LOOPKIT_CLEANROOM"] = str(Path(tmp) / "rooms")
        for n in range(RUNS + 1):
            for kind in ("loop", "naive"):
                git(repo, "reset", "-q", "--hard", start)
                git(repo, "clean", "-fdxq", "-e", ".loopkit")
                shutil.rmtree(repo / ".loopkit", ignore_errors=True)
                if kind == "loop":
                    took = timed(
                        [
                            str(RECIPES / "loop.sh"),
                            "--fast",
                            "--contract",
                            "loop.yaml",
                            "--task-id",
                            f"t{n}",
                            "--task",
                            "edit",
                        ],
                        repo,
                        env,
                    )
                    if n:
                        loops.append(took)
                else:
                    took = timed(["sh", "-c", naive], repo, {**env, "TASK": f"t{n}"})
                    if n:
                        naives.append(took)
            # The denominator: three samples a round (a lone one swung the ratio by 20 %).
            floors += [timed(floor_argv, repo, env) for _ in range(3)]
        git(repo, "reset", "-q", "--hard", start)
    loop, bare, floor = (statistics.median(x) for x in (loops, naives, floors))
    overhead = loop - bare
    ratio = overhead / floor
    print(
        f"one attempt through loop.sh on {FILES} files: {loop * 1000:.0f} ms; naive ratchet "
        f"{bare * 1000:.0f} ms; overhead {overhead * 1000:.0f} ms"
    )
    print(
        f"click floor {floor * 1000:.0f} ms; overhead = {ratio:.1f}x the floor "
        f"(target <= {TARGET:g}x, first step <= {FIRST_STEP:g}x)"
    )
    boxed = sandbox_startup(10)
    if boxed is None:
        print("(no sandbox can start here: the worker ran without one)")
    else:
        each = boxed[1] - boxed[0]
        print(
            f"(the sandbox's share: +{each:.1f} ms a start, two starts an attempt -- the worker "
            f"and its check -- so {2 * each:.1f} ms = {2 * each / (overhead * 1000):.0%} of the "
            "overhead)"
        )
    verdict = "ok" if ratio <= TARGET else ("first step ok" if ratio <= FIRST_STEP else "MISSED")
    print(f"verdict: {verdict}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
