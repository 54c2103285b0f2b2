"""loopkit's own crash harness: faults at points spread over every git call of a real
phased run through recipes/phased-loop.sh, judged by outcomes only.

A trial builds a project (three tasks: ``alpha`` red then green, ``beta`` green, ``broken``
always crashing: a park), counts the git calls of an undisturbed run (the golden run, once
per harness), then runs the loop with one fault at one call (tests/helpers/faults.py:
kill -9, SIGTERM or SIGINT to the loop's process group, a full disk, refs that cannot be
written, a stale index.lock; and a kill -9 after which the task journal is torn in half
or emptied -- what a power loss can leave of a file -- its twin in git kept, or ``lost``
with it), and then the plain rerun with no flag. It holds when:

- no process of the loop outlived either run;
- the plain rerun finished the plan without a person: alpha and beta done, broken parked,
  the lock released, no journal left, the work tree clean;
- nothing unverified was committed: every task commit holds the tree its trailer names,
  a tree some complete decision's checks ran on, and the branch passes its checks;
- verified work is committed or saved under refs/loopkit/, never only on disk;
- no commit the branch had after the fault was lost;
- marks and commits agree: a task marked done has exactly one task commit, a parked
  one its park record and none;
- every admitted attempt was settled exactly once (decided or recorded interrupted);
- ``lk-decide --replay`` agrees with the ledger.

    python -m tests.crash.harness --trials 60 --seed 7      (make crash)
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.faults import Faults, group_left
from tests.helpers.recipes import RECIPES, Project, make_project, recipe_env

KINDS = ("kill9", "kill9", "term", "int", "disk", "roref", "lock", "torn", "empty")
#: kill -9, then the journal damaged: torn in half, emptied, or emptied with its twin gone
DAMAGE = ("torn", "empty", "lost")

CHECK = [{"name": "all-good", "run": 'for f in src/*.txt; do grep -qx good "$f" || exit 1; done',
          "timeout": 30}]  # fmt: skip

WORKER = """
calls = STATE / f"calls-{task}"
k = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(k))
Path("src").mkdir(exist_ok=True)
if task == "broken":
    Path("src/broken.txt").write_text("half\\n")
    sys.exit(4)
