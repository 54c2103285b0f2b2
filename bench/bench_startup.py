"""Start-up cost of lk-plan against the bare interpreter of the same venv.

Measures wall time of `python -c pass`, the click floor (a bare click command printing its
help), `lk-plan --help` and `lk-plan next TASKS.md --contract loop.yaml` (on
examples/parser-project), interleaved over many rounds, and prints the medians and their
ratios. Targets: --help <= 1.25x the click floor, next <= 8x `python -c pass`. Exit 1 if
missed.

Two clocks per run: wall time (what a user waits; the targets are judged on it) and the
CPU time (user + sys) of the child, printed as a cross-check. On a quiet machine they
agree; on a busy one both inflate and the ratios wobble, so the load average is printed
too, and so is the ratio of a bare `import click` -- the floor under any --help.

Bytecode is compiled first (`compileall`), as an installed wheel would have it, so the
figures measure imports rather than compiling (PYTHONDONTWRITEBYTECODE would otherwise
make every run recompile). Usage: python bench/bench_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "parser-project"
#: figure -> (the command, what it is measured against, the target ratio)
TARGETS = {
    "--help": ("lk-plan --help", "click floor", 1.25),
    "next": ("lk-plan next", "python -c pass", 8.0),
}
HEAVY = ("jsonschema", "git", "referencing")  # must not load at start-up of `next`

sys.path.insert(0, str(HERE.parent))
from bench.floor import CLICK_FLOOR  # noqa: E402


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) for one run of ``cmd``."""
    start = time.perf_counter()
    child = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = 0  # reaped by wait4
    return wall, usage.ru_utime + usage.ru_stime


def heavy_imports(cmd: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    """Top-level packages from HEAVY that `cmd` imports (python -X importtime)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd[1:]] if cmd[0] == sys.executable else
        [sys.executable, "-X", "importtime", *cmd],
        env=env, cwd=cwd, capture_output=True, text=True,
    ).stderr  # fmt: skip
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.splitlines() if "|" in line
    }
    return sorted(n for n in HEAVY if n in names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()

    python = sys.executable
    bindir = Path(python).parent
    lk_plan = shutil.which("lk-plan", path=str(bindir))
    if lk_plan is None:
        print(f"lk-plan is not installed in {bindir} (run make install)", file=sys.stderr)
        return 1
    import loopkit

    compileall.compile_dir(str(Path(loopkit.__file__).parent), quiet=1)

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPKIT_")}
    with tempfile.TemporaryDirectory(prefix="lk-bench-") as tmp:
        work = Path(tmp)
        for name in ("loop.yaml", "TASKS.md"):
            shutil.copy(EXAMPLE / name, work / name)
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "import click": [python, "-c", "import click"],
            "click floor": CLICK_FLOOR,  # the floor for any --help
            "lk-plan --help": [lk_plan, "--help"],
            "lk-plan next": [lk_plan, "next", "TASKS.md", "--contract", "loop.yaml"],
        }
        check = subprocess.run(commands["lk-plan next"], env=env, cwd=work, capture_output=True)
        if check.returncode != 0:
            print(f"lk-plan next failed: {check.stderr.decode()}", file=sys.stderr)
            return 1
        for cmd in commands.values():  # warm the page cache
            for _ in range(3):
                timed(cmd, env, work)
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                wall_s, cpu_s = timed(cmd, env, work)
                walls[name].append(wall_s)
                cpus[name].append(cpu_s)
        heavy = heavy_imports(
            [python, lk_plan, "next", "TASKS.md", "--contract", "loop.yaml"], env, work
        )

    wall = {k: statistics.median(v) * 1000 for k, v in walls.items()}
    cpu = {k: statistics.median(v) * 1000 for k, v in cpus.items()}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"rounds: {args.rounds} (interleaved), medians; load {load:.1f} on {os.cpu_count()} cores"
    )
    print(f"  {'':<16} {'wall':>9} {'cpu':>9}")
    for name in commands:
        print(f"  {name:<16} {wall[name]:6.1f} ms {cpu[name]:6.1f} ms")
    missed = []
    for key, (name, against, target) in TARGETS.items():
        by_wall = wall[name] / wall[against]
        by_cpu = cpu[name] / cpu[against]
        ok = by_wall <= target
        print(
            f"  ratio {key:<7} wall {by_wall:5.2f}x  cpu {by_cpu:5.2f}x  of {against}"
            f"  (target <= {target:g}x)  {'ok' if ok else 'MISSED'}"
        )
        if not ok:
            missed.append(key)
    floor = cpu["import click"] / cpu["python -c pass"]
    floor_wall = wall["import click"] / wall["python -c pass"]
    print(f"  (for scale: importing click alone is {floor_wall:.2f}x wall, {floor:.2f}x cpu)")
    print(f"  heavy imports at start-up of next: {', '.join(heavy) if heavy else 'none'}")
    if heavy:
        missed.append("heavy imports")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
