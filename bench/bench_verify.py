"""lk-verify's overhead on a trivial check vs running it bare and vs `pre-commit run`.

Three ways to run the same trivial check (`true`) in a small repository:

- bare: `sh -c true`;
- lk-verify --contract loop.yaml (tree hashed before and after, log written, evidence JSON);
- pre-commit run of a local hook whose entry is the same check.

Overhead = time minus the bare run. Targets: lk-verify's overhead <= 0.6 of pre-commit's
(pre-commit costs about 150 ms on a quiet machine for a trivial local hook), and lk-verify
itself <= 1.5x the click floor (a bare click command printing its help). The figures
judged are CPU time (user + system of the command and the processes it waited for, median
of N): on a small, busy machine wall time mostly measures the scheduler. Wall-time best
and median are printed beside them.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.floor import CLICK_FLOOR

RUNS = 15
TARGET = 0.6
FLOOR_TARGET = 1.5
BIN = Path(sys.executable).parent
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
CONFIG = """\
repos:
  - repo: local
    hooks:
      - id: trivial
        name: trivial check
        entry: "true"
        language: system
        pass_filenames: false
        always_run: true
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the command and everything it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stdout[-400:]!r} {done.stderr[-400:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        env = dict(os.environ, **GIT_ENV)
        env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
        env["PRE_COMMIT_HOME"] = str(Path(tmp) / "pre-commit-home")
        env.pop("LOOPKIT_VALIDATE_OUTPUT", None)
        # An installed package has its bytecode cached; let the warm-up write it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)

        def git(*args: str) -> None:
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

        git("init", "-q", "-b", "main")
        for i in range(50):
            (repo / f"file_{i}.txt").write_text(f"content {i}\n")
        (repo / "loop.yaml").write_text(
            "version: 1\nobjective: bench\nscope: {writable: ['**']}\n"
            "criteria: [{name: trivial, run: 'true'}]\n"
        )
        (repo / ".pre-commit-config.yaml").write_text(CONFIG)
        git("add", "-A")
        git("commit", "-q", "-m", "bench")

        ways = {
            "bare": ["sh", "-c", "true"],
            "lk-verify": [str(BIN / "lk-verify"), "--contract", "loop.yaml"],
            "pre-commit run": [str(BIN / "pre-commit"), "run", "trivial"],
            "click floor": CLICK_FLOOR,
        }
        times: dict[str, list[float]] = {k: [] for k in ways}
        cpus: dict[str, list[float]] = {k: [] for k in ways}
        for argv in ways.values():  # warm-up (pre-commit initializes its home once)
            timed(argv, repo, env)
        for _ in range(RUNS):
            for name, argv in ways.items():
                wall, cpu = timed(argv, repo, env)
                times[name].append(wall)
                cpus[name].append(cpu)

    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpus.items()}
    for name in ways:
        print(
            f"{name:15s} wall best {best[name] * 1000:7.1f} ms  median {med[name] * 1000:7.1f} ms"
            f"   cpu median {cpu_med[name] * 1000:7.1f} ms"
        )
    lk_over = best["lk-verify"] - best["bare"]
    pc_over = best["pre-commit run"] - best["bare"]
    ratio = lk_over / pc_over
    med_ratio = (med["lk-verify"] - med["bare"]) / (med["pre-commit run"] - med["bare"])
    cpu_ratio = (cpu_med["lk-verify"] - cpu_med["bare"]) / (
        cpu_med["pre-commit run"] - cpu_med["bare"]
    )
    print(
        f"overhead (wall, best of {RUNS}): lk-verify {lk_over * 1000:.1f} ms, "
        f"pre-commit {pc_over * 1000:.1f} ms"
    )
    print(
        f"ratio lk-verify / pre-commit overhead: {ratio:.2f} wall best-of-{RUNS} "
        f"(wall median {med_ratio:.2f}, cpu median {cpu_ratio:.2f})  "
        f"target <= {TARGET}  {'MET' if cpu_ratio <= TARGET else 'MISSED'} (judged on cpu)"
    )
    floor_ratio = cpu_med["lk-verify"] / cpu_med["click floor"]
    floor_wall = med["lk-verify"] / med["click floor"]
    print(
        f"lk-verify / the click floor: {floor_ratio:.2f}x cpu median (wall median "
        f"{floor_wall:.2f}x)  target <= {FLOOR_TARGET}  "
        f"{'MET' if floor_ratio <= FLOOR_TARGET else 'MISSED'}"
    )
    return 0 if cpu_ratio <= TARGET and floor_ratio <= FLOOR_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
