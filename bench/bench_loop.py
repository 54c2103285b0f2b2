"""loopkit's own cost for one attempt through recipes/loop.sh, on 10,000 files (or more).

The worker appends one line to one file and the only check is ``true``, so what is left
is the supervisor: admission, lk-invoke (sandbox included), lk-diff, lk-verify (clean room
at the repository's path in the checks' sandbox, base results included), lk-decide, the
commit of the verified tree. The naive ratchet
does the same work with nothing checked: ``edit; true; git add -A; git commit``.

overhead = loop.sh - naive, printed beside the floor every click command pays to start
(a bare click command printing its help) and the sandbox's own start-up.

Targets: overhead <= 5x the click floor (the first step: <= 10x); the attempt <= 2x the
naive ratchet, paired run for run; <= 12 git processes an attempt. Each timed run starts
from the same commit of the cached repository; medians of paired runs. The git processes
are counted in one more round of each, through a ``git`` on PATH that writes a line per
start and hands over to the real one (the timed rounds run without it): the second of two
attempts, chained on the first one's landing as a loop's attempts are.

Paired against another loopkit (``LOOPKIT_BENCH_AGAINST``: the source tree of an earlier
commit, e.g. ``git archive a69f713 | tar -x -C DIR``): each round runs its loop.sh too,
its ``lk`` steps loading that tree's package (``PYTHONPATH``), and the figures say both,
their paired ratio, and each one's git processes. The memory of one attempt: the peak of
the sum of the resident sets of its whole process tree (sampled every 10 ms from /proc,
in a round of its own after the timed ones).

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
import threading
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


AGAINST = os.environ.get("LOOPKIT_BENCH_AGAINST", "")
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int:
    """The bytes resident in ``pid`` and every process below it, now."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [
                    int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()
                ]
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return total


def timed(argv: list[str], cwd: Path, env: dict[str, str], peak: list[int] | None = None) -> float:
    """Seconds ``argv`` took; with ``peak``, its process tree's largest resident total."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            assert peak is not None
            peak[0] = max(peak[0], tree_rss(child.pid))

    watcher = threading.Thread(target=sample, daemon=True) if peak is not None else None
    if watcher is not None:
        watcher.start()
    _, err = child.communicate()
    took = time.perf_counter() - start
    stop.set()
    if watcher is not None:
        watcher.join()
    if child.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({child.returncode}): {err[-800:]}")
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
    theirs: list[float] = []  # the loop of LOOPKIT_BENCH_AGAINST
    against: list[float] = []  # this loop / that loop, paired
    counts: dict[str, int] = {}
    stages: list[list[dict[str, object]]] = []
    counts_by: dict[str, str] = {}
    peaks: dict[str, int] = {}
    kinds = ("loop", "naive", "against") if AGAINST else ("loop", "naive")
    print(f"load average before: {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env["LOOPKIT_CLEANROOM"] = str(Path(tmp) / "rooms")
        log = counting_git(Path(tmp))
        counted = {**env, "PATH": f"{tmp}{os.pathsep}{env['PATH']}"}

        def one(
            kind: str,
            n: int,
            env: dict[str, str],
            *,
            record: bool = False,
            peak: list[int] | None = None,
            chained: bool = False,
        ) -> float:
            if not chained:  # else on what the last attempt landed, as in a loop
                git(repo, "reset", "-q", "--hard", start)
                git(repo, "clean", "-fdxq", "-e", ".loopkit")
                shutil.rmtree(repo / ".loopkit", ignore_errors=True)
            if kind in ("loop", "against"):
                recipes = RECIPES if kind == "loop" else Path(AGAINST) / "recipes"
                if kind == "against":  # its own package, its own clean rooms
                    env = {**env, "PYTHONPATH": AGAINST,
                           "LOOPKIT_CLEANROOM": env["LOOPKIT_CLEANROOM"] + "-against"}  # fmt: skip
                argv = [str(recipes / "loop.sh"), "--fast", "--contract", "loop.yaml"]
                took = timed([*argv, "--task-id", f"t{n}", "--task", "edit"], repo, env, peak)
                if record and kind == "loop":
                    stages.append(timings(repo))
                return took
            return timed(["sh", "-c", naive], repo, {**env, "TASK": f"t{n}"})

        for n in range(RUNS + 1):
            took = {kind: one(kind, n, env, record=bool(n)) for kind in kinds}
            if n:
                loops.append(took["loop"])
                naives.append(took["naive"])
                pairs.append(took["loop"] / took["naive"])
                if AGAINST:
                    theirs.append(took["against"])
                    against.append(took["loop"] / took["against"])
            # The denominator: three samples a round (a lone one swung the ratio by 20 %).
            floors += [timed(floor_argv, repo, env) for _ in range(3)]
        for kind in kinds:
            one(kind, RUNS + 1, env)  # the first attempt of two; its landing the second's start
            log.unlink(missing_ok=True)
            one(kind, RUNS + 2, counted, chained=True)
            counts[kind] = len(log.read_text().splitlines()) if log.exists() else 0
            if kind != "naive" and log.exists():
                tally: dict[str, int] = {}
                for line in log.read_text().splitlines():
                    word = subcommand(line.split())
                    tally[word] = tally.get(word, 0) + 1
                counts_by[kind] = ", ".join(f"{k} {v}" for k, v in sorted(tally.items()))
        for kind in kinds:
            if kind != "naive" and RUNS:
                peak = [0]
                one(kind, RUNS + 3, env, peak=peak)
                peaks[kind] = peak[0]
        git(repo, "reset", "-q", "--hard", start)
    print(f"load average after: {load()}")
    if not pairs:  # RUNS 0: the git processes counted, nothing timed
        print(
            f"git processes: {counts['loop']} an attempt ({counts_by['loop']}); the naive "
            f"ratchet {counts['naive']}"
        )
        if AGAINST:
            print(f"against {AGAINST}: {counts['against']} ({counts_by['against']})")
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
        f"git processes: {counts['loop']} an attempt ({counts_by['loop']}); the naive ratchet "
        f"{counts['naive']} (target <= {GIT_TARGET})"
    )
    print(f"memory: one attempt's process tree at most {peaks['loop'] / 2**20:.0f} MiB resident")
    if AGAINST:
        print(
            f"against {AGAINST}: its attempt {statistics.median(theirs) * 1000:.0f} ms; this "
            f"one = {statistics.median(against):.2f}x it (median of {len(against)} pairs, "
            f"{min(against):.2f}-{max(against):.2f}); its git processes {counts['against']} "
            f"({counts_by['against']}); its process tree at most "
            f"{peaks['against'] / 2**20:.0f} MiB"
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
