"""lk eval run --ray: the trials fanned out on a real Ray cluster of two nodes (a head and
a worker, each its own processes, started here on 127.0.0.1 with one CPU each), against
the same suite run here with --jobs 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ray_cluster
from tests.helpers.evals import command_config, lk, make_repo, write_suite

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

#: What a trial's outcome is, apart from its timing and cost.
OUTCOME = (
    "key",
    "status",
    "infra",
    "outcome",
    "hidden_checks",
    "failure_class",
    "claimed",
    "false_claim",
    "scope_violation",
    "rounds",
    "tries",
    "infra_failures",
    "base",
)


@pytest.fixture(name="cluster")
def cluster_fixture() -> Iterator[str]:
    with ray_cluster.cluster() as address:
        yield address


def _outcomes(state: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in (state / "trials.jsonl").read_text().splitlines()]
    return {r["id"]: {k: r.get(k) for k in OUTCOME} for r in lines}


def _attempt_under(trees: Path, config: str) -> int | None:
    """The pid of a running `lk attempt` of ``config`` in one of ``trees``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"attempt" in argv and cwd.startswith(str(trees) + "/" + config + "--"):
            return int(entry.name)
    return None


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_ray_gives_each_trial_the_outcome_jobs_gives_and_a_killed_worker_is_infra(
    tmp_path: Path, cluster: str
) -> None:
    """The same suite (two tasks, an agent that fixes them slowly, one that claims and
    does not, a provider that is down on one task's first repeat; two repeats) with
    --jobs 2 here and with --ray on the two-node cluster: every trial, by its identity,
    has the same outcome. A rerun on Ray resumes (nothing runs again). Then a Ray worker
    process is killed in the middle of a trial: that try is an infrastructure failure,
    retried whole; the trial is recorded once, with the outcome it has on one machine,
    and its tree is gone."""
    names = ["add", "neg"]
    repo = make_repo(tmp_path, names)
    good = command_config("good", fix=names)
    good["env"]["SLEEP"] = "2"
    good["env"]["DOWN_FIRST"] = "neg"
    suite = write_suite(
        tmp_path, repo, names, [good, command_config("claims", fix=[])], repeats=2, infra_retries=1
    )
    here, there, killed = tmp_path / "here", tmp_path / "there", tmp_path / "killed"
    r = lk("eval", "run", str(suite), "--jobs", "2", "--state", str(here), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    expected = _outcomes(here)
    assert len(expected) == 8
    assert {o["status"] for o in expected.values()} == {"passed", "failed", "infra"}

    r = lk("eval", "run", str(suite), "--ray", cluster, "--state", str(there), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _outcomes(there) == expected
    again = lk("eval", "run", str(suite), "--ray", cluster, "--state", str(there), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resuming: 8 of 8 trials finished before" in again.stderr
    assert len((there / "trials.jsonl").read_text().splitlines()) == 8

    # A Ray worker process killed while its trial's agent runs.
    env = {**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}
    running = subprocess.Popen(
        ["lk", "eval", "run", str(suite), "--ray", cluster, "--state", str(killed), "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        victim = None
        while victim is None and running.poll() is None and time.monotonic() < deadline:
            victim = _attempt_under(killed / "trees", "good--fix-add")
            time.sleep(0.05)
        assert victim is not None, "no trial of good was seen running"
        worker = _parent(victim)
        assert b"ray::" in Path(f"/proc/{worker}/cmdline").read_bytes()
        os.kill(worker, signal.SIGKILL)
        out, err = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 0, err
    got = _outcomes(killed)
    assert len(got) == 8 and len((killed / "trials.jsonl").read_text().splitlines()) == 8
    lost = [i for i, o in got.items() if any("Ray worker" in f for f in o["infra_failures"])]
    assert len(lost) == 1, got
    (hit,) = lost
    assert got[hit]["tries"] == expected[hit]["tries"] + 1
    assert got[hit]["status"] == expected[hit]["status"]
    for i, o in got.items():
        if i != hit:
            assert o == expected[i]
    assert json.loads(out)["configs"]["good"]["pass_at_1"]["value"] == 0.75
    # No tree is left (the lost try's too). Its `lk attempt`, told of its parent's death,
    # may still write its state folder as it winds down: the next run clears that.
    trees = killed / "trees"
    left = [p.name for p in trees.iterdir() if not p.name.endswith(".state")]
    assert left == [], left
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    assert listed.stdout.count("\n") == 1  # only the repository itself


def test_no_cluster_at_the_address_or_no_ray_is_one_line_before_anything_runs(
    tmp_path: Path,
) -> None:
    """Nothing answers at the address: exit 4 at once, one line naming it, no state
    folder made. Without Ray installed (a `ray` that cannot be imported first on the
    path): exit 4, one line saying what to install."""
    repo = make_repo(tmp_path, ["add"])
    suite = write_suite(tmp_path, repo, ["add"], [command_config("good", fix=["add"])])
    state = tmp_path / "state"
    address = f"127.0.0.1:{ray_cluster.free_port()}"
    r = lk("eval", "run", str(suite), "--ray", address, "--state", str(state), cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"lk: error: lk eval run --ray {address}: no Ray cluster answers there (Connection refused)"
    ]
    assert not state.exists()
    broken = tmp_path / "no-ray" / "ray"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {"PYTHONPATH": str(broken.parent)}
    r = lk("eval", "run", str(suite), "--ray", "auto", "--state", str(state), cwd=tmp_path, env=env)
    assert r.returncode == 4, r.stderr
    assert r.stderr.strip().splitlines() == [
        "lk: error: lk eval run --ray: Ray is not installed (pip install 'loopkit-agents[ray]')"
    ]
    assert not state.exists()
