"""Slices side by side, and the merge queue's cost per landing.

1. Throughput of recipes/parallel.sh at --jobs 1, 2 and 4 on agent-bound work: eight
   independent slices, each a ``command`` worker that waits like a model does
   (WORKER_S seconds) and then writes its own file; one check. Every slice goes through
   the queue (all but the first are rebuilt on the tip and verified there).
   Target: --jobs 4 >= 3.5x the slices per minute of --jobs 1.

2. One landing through ``lk queue land`` (an entry rebuilt on a tip that moved, verified
   there by lk-verify in the checks' sandbox, moved by compare-and-swap) beside what a
   person does without loopkit: ``git merge`` of the branch and the same check run once.
   The check uses the CPU, as a suite does: a fixed computation (``python3 -c``), sized
   once at the start to take about CHECK_S seconds of CPU here, the same command on both
   sides. The pairs run interleaved (which side goes first alternates), LANDINGS of them:
   the medians, the ratio of the medians and the spread of the pairs' ratios, loopkit's own
   seconds per landing in wall time (the queue's minus the plain one's) and in CPU time
   (user and system seconds of the lander's processes, the check in the sandbox's PID
   namespace not among them: steadier than the wall clock on a shared machine), and the
   load average before and after. Target: <= 1.1x (wall).
"""

from __future__ import annotations

import json
import os
import resource
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
LANDINGS = int(os.environ.get("LOOPKIT_BENCH_LANDINGS", "5"))
#: The check's loop: ``sum`` over ``range(n)`` of ``i * i``, in the interpreter itself.
SUITE = "{python} -c 'sum(i * i for i in range({n}))' && test -f src/base.txt"


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
    # An installed package has its bytecode cached: the first run writes it (with
    # PYTHONDONTWRITEBYTECODE set, every lk start would compile loopkit again, ~100 ms).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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


def cpu_check() -> str:
    """The check both sides run: a computation sized here to take about CHECK_S seconds of
    CPU (the median of three probes' CPU seconds, scaled: the machine's load at the start
    does not size it), the same work on every run after."""
    # The interpreter itself, not the venv's link to it: the checks' sandbox sees /usr.
    python = os.path.realpath(sys.executable)
    probe = 4_000_000
    took = []
    for _ in range(3):
        with Took() as one:
            subprocess.run(["sh", "-c", SUITE.format(python=python, n=probe)], check=False)
        took.append(one.cpu)
    n = max(1, round(probe * CHECK_S / statistics.median(took)))
    return SUITE.format(python=python, n=n)


def landing(check: str) -> tuple[list[Took], list[Took]]:
    """Seconds of one ``lk queue land`` (rebuild, verify, land) and of ``git merge`` plus
    the check, pair by pair, on the same change and the same moved tip."""
    queue_s: list[Took] = []
    plain_s: list[Took] = []
    for i in range(LANDINGS):
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
            # A queue that has landed before: its room (worktree) is there, as it is for
            # every landing but a repository's first; that first one is landed unmeasured.
            _queue(root, repo, env, "warm", base, moved, "src/warm.txt")
            moved = _git(repo, env, "rev-parse", "HEAD")
            # Through the queue: the attempt's document (as lk attempt leaves it) queued.
            _queue(root, repo, env, "s1", base, tree, None)

            # Which side goes first alternates, pair by pair.
            if i % 2:
                queue_s.append(_queued(repo, env, moved))
                plain_s.append(_plain(repo, env, change, moved, check))
            else:
                plain_s.append(_plain(repo, env, change, moved, check))
                queue_s.append(_queued(repo, env, moved))
            q, p = queue_s[-1], plain_s[-1]
            print(
                f"  pair {i + 1}: lk queue land {q.wall:.2f}s, git merge + the suite "
                f"{p.wall:.2f}s ({q.wall / p.wall:.3f}x); CPU: loopkit's own {_own(q, p):.2f}s, "
                f"the plain side's {p.cpu:.2f}s",
                flush=True,
            )
    return queue_s, plain_s


