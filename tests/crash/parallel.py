"""The crash harness over recipes/parallel.sh and its merge queue: faults at git calls of
a real run of two slices side by side (each landed through ``lk queue``) -- kill -9,
SIGTERM, SIGINT, a full disk, refs that cannot be written -- then the plain rerun, judged
by outcomes only (tests/crash/harness.py does the same for a phased run).

The project: ``add-c`` and ``add-d`` write disjoint files, green at their first attempt;
``--jobs 2``: both start from the same tip, so the second to land is rebuilt on the
first (a 3-way merge) and verified there. A trial holds when, after the plain rerun:

- no process of either run is left, the rerun exits 0;
- both tasks are marked done on the branch, each landed once: no commit repeats its
  parent's tree (no empty commit);
- no slice's worker was paid again for work that was queued or landed when the run
  stopped (its worker calls after the rerun are those it had);
- the checkout follows the branch (no change against HEAD), no lock and no lander journal
  are left, every queue entry is landed.

    python -m tests.crash.parallel --trials 20 --seed 7
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.faults import Faults, group_left
from tests.helpers.recipes import RECIPES, Project, make_project, recipe_env

KINDS = ("kill9", "kill9", "term", "int", "disk", "roref")
WORKER = """
calls = STATE / f"calls-{task}"
calls.write_text(str(int(calls.read_text()) + 1 if calls.exists() else 1))
Path("src").mkdir(exist_ok=True)
Path(f"src/{task[-1]}.txt").write_text(task + "\\n")
"""
CHECK = [{"name": "files", "run": "test -s src/a.txt", "timeout": 30}]
TASKS = "".join(
    f"- [ ] add {t[-1]} {{#{t}}}\n  budget: 1 lines / 1 files\n  scope: src/{t[-1]}.txt\n  end\n"
    for t in ("add-c", "add-d")
)


def argv(p: Project) -> list[str]:
    return [str(RECIPES / "parallel.sh"), "--jobs", "2"]


def project(where: Path) -> Project:
    where.mkdir(parents=True, exist_ok=True)
    return make_project(where, WORKER, tasks=TASKS, checks=CHECK, files={"src/a.txt": "a\n"})


def env(p: Project) -> dict[str, str]:
    return recipe_env({"LK_WORKTREES": str(p.root.parent / "wts")})


@dataclass
class Trial:
    kind: str
    point: int
    match: str = ""
    after: bool = False
    problems: list[str] = field(default_factory=list)
    call: str = ""

    @property
    def held(self) -> bool:
        return not self.problems


def calls(p: Project) -> dict[str, int]:
    return {t: int(c.read_text()) if (c := p.scratch / f"calls-{t}").exists() else 0
            for t in ("add-c", "add-d")}  # fmt: skip


def entries(p: Project) -> dict[str, str]:
    """Each queued task's status (the last entry for it)."""
    out = {}
    for e in sorted((p.root / ".git/loopkit/queue/entries").glob("*.json")):
        d = json.loads(e.read_text())
        out[d["task"]] = d["status"]
    return out


def golden(tmp: Path) -> tuple[int, list[str]]:
    p = project(tmp / "golden")
    faults = Faults(tmp / "golden-faults")
    faults.disarm()
    done = faults.run(argv(p), cwd=p.root, env=env(p))
    if done.returncode != 0:
        raise SystemExit(f"the undisturbed run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return faults.count(), faults.calls()


def run_trial(tmp: Path, t: Trial) -> Trial:
    p = project(tmp / f"t{t.point}-{t.kind}-{abs(hash(t.match)) % 10000}-{int(t.after)}")
    faults = Faults(p.root.parent / "faults")
    faults.arm(t.kind, at=t.point or None, match=t.match, after=t.after)
    first = faults.run(argv(p), cwd=p.root, env=env(p))
    fired = faults.fired()
    made = faults.calls()
    t.call = made[fired - 1].split("\t", 1)[-1] if fired and fired <= len(made) else "(none)"
    if group_left(int((faults.dir / "pgid").read_text())):
        t.problems.append("a process outlived the faulted run")
    faults.disarm()
    paid = calls(p)
    kept = {task for task, status in entries(p).items() if status in ("queued", "landed")}
    rerun = faults.run(argv(p), cwd=p.root, env=env(p))
    if group_left(int((faults.dir / "pgid").read_text())):
        t.problems.append("a process outlived the rerun")
    bad = t.problems.append
    if rerun.returncode != 0:
        bad(f"the plain rerun exited {rerun.returncode}: {rerun.stderr.strip().splitlines()[-2:]}")
    for task in ("add-c", "add-d"):
        if not p.task_line(task).startswith("- [x]"):
            bad(f"{task} is not marked done")
        if task in kept and calls(p)[task] != paid[task]:
            bad(f"{task}'s worker was paid again for work that was {entries(p).get(task)}")
    subjects = p.git("log", "--format=%s", "main").splitlines()
    for task in ("add-c", "add-d"):
        n = sum(1 for s in subjects if s.startswith(f"loopkit: {task}:"))
        if n != 1:
            bad(f"{task} landed {n} times")
    for line in p.git("log", "--format=%T %P", "main").splitlines():
        tree, *parents = line.split()
        if len(parents) == 1 and p.git("rev-parse", f"{parents[0]}^{{tree}}").strip() == tree:
            bad("an empty commit is on the branch")
            break
    if p.git("status", "--porcelain", "--untracked-files=no"):
        bad(
            f"the checkout does not follow the branch: {p.git('status', '--porcelain').split()[:6]}"
        )
    queue = p.root / ".git/loopkit/queue"
    if p.lock().exists() or (queue / "loop.lock").exists() or (queue / "lander.json").exists():
        bad("a lock or the lander's journal is left")
    if any(s != "landed" for s in entries(p).values()):
        bad(f"a queue entry is not landed: {entries(p)}")
    if "Traceback" in first.stderr + rerun.stderr:
        bad("a traceback was shown")
    return t


def sample(tmp: Path, trials: int, seed: int) -> list[Trial]:
    total, _ = golden(tmp)
    print(f"parallel crash harness: the undisturbed run makes {total} git calls", flush=True)
    rng = random.Random(seed)
    out = []
    for i in range(trials):
        lo = 1 + i * total // trials
        hi = max(lo, (i + 1) * total // trials)
        t = run_trial(tmp, Trial(rng.choice(KINDS), rng.randint(lo, hi), after=rng.random() < 0.5))
        print(f"  {'held' if t.held else 'FAILED'}: {t.kind} {'after' if t.after else 'at'} "
              f"call {t.point} ({t.call[:70]})" + ("" if t.held else f": {'; '.join(t.problems)}"),
              flush=True)  # fmt: skip
        out.append(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="loopkit's crash harness over parallel.sh")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--show-calls", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopkit-crash-parallel-") as tmp:
        if a.show_calls:
            print("\n".join(golden(Path(tmp))[1]))
            return 0
        results = sample(Path(tmp), a.trials, a.seed)
    held = sum(t.held for t in results)
    print(f"parallel crash harness: {held}/{len(results)} trials held (seed {a.seed})")
    return 0 if held == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
