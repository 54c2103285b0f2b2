"""recipes/gitlab-ci/fan-out.yml run for real by gitlab-ci-local (its shell executor): the
plan job, one job per task pinned to the plan's commit, and the one landing job that
folds the ledgers back, stacks the green slices (each moved one verified again) and
pushes them -- a parked task's job ends green (never retried) and its saved attempts
reach the remote as evidence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_recipes_phased import CHECK, WORKER, plan
from tests.helpers import require_tool
from tests.helpers.recipes import BIN, RECIPES, git, make_project

pytestmark = pytest.mark.slow
PIPELINE = RECIPES / "gitlab-ci" / "fan-out.yml"


def test_the_pipeline_keeps_its_promises_on_paper() -> None:
    data = yaml.safe_load(PIPELINE.read_text())
    slices = data["loopkit-slice"]
    assert "matrix" in slices["parallel"]
    # Only the runner's own failures are retried: a park exits green, never retried.
    assert "script_failure" not in slices["retry"]["when"]
    assert any("exit 0" in line and "20 | 21 | 22 | 30" in line for line in slices["script"])
    land = data["loopkit-land"]
    assert land["resource_group"] and land["environment"]["name"] == "loopkit-landing"
    pushing = [
        job
        for job, body in data.items()
        if isinstance(body, dict)
        and any(
            "stack push" in str(line) or "git push" in str(line) for line in body.get("script", [])
        )
    ]
    assert pushing == ["loopkit-land"]


@pytest.mark.longest
def test_the_pipeline_runs_for_real(tmp_path: Path) -> None:
    tool = require_tool("gitlab-ci-local")
    require_tool("rsync")
    tasks = plan("alpha", "First") + plan("broken", "Will crash") + plan("gamma", "Third")
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    pipeline = yaml.safe_load(PIPELINE.read_text())
    pipeline["loopkit-slice"]["parallel"]["matrix"] = [{"TASK_ID": ["alpha", "broken", "gamma"]}]
    (p.root / ".gitlab-ci.yml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    p.git("add", ".gitlab-ci.yml")
    p.git("commit", "-q", "-m", "ci")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    p.git("remote", "add", "origin", str(remote))
    p.git("push", "-q", "origin", "main")
    p.git("remote", "set-head", "origin", "main")
    base = p.git("rev-parse", "HEAD").strip()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("LOOPKIT_STATE_DIR", None)
    done = subprocess.run(
        [
            tool,
            "--shell-isolation",
            "--variable",
            "LOOPKIT_INSTALL=true",
            "--variable",
            "LOOPKIT_FORGE=plain",
            "--variable",
            f"LOOPKIT_REMOTE={remote}",
        ],
        cwd=p.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    for job in (
        "loopkit-plan",
        "loopkit-slice: [alpha]",
        "loopkit-slice: [broken]",
        "loopkit-land",
    ):
        assert f"PASS  {job}" in said, said[-3000:]

    refs = dict(
        reversed(line.split())
        for line in git(remote, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
    )
    alpha, gamma = refs["refs/heads/stack/fan-out/alpha"], refs["refs/heads/stack/fan-out/gamma"]
    assert refs["refs/heads/main"] == base  # the landing job pushed slices, never main
    # Built side by side on one base, stacked by the landing job: gamma moved onto alpha.
    assert git(remote, "rev-parse", f"{alpha}^").strip() == base
    assert git(remote, "rev-parse", f"{gamma}^").strip() == alpha
    assert git(remote, "show", f"{gamma}:src/alpha.txt") == "good\n"
    assert any(r.startswith("refs/loopkit/broken/") for r in refs)  # the park's evidence
    record = json.loads(git(remote, "show", "refs/loopkit/stack/fan-out:stack.json"))
    by_id = {s["id"]: s for s in record["slices"]}
    assert by_id["gamma"]["evidence"]["restacked_from"] != gamma
    assert (
        by_id["gamma"]["evidence"]["verify"]["tree"]
        == git(remote, "rev-parse", f"{gamma}^{{tree}}").strip()
    )
    # One ledger: every job's records folded in by the landing job.
    land = p.root / ".gitlab-ci-local" / "artifacts" / "loopkit-land" / ".loopkit" / "ledger.jsonl"
    if not land.is_file():  # where this version of gitlab-ci-local keeps a job's artifacts
        land = next(p.root.glob(".gitlab-ci-local/**/loopkit-land/**/.loopkit/ledger.jsonl"))
    tasks_seen = {json.loads(line)["task_id"] for line in land.read_text().splitlines() if line}
    assert tasks_seen == {"alpha", "broken", "gamma"}
    shutil.rmtree(p.root / ".gitlab-ci-local", ignore_errors=True)
