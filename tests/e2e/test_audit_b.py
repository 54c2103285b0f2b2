"""Audit regressions: workers, judge and recipes, checked against the published promises."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from loopkit import proc
from tests.agents_helpers import claude_bin, claude_env_for, model_server
from tests.invoke_helpers import lk_invoke, pids_with, write_contract

# A grandchild that leaves the worker's process group (a session of its own), as Claude
# Code's Bash tool does; optionally deaf to SIGTERM.
_DETACHED = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    'if sys.argv[2] == "deaf":\n'
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "time.sleep(300)\n"
)


def _worker(marker: str, mode: str) -> list[str]:
    inner = f"{sys.executable} -c '{_DETACHED}' {marker} {mode} >/dev/null 2>&1 </dev/null"
    return ["/bin/sh", "-c", f"{inner} & {inner} & sleep 300"]


@pytest.mark.parametrize("mode", ["polite", "deaf"])
def test_a_stopped_worker_leaves_no_process_in_another_session(mode: str) -> None:
    marker = f"loopkit-audit-{mode}-{time.time_ns()}"
    running = proc.spawn(_worker(marker, mode), timeout=1.5)
    time.sleep(0.5)
    assert len(pids_with(marker)) >= 3  # the shell and both escaped children
    list(running.lines())
    finished = running.wait()
    assert finished.stopped == "timeout"
    time.sleep(0.2)
    assert pids_with(marker) == []


def test_a_timed_out_check_leaves_no_process_in_another_session(tmp_path: Path) -> None:
    marker = f"loopkit-audit-run-{time.time_ns()}"
    done = proc.run(_worker(marker, "polite"), timeout=1.5, output=tmp_path / "out.log")
    assert done.timed_out
    time.sleep(0.2)
    assert pids_with(marker) == []


@pytest.mark.agents
def test_cost_is_untrusted_when_the_base_url_comes_from_claude_settings(
    git_repo: Path, tmp_path: Path
) -> None:
    # A proxy or another model's endpoint is often set in ~/.claude/settings.json, not in
    # the environment: Claude Code then prices a model it never talked to.
    claude_bin()
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "claude"})
    with model_server(["Done."]) as server:
        env = claude_env_for(server, tmp_path / "home", retries=0)
        url = env.pop("ANTHROPIC_BASE_URL")
        settings = tmp_path / "home" / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": url}}))
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
        assert server.model_requests("anthropic")  # it did talk to the scripted server
    assert r.returncode == 0, r.stderr
    assert r.run["cost"]["usd"] is not None
    assert r.run["cost"]["trusted"] is False


SLOW = """
import time
time.sleep(40)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["loop.sh", "worktree.sh", "loop.mk", "loop.mjs"])
def test_every_recipe_runs_the_worker_on_its_admitted_share(recipe: str, tmp_path: Path) -> None:
    # Admission grants a run only what the wall-clock budget leaves after the checks'
    # reserve; a recipe that pipes the document it had BEFORE admission into lk-invoke
    # lets the worker run to worker.timeout (60 s here) and blow the 12 s budget.
    import shutil
    import subprocess

    from tests.recipes_helpers import RECIPES, make_project, recipe_env

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