Path(f"src/{task}.txt").write_text("bad\\n" if task == "alpha" and k == 1 else "good\\n")
"""


def _plan(id_: str, text: str) -> str:
    return f"- [ ] {text} {{#{id_}}}\n  budget: 10 lines / 2 files\n  scope: src/{id_}.txt\n  end\n"


TASKS = "# Tasks\n\n" + _plan("alpha", "First") + _plan("beta", "Second") + _plan("broken", "Third")
ARGV = [str(RECIPES / "phased-loop.sh")]


def project(where: Path) -> Project:
    where.mkdir(parents=True, exist_ok=True)
    return make_project(where, WORKER, tasks=TASKS, checks=CHECK,
                        budgets={"attempts": 3, "same_failure": 1})  # fmt: skip


@dataclass
class Trial:
    seed: int
    point: int
    kind: str
    problems: list[str] = field(default_factory=list)
    call: str = ""
    damaged: bool = False

    @property
    def held(self) -> bool:
        return not self.problems


def golden(tmp: Path) -> int:
    """The number of git calls of an undisturbed run."""
    p = project(tmp / "golden")
    faults = Faults(tmp / "golden-faults")
    faults.disarm()
    done = faults.run(ARGV, cwd=p.root, env=recipe_env())
    if done.returncode not in (0, 1, 21):
        raise SystemExit(f"the undisturbed run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return faults.count()


def damage(p: Project, kind: str) -> bool:
    """Tear, empty or lose the task journal a kill left; False when there was none."""
    journal = p.root / ".git/loopkit/task.json"
    if kind not in DAMAGE or not journal.exists():
        return False
    text = journal.read_bytes()
    journal.write_bytes(text[: len(text) // 2] if kind == "torn" else b"")
    if kind == "lost":
        p.git("update-ref", "-d", "refs/worktree/loopkit/task-journal", check=False)
    return True


def run_trial(
    tmp: Path, seed: int, point: int, kind: str, *, match: str = "", after: bool = False
) -> Trial:
    trial = Trial(seed, point, kind)
    p = project(tmp / f"t{seed}-{point}-{kind}-{abs(hash(match)) % 1000}")
    faults = Faults(p.root.parent / "faults")
    faults.arm("kill9" if kind in DAMAGE else kind, at=point or None, match=match, after=after)
    first = faults.run(ARGV, cwd=p.root, env=recipe_env())
    trial.damaged = damage(p, kind)
    pgid = int((faults.dir / "pgid").read_text())
    calls = faults.calls()
    fired = faults.fired()
    trial.call = calls[fired - 1].split("\t", 1)[-1] if fired and fired <= len(calls) else "(none)"
    if group_left(pgid):
        trial.problems.append("a process outlived the faulted run")
    faults.disarm()
    branch_after_fault = _commits(p)
    rerun = faults.run(ARGV, cwd=p.root, env=recipe_env())
    if group_left(int((faults.dir / "pgid").read_text())):
        trial.problems.append("a process outlived the rerun")
    _judge(p, trial, rerun, branch_after_fault, first)
    return trial


def _commits(p: Project) -> list[str]:
    return p.git("rev-list", "HEAD", check=False).split()


def _judge(p: Project, t: Trial, rerun: Any, before: list[str], first: Any) -> None:
    bad = t.problems.append
    if rerun.returncode not in (0, 1, 21):  # 21: the broken task is parked
        bad(f"the plain rerun exited {rerun.returncode}: {rerun.stderr.strip().splitlines()[-1:]}")
    marks = {tid: p.task_line(tid)[:5] for tid in ("alpha", "beta", "broken")}
    if marks != {"alpha": "- [x]", "beta": "- [x]", "broken": "- [!]"}:
        bad(f"the plan is not finished: {marks}")
    if p.lock().exists() or (p.root / ".git/loopkit/task.json").exists():
        bad("the lock or the journal is left")
    if p.git("status", "--porcelain"):
        bad(f"the work tree is not clean: {p.git('status', '--porcelain').split()[:6]}")
    after = set(_commits(p))
    if not set(before) <= after:
        bad("a commit the branch had was lost")
    subjects = p.git("log", "--pretty=%s").splitlines()
    for tid in ("alpha", "beta"):
        n = sum(1 for s in subjects if s.startswith(f"loopkit: {tid}:"))
        if n != 1:
            bad(f"{tid} committed {n} times")
    if any(s.startswith("loopkit: broken:") for s in subjects):
        bad("the broken task was committed")
    if not any(
        s == "loopkit: park broken (failed)" or s.startswith("loopkit: park broken")
        for s in subjects
    ):
        bad("the park of broken is not committed")
    verified = _verified_trees(p)
    for line in p.git("log", "--format=%H %T %(trailers:key=Loopkit-Tree,valueonly)").splitlines():
        parts = line.split()
        if len(parts) == 3 and (parts[1] != parts[2] or parts[1] not in verified):
            bad(f"commit {parts[0][:12]} holds a tree no check ran on")
    kept = {p.git("rev-parse", f"{r}^{{tree}}").strip() for r in p.loopkit_refs()}
    committed = set(p.git("log", "--format=%T").split())
    for tree in verified:
        if tree not in kept and tree not in committed:
            bad(f"verified tree {tree[:12]} is neither committed nor saved")
    admitted = decided = 0
    for r in p.ledger():
        if r.get("type") == "admission" and (r.get("admission") or {}).get("admitted"):
            admitted += 1
        elif r.get("type") == "interrupted" or (r.get("type") != "admission" and r.get("decision")):
            decided += 1
    if admitted != decided:
        bad(f"{admitted} attempts admitted, {decided} settled")
    replay = subprocess.run(["lk-decide", "--replay", ".loopkit/ledger.jsonl"], cwd=p.root,
                            env=recipe_env(), capture_output=True, text=True)  # fmt: skip
    if replay.returncode != 0:
        bad("lk-decide --replay disagrees")
    if (
        "Traceback" in first.stderr + rerun.stderr
        or "internal error" in first.stderr + rerun.stderr
    ):
        bad("a traceback or an internal error was shown")


def _verified_trees(p: Project) -> set[str]:
    out = set()
    for doc in (p.root / ".loopkit" / "runs").glob("*/*/*-decide.json"):
        try:
            d = json.loads(doc.read_text().strip().splitlines()[-1])
        except (ValueError, IndexError):
            continue
        if (d.get("decision") or {}).get("outcome") == "complete" and (d.get("verify") or {}).get(
            "tree"
        ):
            out.add(d["verify"]["tree"])
    return out


def sample(tmp: Path, trials: int, seed: int) -> list[Trial]:
    total = golden(tmp)
    print(f"crash harness: the undisturbed run makes {total} git calls", flush=True)
    rng = random.Random(seed)
    # Points spread over the whole run: one per stretch of the calls, a random one in it.
    out = []
    for i in range(trials):
        lo = 1 + i * total // trials
        hi = max(lo, (i + 1) * total // trials)
        t = run_trial(tmp, seed, rng.randint(lo, hi), rng.choice(KINDS))
        print(
            f"  {'held' if t.held else 'FAILED'}: {t.kind} at call {t.point} ({t.call[:70]})"
            + ("" if t.held else f": {'; '.join(t.problems)}"),
            flush=True,
        )
        out.append(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="loopkit's crash harness")
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopkit-crash-") as tmp:
        results = sample(Path(tmp), a.trials, a.seed)
    held = sum(t.held for t in results)
    print(f"crash harness: {held}/{len(results)} trials held (seed {a.seed})")
    return 0 if held == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
