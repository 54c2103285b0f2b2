"""recipes/other-languages/loop.mjs: the ratchet in Node.js, on the published surface only."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_recipes_loop import BAD_THEN_GOOD, CRASH_WITH_DEBRIS, GOOD
from tests.helpers.recipes import (
    RECIPES,
    Project,
    fail_message,
    make_project,
    recipe_env,
    user_commits_during,
)

pytestmark = pytest.mark.slow
LOOP_MJS = RECIPES / "other-languages" / "loop.mjs"


def node(
    p: Project, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("node")
    if exe is None:
        pytest.skip("node is not installed")
    return p.execute([exe, str(LOOP_MJS), *args], env=env, timeout=180)


def test_node_loop_retries_in_place_then_commits_and_marks(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD_THEN_GOOD, tasks="- [ ] Make value good {#fix-value}\n")
    start = tmp_path / "next.json"
    out = subprocess.run(
        ["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"],
        cwd=p.root,
        env=recipe_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    start.write_text(out)
    proc = node(p, "--tasks", "TASKS.md", str(start))
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 2
    assert "value" in p.handoff(2)  # the failure rode into the second handoff
    subjects = p.git("log", "--pretty=%s").splitlines()
    assert subjects[:2] == ["loopkit: mark fix-value done", "loopkit: fix-value: Make value good"]
    assert p.task_line("fix-value").startswith("- [x]")
    assert p.git("status", "--porcelain") == ""
    assert not [x for x in p.all_committed_paths() if x.startswith(".loopkit")]


@pytest.mark.longest
def test_node_loop_parks_saves_and_resets(tmp_path: Path) -> None:
    p = make_project(tmp_path, CRASH_WITH_DEBRIS, gitignore="data/\ncache.db\n")
    (p.root / "data").mkdir()
    proc = node(
        p,
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Make value good",
        env={"RESET_PATHS": "data cache.db"},
    )
    assert proc.returncode == 21, fail_message(proc)
    assert not (p.root / "tests" / "test_stray.py").exists()
    assert (p.root / "README.md").read_text() == "# project\n"
    assert (p.root / "data").is_dir() and not list((p.root / "data").iterdir())
    ref = p.loopkit_refs()[-1]  # every attempt is saved; the last one is the park's
    assert {"tests/test_stray.py", "README.md"} <= p.files(ref)
    assert "parked: fix-value" in (p.root / "MEMORY.md").read_text()
    assert p.git("status", "--porcelain") == ""


def test_node_loop_stops_when_the_branch_moved_and_loses_nothing(tmp_path: Path) -> None:
    # A green attempt while the user commits on the branch: the commit is refused (40),
    # the user's commit stays the branch's head, the green tree stays on disk, saved.
    p = make_project(tmp_path, GOOD)
    before = p.head()
    user = user_commits_during(p)
    try:
        proc = node(p, "--contract", "loop.yaml", "--task-id", "fix-value")
        user.wait(timeout=60)
    finally:
        user.kill()
    assert proc.returncode == 40, fail_message(proc)
    assert "the commit of fix-value refused: the branch moved" in proc.stderr
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert (p.root / "src/value.txt").read_text() == "good\n"
    ref = p.loopkit_refs()[-1]  # every attempt is saved; the last one is the park's
    assert "src/value.txt" in p.files(ref)


def test_node_loop_commits_the_verified_tree_and_honours_the_lock(tmp_path: Path) -> None:
    # A planted pre-commit hook that would rewrite the commit never runs; a live lock of
    # another loop refuses the start (4), a stale one is taken over.
    p = make_project(
        tmp_path, "Path('src').mkdir(exist_ok=True)\nPath('src/value.txt').write_text('good\\n')\n"
    )
    hook = p.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho bad > src/value.txt\ngit add src/value.txt\n")
    hook.chmod(0o755)
    lock = p.lock()
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")  # this test's own process: alive
    proc = node(p, "--contract", "loop.yaml", "--task-id", "fix-value")
    assert proc.returncode == 4, fail_message(proc)
    assert "another loop" in proc.stderr and p.worker_calls() == 0
    (lock / "pid").write_text("999999999\n")  # gone
    proc = node(p, "--contract", "loop.yaml", "--task-id", "fix-value")
    assert proc.returncode == 0, fail_message(proc)
    assert "took over the lock" in proc.stderr
    assert not lock.exists()
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert p.git("status", "--porcelain") == ""


def test_a_lock_the_shell_recipes_took_is_live_to_the_node_loop(tmp_path: Path) -> None:
    # One loop per work tree across recipes: the lock a shell recipe took (lk task begin,
    # the start time beside the pid) is the one loop.mjs meets. Naive variant caught: two
    # formats, so the node loop takes a live shell loop's lock for a stale one and runs
    # beside it.
    p = make_project(tmp_path, GOOD)
    lock = p.lock()
    pid = os.getpid()  # this test's own process: alive, holding it as a loop would
    subprocess.run(["lk", "task", "begin", "--owner", str(pid)], cwd=p.root, env=recipe_env(),
                   capture_output=True, text=True, check=True)  # fmt: skip
    started = (lock / "started").read_text()
    assert started.strip() and (lock / "pid").read_text().strip() == str(pid)
    proc = node(p, "--contract", "loop.yaml", "--task-id", "fix-value")
    assert proc.returncode == 4, fail_message(proc)
    assert "another loop" in proc.stderr and p.worker_calls() == 0
    # ... and a start time that is not this process's is a reused pid: taken over.
    (lock / "started").write_text("ticks 1\n")
    proc = node(p, "--contract", "loop.yaml", "--task-id", "fix-value")
    assert proc.returncode == 0, fail_message(proc)
    assert "took over the lock" in proc.stderr
