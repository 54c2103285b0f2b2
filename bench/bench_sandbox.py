"""Start-up cost of the worker's sandbox: `bwrap ... true` beside a bare `true`.

The sandboxed command line is the one ``loopkit.boundary.sandbox.wrap`` builds for a real
repository (with a state folder and a writable extra), so every mount is counted. Runs
are interleaved; the medians and their difference are printed. Target: the sandbox adds
at most 50 ms per attempt (an agent CLI itself takes about a second to start). Exit 1 if
missed; exit 0 with a note when no sandbox can start here.
Usage: python bench/bench_sandbox.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopkit.boundary import sandbox

TARGET_MS = 50.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup(rounds: int) -> tuple[float, float] | None:
    """(bare, sandboxed) median milliseconds of `true`; None when no sandbox can start."""
    available, _ = sandbox.probe()
    if not available:
        return None
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        extra = Path(tmp) / "config"
        extra.mkdir()
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        argv, boxed_env = sandbox.wrap(
            [true],
            root=repo,
            git_dir=repo / ".git",
            state_dir=repo / ".loopkit",
            writable_extra=[extra],
            env=env,
        )
        bare: list[float] = []
        boxed: list[float] = []
        timed([true], env)
        timed(argv, boxed_env)  # warm the page cache for both
        for _ in range(rounds):
            bare.append(timed([true], env))
            boxed.append(timed(argv, boxed_env))
    return statistics.median(bare) * 1000, statistics.median(boxed) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    found = startup(rounds)
    if found is None:
        print(f"no sandbox here ({sandbox.probe()[1]}): nothing to measure")
        return 0
    b, s = found
    print(f"bare true        median {b:7.2f} ms  (n={rounds})")
    print(f"sandboxed true   median {s:7.2f} ms  ({sandbox.binary()})")
    print(f"sandbox adds            {s - b:7.2f} ms  target <= {TARGET_MS:g} ms")
    return 0 if s - b <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
