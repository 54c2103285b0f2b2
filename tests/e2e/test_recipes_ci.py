"""recipes/github-actions/fan-out.yml: the workflow's structure, and its shell steps run for
real in a temporary repository (a bare repository as `origin`, the GitHub variables set)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_recipes_phased import CHECK, WORKER, plan
from tests.helpers.recipes import BIN, RECIPES, Project, git, make_project, recipe_env

pytestmark = pytest.mark.slow
WORKFLOW = RECIPES / "github-actions" / "fan-out.yml"


def _workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _step(job: str, name: str) -> dict[str, Any]:
    for step in _workflow()["jobs"][job]["steps"]:
        if step.get("name") == name or step.get("id") == name:
            return step
    raise AssertionError(f"no step {name!r} in job {job}")


def _run_step(p: Project, job: str, name: str, tmp: Path, **env: str) -> tuple[int, dict[str, str]]:
    out = tmp / "github-output"
    out.write_text("")
    script = _step(job, name)["run"]
    assert "${{" not in script, "steps read env:, never expressions, in their shell"
    base = {
        "TASKS_FILE": "TASKS.md",
        "CONTRACT": "loop.yaml",
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "RUNNER_TEMP": str(tmp),
        **env,
    }
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=p.root,
        env=recipe_env(base),
        capture_output=True,
        text=True,
        timeout=180,
    )
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert done.returncode in (0, 20, 21, 22), done.stdout + done.stderr
    return done.returncode, outputs


def test_workflow_shape_fans_ready_tasks_out_one_job_and_branch_each() -> None:
    wf = _workflow()
    jobs = wf["jobs"]
    assert set(jobs) == {"plan", "run"}
    run = jobs["run"]
    assert run["needs"] == "plan"
    assert run["strategy"]["fail-fast"] is False
    assert "fromJSON(needs.plan.outputs.tasks)" in run["strategy"]["matrix"]["task"]
    assert run["env"]["TASK_ID"] == "${{ matrix.task }}"
    assert any("upload-artifact" in s.get("uses", "") for s in run["steps"])
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert "workflow_dispatch" in triggers


def test_every_shell_step_is_shellcheck_clean(tmp_path: Path) -> None:
    shellcheck = BIN / "shellcheck"
    if not shellcheck.exists():
        pytest.fail("shellcheck is not installed in the venv (make install)")
    for job in _workflow()["jobs"].values():
        for i, step in enumerate(job["steps"]):
            if "run" not in step:
                continue
            f = tmp_path / f"step-{i}.sh"
            f.write_text("#!/usr/bin/env bash\n" + step["run"])
            done = subprocess.run(
                [str(shellcheck), "-s", "bash", str(f)], capture_output=True, text=True
            )
            assert done.returncode == 0, f"{step.get('name')}:\n{done.stdout}"


@pytest.mark.longest
def test_the_steps_plan_run_and_push_for_real(tmp_path: Path) -> None:
    tasks = (
        plan("alpha", "First")
        + plan("broken", "Will crash")
        + plan("beta", "Second", depends="alpha")
    )
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    p.git("remote", "add", "origin", str(origin))
    p.git("push", "-q", "origin", "main")

    _, out = _run_step(p, "plan", "ready", tmp_path)
    assert json.loads(out["tasks"]) == ["alpha", "broken"]  # beta waits for alpha
    assert out["count"] == "2"

    results = {}
    for task in ("alpha", "broken"):
        p.git("switch", "-q", "main")
        env = {"TASK_ID": task}
        _run_step(p, "run", "Branch for the task", tmp_path, **env)
        _, loop_out = _run_step(p, "run", "loop", tmp_path, **env)
        results[task] = loop_out["code"]
        _run_step(p, "run", "Push the branch and the saved attempts", tmp_path, **env)
        _run_step(p, "run", "Report", tmp_path, **env)
    assert results == {"alpha": "0", "broken": "21"}

    remote = git(origin, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/loopkit/alpha" in remote
    assert "refs/heads/loopkit/broken" in remote
    assert "refs/loopkit/broken/" in remote  # the parked attempt travels with its branch
    alpha_log = git(origin, "log", "--pretty=%s", "loopkit/alpha").splitlines()
    assert alpha_log[:2] == ["loopkit: mark alpha done", "loopkit: alpha: First"]
    assert "- [!] Will crash" in git(origin, "show", "loopkit/broken:TASKS.md")
    assert "loopkit: alpha" in (tmp_path / "summary.md").read_text()
    assert os.path.getsize(tmp_path / "summary.md") > 0
