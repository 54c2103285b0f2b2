"""The lander stopped by kill -9 between its steps (at a git call of its run, before it or
right after it) and then the plain rerun: the queue ends as an undisturbed run ends it.

One project holds three queued entries (set-a lands as it is, set-b is red on top of it
and is returned, add-c is rebuilt on the tip and verified there). Each trial restores that
queued state, kills the lander's whole process group at one git call, reruns ``lk queue
land`` with no flag, and holds the outcome to the undisturbed run's: the same trees and
subjects on main (nothing landed twice, nothing red landed), the same entry statuses, the
checkout at the tip, no lock held, no journal left, no process left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_queue import SUM, TASKS, WORKER
from tests.helpers.faults import Faults, group_left
from tests.helpers.queue import attempt, lk
from tests.helpers.recipes import make_project, recipe_env

pytestmark = [pytest.mark.slow, pytest.mark.longest]

STEPS = (
    "commit-tree",
    "update-ref",
    "read-tree",
    "merge-tree",
    "rev-parse --verify -q HEAD",  # the clean room's HEAD read: the verification begins
    "hash-object",
    "update-index",
    "clean",
)


def _state(root: Path) -> dict[str, object]:
    def g(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    entries = sorted((root / ".git/loopkit/queue/entries").glob("*.json"))
    return {
        "trees": g("log", "--format=%T %s", "main").splitlines(),
        "statuses": [json.loads(p.read_text())["status"] for p in entries],
        "checkout": g("status", "--porcelain", "--untracked-files=no"),
        "files": (root / "src/a.txt").read_text() + (root / "src/b.txt").read_text(),
        "journal": (root / ".git/loopkit/queue/lander.json").exists(),
        "lock": (root / ".git/loopkit/queue/loop.lock").exists(),
    }


def test_kill9_of_the_lander_at_any_step_is_finished_by_the_plain_rerun(tmp_path: Path) -> None:
    p = make_project(
        tmp_path, WORKER, files={"src/a.txt": "1\n", "src/b.txt": "1\n"}, tasks=TASKS, checks=[SUM]
    )
    base = p.head()
    for task in ("set-a", "set-b", "add-c"):
        done = lk(p, "queue", "add", str(attempt(p, task, base=base)), "--tasks", "TASKS.md")
        assert done.returncode == 0, done.stderr
    queued = tmp_path / "queued"
    shutil.copytree(p.root, queued, symlinks=True)

    def restore() -> None:
        shutil.rmtree(p.root)
        shutil.copytree(queued, p.root, symlinks=True)

    faults = Faults(tmp_path / "faults")
    env = recipe_env()
    argv = ["lk", "queue", "land"]
    faults.disarm()
    golden_run = faults.run(argv, cwd=p.root, env=env)
    assert golden_run.returncode == 1, golden_run.stderr  # set-b returned
    golden = _state(p.root)
    calls = faults.count()
    assert golden["statuses"] == ["landed", "returned", "landed"] and calls > 10

    # The lander's own steps: the moves of the branch and of the checkout, killed before
    # they run and right after (done, not yet recorded), for every entry; and the first
    # call of every other kind that writes (a commit, an object, the clean room's files
    # and index). LOOPKIT_CRASH_ALL=1: every call, before and after.
    every = os.environ.get("LOOPKIT_CRASH_ALL") == "1"
    trials, seen = [], set()
    for line in faults.calls():
        number, _, argv_text = line.partition("\t")
        if not number.isdigit():
            continue  # the rest of a commit message that spans lines
        point = int(number)
        words = [w for w in argv_text.split()[:3] if not re.fullmatch("[0-9a-f]{40}", w)]
        kind = " ".join(words[:2])
        if every or argv_text.startswith(("update-ref -m", "read-tree -u")):
            trials += [(point, False), (point, True)]
        elif argv_text.startswith(STEPS) and kind not in seen:
            seen.add(kind)
            trials.append((point, False))
    assert len(trials) >= 12, faults.calls()

    failures = []
    for point, after in trials:
        restore()
        faults.arm("kill9", at=point, after=after)
        stopped = faults.run(argv, cwd=p.root, env=env)
        faults.disarm()
        left = group_left(int((faults.dir / "pgid").read_text()))
        rerun = faults.run(argv, cwd=p.root, env=env)
        state = _state(p.root)
        if left or rerun.returncode not in (0, 1) or state != golden:
            failures.append(
                f"kill -9 {'after' if after else 'before'} call {point} "
                f"(stopped {stopped.returncode}, rerun {rerun.returncode}: "
                f"{rerun.stderr.strip()[-300:]}): {state} != {golden}; left {left}"
            )
    assert not failures, "\n".join(failures[:5])
