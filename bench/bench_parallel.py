"""Slices side by side, and the merge queue's cost per landing.

1. Throughput of recipes/parallel.sh at --jobs 1, 2 and 4 on agent-bound work: eight
   independent slices, each a ``command`` worker that waits like a model does
   (WORKER_S seconds) and then writes its own file; one check. Every slice goes through
   the queue (all but the first are rebuilt on the tip and verified there).
   Target: --jobs 4 >= 3.5x the slices per minute of --jobs 1.

2. One landing through ``lk queue land`` (an entry rebuilt on a tip that moved, verified
   there by lk-verify in the checks' sandbox, moved by compare-and-swap) beside what a
   person does without loopkit: ``git merge`` of the branch and the same check run once.
   The check is a suite that takes CHECK_S seconds. Target: <= 1.1x; loopkit's own
   seconds per landing are printed too.
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

BIN = Path(sys.executable).parent
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
SLICES = 8
WORKER_S = float(os.environ.get("LOOPKIT_BENCH_WORKER_S", "10"))
CHECK_S = float(os.environ.get("LOOPKIT_BENCH_CHECK_S", "10"))
THROUGHPUT_TARGET, LANDING_TARGET = 3.5, 1.1
LANDINGS = 3


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        LOOPKIT_VALIDATE_OUTPUT="0",
    )
    env.pop("LOOPKIT_STATE_DIR", None)
    return env


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _project(root: Path, env: dict[str, str], *, check: str, worker: str) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    _git(repo, env, "init", "-q", "-b", "main")
    (repo / "src").mkdir()
    (repo / "src/base.txt").write_text("base\n")
    contract = {
        "version": 1,
        "objective": "Each slice adds its own file.",
        "scope": {"writable": ["src/**"]},
        "criteria": [{"name": "suite", "run": check, "timeout": 600}],
        "budgets": {"attempts": 3},
        "worker": {"provider": "command", "command": worker, "timeout": 600},
    }
    (repo / "loop.yaml").write_text(json.dumps(contract, indent=1) + "\n")
    tasks = "".join(
        f"- [ ] slice {i} {{#s{i}}}\n  budget: 1 lines / 1 files\n  scope: src/s{i}.txt\n  end\n"
        for i in range(1, SLICES + 1)
    )
    (repo / "TASKS.md").write_text(tasks)
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "initial")
    return repo


def throughput(jobs: int) -> float:
    """Seconds of parallel.sh --jobs JOBS over SLICES slices."""
    with tempfile.TemporaryDirectory(prefix="lk-bench-par-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        env = _env(root / "home")
        worker = f'sleep {WORKER_S}; printf "%s\\n" "$LOOPKIT_TASK_ID" > "src/$LOOPKIT_TASK_ID.txt"'
        repo = _project(root, env, check="test -f src/base.txt", worker=worker)
        env["LK_WORKTREES"] = str(root / "wts")
        start = time.perf_counter()
        done = subprocess.run(
            [str(RECIPES / "parallel.sh"), "--jobs", str(jobs)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        took = time.perf_counter() - start
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-3000:])
            raise SystemExit(f"parallel.sh --jobs {jobs} exited {done.returncode}")
        landed = _git(repo, env, "log", "--format=%s").count("loopkit: mark ")
        assert landed == SLICES, landed
        return took


def landing() -> tuple[float, float]:
    """Median seconds of one ``lk queue land`` (rebuild, verify, land) and of ``git merge``
    plus the check, on the same change and the same moved tip."""
    check = f"sleep {CHECK_S}; test -f src/base.txt"
    queue_s, plain_s = [], []
    for _ in range(LANDINGS):
        with tempfile.TemporaryDirectory(prefix="lk-bench-land-") as tmp:
            root = Path(tmp)
            (root / "home").mkdir()
            env = _env(root / "home")
            repo = _project(root, env, check=check, worker="true")
            base = _git(repo, env, "rev-parse", "HEAD")
            # The change to land: one file, on a branch from base.
            _git(repo, env, "checkout", "-q", "-b", "slice")
            (repo / "src/s1.txt").write_text("s1\n")
            _git(repo, env, "add", "-A")
            _git(repo, env, "commit", "-q", "-m", "slice")
            change = _git(repo, env, "rev-parse", "HEAD")
            tree = _git(repo, env, "rev-parse", "HEAD^{tree}")
            # The tip moved since: another file landed on main.
            _git(repo, env, "checkout", "-q", "main")
            (repo / "src/other.txt").write_text("other\n")
            _git(repo, env, "add", "-A")
            _git(repo, env, "commit", "-q", "-m", "other")
            moved = _git(repo, env, "rev-parse", "HEAD")

            # Without loopkit: merge, then run the suite once.
            start = time.perf_counter()
            _git(repo, env, "merge", "-q", "--no-edit", change)
            subprocess.run(["sh", "-c", check], cwd=repo, env=env, check=True)
            plain_s.append(time.perf_counter() - start)
            _git(repo, env, "reset", "-q", "--hard", moved)

            # Through the queue: the attempt's document (as lk attempt leaves it) queued.
            # A queue that has landed before: its room (worktree) is there, as it is for
            # every landing but a repository's first; that first one is landed unmeasured.
            _queue(root, repo, env, "warm", base, moved, "src/warm.txt")
            moved = _git(repo, env, "rev-parse", "HEAD")
            _queue(root, repo, env, "s1", base, tree, None)
            start = time.perf_counter()
            done = subprocess.run(
                ["lk", "queue", "land"], cwd=repo, env=env, capture_output=True, text=True
            )
            queue_s.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"lk queue land exited {done.returncode}: {done.stderr[-800:]}")
            assert '"verification":"ran"' in done.stdout, done.stdout
    return statistics.median(queue_s), statistics.median(plain_s)


def _queue(
    root: Path, repo: Path, env: dict[str, str], task: str, base: str, tree: str, add: str | None
) -> None:
    """Queue ``tree`` (or, with ``add``, ``base`` plus that file) as a complete attempt at
    ``task``; with ``add``, land it at once (unmeasured)."""
    if add is not None:
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=repo, env=env, input=f"{task}\n", capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        index = root / f"{task}.index"
        ienv = {**env, "GIT_INDEX_FILE": str(index)}
        _git(repo, ienv, "read-tree", base)
        _git(repo, ienv, "update-index", "--add", "--cacheinfo", f"100644,{blob},{add}")
        tree = _git(repo, ienv, "write-tree")
    doc = root / f"{task}.json"
    doc.write_text(
        json.dumps(
            {
                "kind": "loopkit/attempt",
                "version": 1,
                "task": {"id": task, "text": task, "kind": "task"},
                "run": {"base": base},
                "verify": {"tree": tree, "passed": True, "checks": []},
                "decision": {"outcome": "complete", "reason": "bench", "attempt": 1},
            }
        )
    )
    subprocess.run(
        ["lk", "queue", "add", str(doc)], cwd=repo, env=env, check=True, capture_output=True
    )
    if add is not None:
        subprocess.run(["lk", "queue", "land"], cwd=repo, env=env, check=True, capture_output=True)


def main() -> int:
    if shutil.which("git") is None:
        print("git is not installed: skipped")
        return 0
    missed = False
    parts = sys.argv[1:] or ["throughput", "landing"]
    if "throughput" in parts:
        missed |= _throughput()
    if "landing" in parts:
        missed |= _landing()
    return 1 if missed else 0


def _throughput() -> bool:
    missed = False
    secs = {jobs: throughput(jobs) for jobs in (1, 2, 4)}
    for jobs, took in secs.items():
        per_min = SLICES / took * 60
        print(
            f"parallel.sh --jobs {jobs}: {SLICES} slices in {took:.1f}s "
            f"({per_min:.1f} slices/min, {secs[1] / took:.2f}x --jobs 1)"
        )
    ratio = secs[1] / secs[4]
    ok = ratio >= THROUGHPUT_TARGET
    missed |= not ok
    print(
        f"  --jobs 4 / --jobs 1: {ratio:.2f}x (target >= {THROUGHPUT_TARGET}x; worker "
        f"{WORKER_S:.0f}s a slice) {'met' if ok else 'MISSED'}"
    )
    return missed


def _landing() -> bool:
    missed = False
    queue, plain = landing()
    ratio = queue / plain
    ok = ratio <= LANDING_TARGET
    missed |= not ok
    print(
        f"one landing: lk queue land {queue:.2f}s, git merge + the suite {plain:.2f}s "
        f"(suite {CHECK_S:.0f}s): {ratio:.3f}x, loopkit's own {queue - plain:.2f}s "
        f"(target <= {LANDING_TARGET}x) {'met' if ok else 'MISSED'}"
    )
    return missed


if __name__ == "__main__":
    sys.exit(main())
