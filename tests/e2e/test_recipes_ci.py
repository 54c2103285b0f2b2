"""recipes/github-actions/fan-out.yml: the workflow's structure, and its shell steps run for
real in a temporary repository (a bare repository as `origin`, the GitHub variables set)."""

from __future__ import annotations

import json
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


def test_workflow_shape_fans_ready_tasks_out_and_lands_in_one_job() -> None:
    wf = _workflow()
    jobs = wf["jobs"]
    assert set(jobs) == {"plan", "run", "land"}
    run = jobs["run"]
    assert run["needs"] == "plan"
    assert run["strategy"]["fail-fast"] is False
    assert "fromJSON(needs.plan.outputs.tasks)" in run["strategy"]["matrix"]["task"]
    assert run["env"]["TASK_ID"] == "${{ matrix.task }}"
    assert any("upload-artifact" in s.get("uses", "") for s in run["steps"])
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert "workflow_dispatch" in triggers
    assert jobs["land"]["concurrency"]["cancel-in-progress"] is False


def test_only_the_landing_job_can_write_and_only_its_push_step_holds_the_token() -> None:
    wf = _workflow()
    assert wf["permissions"] == {}
    for name, job in wf["jobs"].items():
        perms = job["permissions"]
        writes = {k for k, v in perms.items() if v == "write"}
        assert writes == ({"contents", "pull-requests", "issues"} if name == "land" else set())
        for step in job["steps"]:
            if "actions/checkout@" in step.get("uses", ""):
                assert step["with"]["persist-credentials"] is False, name
            if "github.token" in json.dumps(step) or "GH_TOKEN" in json.dumps(step):
                assert (name, step.get("name")) == ("land", "Push the stack")
        if name != "land":
            assert "github.token" not in json.dumps(job)
    # Every action pinned to a full commit.
    for job in wf["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert len(step["uses"].split("@")[1]) == 40, step["uses"]


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
def test_the_steps_plan_run_pack_and_land_for_real(tmp_path: Path) -> None:
    tasks = (
        plan("alpha", "First")
        + plan("broken", "Will crash")
        + plan("gamma", "Third")
        + plan("beta", "Second", depends="alpha")
    )
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    p.git("remote", "add", "origin", str(origin))
    p.git("push", "-q", "origin", "main")

    _, out = _run_step(p, "plan", "ready", tmp_path)
    assert json.loads(out["tasks"]) == ["alpha", "broken", "gamma"]  # beta waits for alpha
    assert out["count"] == "3"
    base = out["base"]
    assert base == p.git("rev-parse", "HEAD").strip()
    shares = tmp_path / "plan-shares"
    _run_step(p, "plan", "shares", tmp_path, COUNT="3")
    assert (shares / "share.json").is_file()

    results = tmp_path / "results"
    results.mkdir()
    codes = {}
    for task in ("alpha", "broken", "gamma"):
        job = tmp_path / f"job-{task}"
        job.mkdir()
        (job / "plan-shares").mkdir()
        (job / "plan-shares" / "share.json").write_text((shares / "share.json").read_text())
        p.git("checkout", "-q", "--detach", base)
        env = {"TASK_ID": task, "BASE": base, "RUNNER_TEMP": str(job)}
        _, loop_out = _run_step(p, "run", "loop", job, **env)
        codes[task] = loop_out["code"]
        _run_step(p, "run", "Pack the result", job, CODE=loop_out["code"], **env)
        (job / "result").rename(results / f"loopkit-{task}")  # what download-artifact lays out
        p.git("checkout", "-q", "main")
        p.git("reset", "-q", "--hard", base)
    assert codes == {"alpha": "0", "broken": "21", "gamma": "0"}

    env = {
        "TASKS": out["tasks"],
        "TARGET": "main",
        "ISSUE": "",
        "LOOPKIT_FORGE": "plain",
        "STACK": "fan-out",
        "GITHUB_REPOSITORY": "o/r",
        # The jobs signed with the repository's key: the land job verifies each statement.
        "ALLOWED_SIGNERS": (p.root / ".git/loopkit/attest/allowed_signers").read_text(),
    }
    # A fresh land runner holds no statement: each comes from its job's bundle.
    p.git("update-ref", "-d", "refs/notes/loopkit-attest")
    _run_step(p, "land", "collect", tmp_path, **env)
    alpha_head = json.loads((results / "loopkit-alpha" / "result.json").read_text())["head"]
    allowed = p.root / ".git/loopkit/attest/allowed_signers"
    done = p.execute(
        [str(BIN / "lk"), "attest", "verify", alpha_head, "--allowed-signers", str(allowed)]
    )
    assert done.returncode == 0, done.stderr
    _run_step(p, "land", "Push the stack", tmp_path, **env)
    remote = git(origin, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/stack/fan-out/alpha" in remote
    assert "refs/heads/stack/fan-out/gamma" in remote
    assert "refs/loopkit/broken/" in remote  # the parked attempt travels as evidence
    alpha = git(origin, "rev-parse", "stack/fan-out/alpha").strip()
    assert git(origin, "rev-parse", "stack/fan-out/gamma^").strip() == alpha
    assert git(origin, "rev-parse", "main").strip() == base  # nothing landed by itself


def _zizmor(path: Path) -> list[tuple[str, str]]:
    zizmor = BIN / "zizmor"
    if not zizmor.exists():
        pytest.fail("zizmor is not installed in the venv (make install)")
    done = subprocess.run(
        [str(zizmor), "--offline", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings, by severity
    return [(f["ident"], f["determinations"]["severity"]) for f in json.loads(done.stdout)]


def test_zizmor_finds_nothing_above_low(tmp_path: Path) -> None:
    found = _zizmor(WORKFLOW)
    assert all(sev in ("Unknown", "Informational", "Low") for _, sev in found), found
    # The same workflow with the worker's checkout keeping its token in .git/config:
    # zizmor sees it (the check can fail).
    wf = _workflow()
    run = wf["jobs"]["run"]
    del run["steps"][0]["with"]["persist-credentials"]
    worse = tmp_path / "fan-out.yml"
    worse.write_text(
        yaml.safe_dump(
            {
                "name": wf["name"],
                "on": "workflow_dispatch",
                **{k: v for k, v in wf.items() if k not in ("name", True, "on")},
            }
        )
    )
    flagged = {ident for ident, sev in _zizmor(worse) if sev in ("Medium", "High")}
    assert "artipacked" in flagged, flagged
