"""Every recipe pipes the admitted document into lk-invoke: the worker runs on the share
admission granted it, not on worker.timeout."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.recipes import RECIPES, make_project, recipe_env

SLOW = """
import time
time.sleep(40)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


@pytest.mark.longest
@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["loop.sh", "worktree.sh", "loop.mk", "loop.mjs"])
def test_every_recipe_runs_the_worker_on_its_admitted_share(recipe: str, tmp_path: Path) -> None:
    # Admission grants a run only what the wall-clock budget leaves after the checks'
    # reserve; a recipe that pipes the document it had BEFORE admission into lk-invoke
    # lets the worker run to worker.timeout (60 s here) and blow the 12 s budget.
    p = make_project(
        tmp_path,
        SLOW,
        budgets={"wall_seconds": 12},
        checks=[{"name": "value", "run": "grep -qx good src/value.txt", "timeout": 5}],
    )
    task = ["--contract", "loop.yaml", "--task-id", "slow", "--task", "Make value good"]
    if recipe == "loop.mk":
        if shutil.which("make") is None:
            pytest.skip("GNU make is not installed")
        cmd = ["make", "-f", str(RECIPES / "loop.mk"), "loop", "CONTRACT=loop.yaml", "TASK_ID=slow"]
    elif recipe == "loop.mjs":
        if shutil.which("node") is None:
            pytest.skip("node is not installed")
        cmd = ["node", str(RECIPES / "other-languages" / "loop.mjs"), *task]
    else:
        cmd = [str(RECIPES / recipe), *task]
    start = time.monotonic()
    subprocess.run(
        cmd,
        cwd=p.root,
        env=recipe_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - start
    (first,) = sorted(p.state().glob("runs/slow/*/1-invoke.json"))
    run = json.loads(first.read_text())["run"]
    assert run["stop_reason"] == "timeout", run
    assert run["duration_s"] < 15 and elapsed < 35, (run["duration_s"], elapsed)
