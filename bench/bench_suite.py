"""A real library's own test suite, red at the base, through recipes/phased-loop.sh --
beside the naive loop on the same attempts, paired.

The library is boltons (its source distribution from the package index, fetched once into
.cache/bench/; the figure is skipped, not failed, when it cannot be fetched): its own
519-test suite is the contract's one criterion, read per test from pytest's output. Four
bugs are injected in four modules, so the suite is red at the base; TASKS.md holds one
task per bug, each naming its test. The worker (the `command` provider, in the sandbox)
thinks for WORK_S seconds -- an agent's turn -- and then puts its task's line back.

The naive loop runs the same worker for each task, then the suite, `git add -A` and
`git commit`. The two runs alternate on fresh copies of the same repository, PAIRS times;
the figure is the median of the paired ratios (loopkit's wall time / the naive loop's).
Target: <= 1.15 -- the base's checks run beside the worker, off the critical path.

    python bench/bench_suite.py            # PAIRS=3 WORK_S=12 by default

WORK_S stands for an agent's turn. The base's checks run beside it: a turn shorter than
the suite (5 s on a quiet machine, 8-11 s at a load average of 10) leaves part of the base
run on the critical path.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = Path(sys.executable).parent
CACHE = REPO / ".cache" / "bench"
LIBRARY = "boltons==26.2.0"
TARGET = 1.15
PAIRS = int(os.environ.get("PAIRS", "3"))
WORK_S = float(os.environ.get("WORK_S", "12"))

#: task id -> (file, the right line, the injected bug, the test the task names)
BUGS = {
    "clamp": (
        "boltons/mathutils.py",
        "    return min(max(x, lower), upper)",
        "    return max(min(x, lower), upper)",
        "test_clamp_examples",
    ),
    "windowed": (
        "boltons/iterutils.py",
        "    return list(windowed_iter(src, size, fill=fill))",
        "    return list(windowed_iter(src, size + 1, fill=fill))",
        "test_windowed_filled",
    ),
    "bytes2human": (
        "boltons/strutils.py",
        "        if abs_bytes < next_size:",
        "        if abs_bytes <= next_size:",
        "test_bytes2human",
    ),
    "barrel": (
        "boltons/listutils.py",
        "        return sum([len(l) for l in self.lists])",
        "        return sum([len(l) for l in self.lists[1:]])",
        "test_barrel_list",
    ),
}

WORKER = """\
import os, time
from pathlib import Path
BUGS = {bugs!r}
task = os.environ.get("LOOPKIT_TASK_ID") or os.environ["TASK"]
time.sleep({work})
path, right, wrong, _ = BUGS[task]
p = Path(path)
p.write_text(p.read_text().replace(wrong, right, 1))
print(f"fixed {{task}} in {{path}}")
"""

NAIVE = """\
set -u
for task in {tasks}; do
    TASK=$task {python} {worker}
    PYTHONDONTWRITEBYTECODE=1 {suite} >/dev/null 2>&1
    git add -A && git commit -q -m "$task"
