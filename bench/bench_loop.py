"""loopkit's own cost for one attempt through recipes/loop.sh, on 10,000 files (or more).

The worker appends one line to one file and the only check is ``true``, so what is left
is the supervisor: admission, lk-invoke (sandbox included), lk-diff, lk-verify (clean room
at the repository's path in the checks' sandbox, base results included), lk-decide, the
commit of the verified tree. The naive ratchet
does the same work with nothing checked: ``edit; true; git add -A; git commit``.

overhead = loop.sh - naive, printed beside the floor every click command pays to start
(a bare click command printing its help) and the sandbox's own start-up.

Targets: overhead <= 5x the click floor (the first step: <= 10x); the attempt <= 2x the
naive ratchet, paired run for run; <= 12 git processes an attempt. Each run starts from the
same commit of the cached repository; medians of paired runs. The git processes are counted
in one more round of each, through a ``git`` on PATH that writes a line per start and
hands over to the real one (the timed rounds run without it).

    python bench/bench_loop.py [FILES [RUNS]]    # 10000 9; 100000 files: 1,000 folders;
                                                 # RUNS 0: only count git's processes
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
FILES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
PER_DIR = 100
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 9
TARGET, FIRST_STEP = 5.0, 10.0
NAIVE_TARGET, GIT_TARGET = 2.0, 12
CACHE = (
    Path(os.environ.get("LOOPKIT_BENCH_CACHE", "/tmp/loopkit-bench-cache"))
    / f"loop-{VERSION}{'' if FILES == 10_000 else f'-{FILES}'}"
)
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


def counting_git(folder: Path) -> Path:
    """A ``git`` that notes each start (its arguments, a line) in ``folder/starts``."""
    real = shutil.which("git")
    assert real, "no git on PATH"
    log = folder / "starts"
    wrapper = folder / "git"
    # One write a start (two could interleave with a git started beside it).
    note = f"line=$(printf '%s ' \"$@\" | tr '\\n' ' '); printf '%s\\n' \"$line\" >> {log}"
    wrapper.write_text(f'#!/bin/sh\n{note}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return log


def subcommand(argv: list[str]) -> str:
    """git's subcommand in its arguments (``-c``'s and ``-C``'s values skipped)."""
    words = iter(argv)
    for word in words:
        if word in ("-c", "-C"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return "?"


def timings(repo: Path) -> list[dict[str, object]]:
    """The stage timings of the attempt the loop just recorded (its ledger record's)."""
    lines = (repo / ".loopkit" / "ledger.jsonl").read_text().splitlines()
    last = [json.loads(x) for x in lines if '"type":"attempt"' in x.replace(" ", "")]
    return list(last[-1].get("timings") or []) if last else []


def stage_medians(stages: list[list[dict[str, object]]]) -> str:
    """``diff 120 ms (git 5), ...``: each stage's median over the timed attempts."""
    by: dict[str, list[float]] = {}
    git: dict[str, list[float]] = {}
    for entries in stages:
        for e in entries:
            name = str(e.get("stage"))
            by.setdefault(name, []).append(float(e["s"]))  # type: ignore[arg-type]
            git.setdefault(name, []).append(float(e["git"]["processes"]))  # type: ignore[index]
            if "worker_s" in e:
                by.setdefault("(worker)", []).append(float(e["worker_s"]))  # type: ignore[arg-type]
    return ", ".join(
        f"{k} {statistics.median(v) * 1000:.0f} ms"
        + (f" (git {statistics.median(git[k]):g})" if k in git else "")
        for k, v in by.items()
    )


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
    loops, naives, floors, pairs = [], [], [], []
    counts: dict[str, int] = {}
    stages: list[list[dict[str, object]]] = []
    counts_by = ""
    print(f"load average before: {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env["LOOPKIT_CLEANROOM"] = str(Path(tmp) / "rooms")
        log = counting_git(Path(tmp))
        counted = {**env, "PATH": f"{tmp}{os.pathsep}{env['PATH']}"}

        def one(kind: str, n: int, env: dict[str, str], *, record: bool = False) -> float:
            git(repo, "reset", "-q", "--hard", start)
            git(repo, "clean", "-fdxq", "-e", ".loopkit")
            shutil.rmtree(repo / ".loopkit", ignore_errors=True)
            if kind == "loop":
                argv = [str(RECIPES / "loop.sh"), "--fast", "--contract", "loop.yaml"]
                took = timed([*argv, "--task-id", f"t{n}", "--task", "edit"], repo, env)
                if record:
                    stages.append(timings(repo))
                return took
            return timed(["sh", "-c", naive], repo, {**env, "TASK": f"t{n}"})

        for n in range(RUNS + 1):
            took = {kind: one(kind, n, env, record=bool(n)) for kind in ("loop", "naive")}
            if n:
                loops.append(took["loop"])
                naives.append(took["naive"])
                pairs.append(took["loop"] / took["naive"])
            # The denominator: three samples a round (a lone one swung the ratio by 20 %).
            floors += [timed(floor_argv, repo, env) for _ in range(3)]
        for kind in ("loop", "naive"):
            log.unlink(missing_ok=True)
            one(kind, RUNS + 1, counted)
            counts[kind] = len(log.read_text().splitlines()) if log.exists() else 0
            if kind == "loop" and log.exists():
                tally: dict[str, int] = {}
                for line in log.read_text().splitlines():
                    word = subcommand(line.split())
                    tally[word] = tally.get(word, 0) + 1
                counts_by = ", ".join(f"{k} {v}" for k, v in sorted(tally.items()))
        git(repo, "reset", "-q", "--hard", start)
    print(f"load average after: {load()}")
    if not pairs:  # RUNS 0: the git processes counted, nothing timed
        print(
            f"git processes: {counts['loop']} an attempt ({counts_by}); the naive ratchet {counts['naive']}"
        )
        return 0
    loop, bare, floor = (statistics.median(x) for x in (loops, naives, floors))
    paired = statistics.median(pairs)
    overhead = loop - bare
    ratio = overhead / floor
    print(
        f"one attempt through loop.sh on {FILES} files: {loop * 1000:.0f} ms; naive ratchet "
        f"{bare * 1000:.0f} ms; overhead {overhead * 1000:.0f} ms"
    )
    print(
        f"paired: the attempt = {paired:.2f}x the naive ratchet (median of {len(pairs)} pairs, "
        f"{min(pairs):.2f}-{max(pairs):.2f}; target <= {NAIVE_TARGET:g}x)"
    )
    if any(stages):
        print(
            f"where an attempt's time goes (medians, the ledger's timings): {stage_medians(stages)}"
        )
    print(
        f"git processes: {counts['loop']} an attempt ({counts_by}); the naive ratchet "
        f"{counts['naive']} (target <= {GIT_TARGET})"
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