class Took:
    """One side's run: wall seconds, and the CPU seconds of its processes (user + system,
    every process it waited for: steadier than the wall clock on a shared machine)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        #: The check ran in the sandbox (its CPU seconds are not in ``cpu``).
        self.sandboxed = False

    def __enter__(self) -> Took:
        self._wall, self._cpu = time.perf_counter(), _children_cpu()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = _children_cpu() - self._cpu


def _own(queue: Took, plain: Took) -> float:
    """loopkit's own CPU seconds in a landing: the lander's processes (the check, in the
    sandbox, not among them), or without the sandbox, less the plain side's check."""
    return queue.cpu if queue.sandboxed else queue.cpu - plain.cpu


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _plain(repo: Path, env: dict[str, str], change: str, tip: str, check: str) -> Took:
    """Without loopkit: merge ``change``, then run the suite once; the branch back at ``tip``."""
    with Took() as took:
        _git(repo, env, "merge", "-q", "--no-edit", change)
        subprocess.run(["sh", "-c", check], cwd=repo, env=env, check=True)
    _git(repo, env, "reset", "-q", "--hard", tip)
    return took


def _queued(repo: Path, env: dict[str, str], tip: str) -> Took:
    """``lk queue land`` of the one queued entry (verified there); the branch back at ``tip``.
    Its CPU seconds are the lander's own: a check in the sandbox runs in a PID namespace
    of its own, whose processes the lander's do not count (``sandboxed``)."""
    with Took() as took:
        done = subprocess.run(
            ["lk", "queue", "land"], cwd=repo, env=env, capture_output=True, text=True
        )
    if done.returncode != 0:
        raise SystemExit(f"lk queue land exited {done.returncode}: {done.stderr[-800:]}")
    landed = json.loads(done.stdout.strip().splitlines()[-1])["landed"][-1]
    assert landed["verification"] == "ran", done.stdout
    record = repo / ".git/loopkit/queue/verified"
    (kept,) = [json.loads(f.read_text()) for f in record.glob(f"{landed['tree']}-*.json")]
    took.sandboxed = bool((kept.get("sandbox") or {}).get("used"))
    _git(repo, env, "reset", "-q", "--hard", tip)
    return took


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


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _landing() -> bool:
    before = _load()
    check = cpu_check()
    print(f"the check: {check} (about {CHECK_S:g}s of CPU here); load average {before}")
    queue_s, plain_s = landing(check)
    queue = statistics.median(q.wall for q in queue_s)
    plain = statistics.median(p.wall for p in plain_s)
    ratios = sorted(q.wall / p.wall for q, p in zip(queue_s, plain_s, strict=True))
    own = sorted(q.wall - p.wall for q, p in zip(queue_s, plain_s, strict=True))
    cpu = sorted(_own(q, p) for q, p in zip(queue_s, plain_s, strict=True))
    plain_cpu = statistics.median(p.cpu for p in plain_s)
    ratio = queue / plain
    ok = ratio <= LANDING_TARGET
    print(
        f"one landing: lk queue land {queue:.2f}s, git merge + the suite {plain:.2f}s "
        f"(medians of {len(ratios)} pairs): {ratio:.3f}x (pairs {ratios[0]:.3f}-"
        f"{ratios[-1]:.3f}x), loopkit's own {statistics.median(own):.2f}s a landing "
        f"({own[0]:.2f} to {own[-1]:.2f}s); load average {before} before, {_load()} after "
        f"(target <= {LANDING_TARGET}x) {'met' if ok else 'MISSED'}\n"
        f"  CPU: loopkit's own {statistics.median(cpu):.2f}s a landing ({cpu[0]:.2f} to "
        f"{cpu[-1]:.2f}s) beside the plain side's {plain_cpu:.2f}s: "
        f"{(plain_cpu + statistics.median(cpu)) / plain_cpu:.3f}x; the checks in the sandbox: "
        f"{'yes' if all(q.sandboxed for q in queue_s) else 'NO'}"
    )
    return not ok


if __name__ == "__main__":
    sys.exit(main())