done
"""


def fetch() -> Path | None:
    """The library's unpacked source, fetched once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob("boltons-*.tar.gz"))
    if not found:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                LIBRARY,
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                str(CACHE),
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        found = sorted(CACHE.glob("boltons-*.tar.gz"))
        if done.returncode != 0 or not found:
            print(f"skipped: cannot fetch {LIBRARY}: {done.stderr.strip()[-300:]}")
            return None
    unpacked = CACHE / found[-1].name.removesuffix(".tar.gz")
    if not unpacked.is_dir():
        with tarfile.open(found[-1]) as tar:
            tar.extractall(CACHE, filter="data")
    return unpacked


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def template(src: Path, where: Path, suite: str, worker: Path) -> Path:
    """The repository both loops start from: the library, the bugs, the contract, the plan."""
    root = where / "template"
    root.mkdir()
    shutil.copytree(src / "boltons", root / "boltons")
    shutil.copytree(src / "tests", root / "tests")
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(root, "init", "-q", "-b", "main")
    for path, right, wrong, _ in BUGS.values():
        p = root / path
        text = p.read_text()
        assert text.count(right) == 1, (path, right)
        p.write_text(text.replace(right, wrong))
    contract = {
        "version": 1,
        "objective": "Fix the library's bugs, one task at a time.",
        "scope": {"writable": ["boltons/**"]},
        "criteria": [
            {"name": "suite", "run": suite, "timeout": 300, "env": {"PYTHONDONTWRITEBYTECODE": "1"}}
        ],
        "budgets": {"attempts": 3, "same_failure": 2},
        "worker": {"provider": "command", "command": f"{sys.executable} {worker}", "timeout": 300},
        # The worker script lives outside the repository: shown to the worker's sandbox.
        "sandbox": {"writable": [str(worker.parent)]},
    }
    (root / "loop.yaml").write_text(json.dumps(contract, indent=2) + "\n")
    plan = "".join(
        f"- [ ] Fix {task} so {test} passes {{#{task}}}\n"
        f"  budget: 5 lines / 1 files\n  scope: {path}\n  end\n"
        for task, (path, _, _, test) in BUGS.items()
    )
    (root / "TASKS.md").write_text("# Tasks\n\n" + plan)
    git(root, "add", "-A")
    git(
        root,
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@example.com",
        "commit",
        "-q",
        "-m",
        "boltons with four bugs",
    )
    return root


def env(home: Path) -> dict[str, str]:
    out = dict(os.environ)
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out.update(
        HOME=str(home),
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        LOOPKIT_VALIDATE_OUTPUT="0",
    )
    return out


def timed(cmd: list[str], root: Path, home: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(
        cmd,
        cwd=root,
        env=env(home),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=1800,
    )
    return time.monotonic() - start, done


def main() -> int:
    src = fetch()
    if src is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="lk-bench-suite-") as tmp:
        where = Path(tmp)
        suite = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
        (where / "worker").mkdir()
        worker = where / "worker" / "worker.py"
        worker.write_text(WORKER.format(bugs=BUGS, work=WORK_S))
        base = template(src, where, suite, worker)
        naive = where / "naive.sh"
        naive.write_text(
            NAIVE.format(tasks=" ".join(BUGS), python=sys.executable, worker=worker, suite=suite)
        )
        ratios, ours, theirs = [], [], []
        for i in range(PAIRS):
            runs = {}
            for name in ("loopkit", "naive") if i % 2 == 0 else ("naive", "loopkit"):
                root = where / f"{name}-{i}"
                subprocess.run(["git", "clone", "-q", str(base), str(root)], check=True)
                home = where / f"home-{name}-{i}"
                home.mkdir()
                if name == "loopkit":
                    cmd = ["bash", str(REPO / "recipes" / "phased-loop.sh")]
                else:
                    cmd = ["bash", str(naive)]
                runs[name], done = timed(cmd, root, home)
                if name == "loopkit":
                    lines = (root / "TASKS.md").read_text()
                    if done.returncode != 0 or lines.count("- [x]") != len(BUGS):
                        print(f"loopkit's run did not finish every task (exit {done.returncode}):")
                        print(done.stderr[-3000:])
                        return 1
            ours.append(runs["loopkit"])
            theirs.append(runs["naive"])
            ratios.append(runs["loopkit"] / runs["naive"])
            print(
                f"pair {i + 1}: phased-loop.sh {runs['loopkit']:.1f} s, naive loop "
                f"{runs['naive']:.1f} s: {ratios[-1]:.2f}x",
                flush=True,
            )
    ratio = statistics.median(ratios)
    print(
        f"{LIBRARY.split('==')[0]}'s own suite (red at the base), {len(BUGS)} tasks, worker "
        f"{WORK_S:g} s each: phased-loop.sh {statistics.median(ours):.1f} s, the naive loop "
        f"{statistics.median(theirs):.1f} s; median paired ratio {ratio:.2f}x "
        f"(best {min(ratios):.2f}x; target <= {TARGET}x)"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
