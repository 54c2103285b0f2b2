"""recipes/worktree.sh: each attempt in its own git worktree; green fast-forwards the
branch, red removes the worktree (its tree saved under refs/loopkit/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# Call 1 writes a wrong value (red); call 2 -- in a fresh worktree -- writes the right one.
# Each call records where it ran.
WORKER = """
(STATE / f"cwd-{n}").write_text(os.getcwd())
Path("src").mkdir(exist_ok=True)
assert Path("data").is_dir() and not any(Path("data").iterdir())  # RESET_PATHS: made, empty
assert not Path("src/value.txt").exists(), "a fresh worktree must not hold the last attempt"
Path("src/value.txt").write_text("bad\\n" if n == 1 else "good\\n")
"""


def _wt_run(p, tmp_path: Path, *args: str):
    return p.run(
        "worktree.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Make value good",
        *args,
        env={"LK_WORKTREES": str(tmp_path / "worktrees"), "RESET_PATHS": "data/"},
    )


def test_red_attempt_is_dropped_and_green_fast_forwards_the_branch(tmp_path: Path) -> None:
    p = make_project(
        tmp_path, WORKER, gitignore="data/\n", tasks="- [ ] Make value good {#fix-value}\n"
    )
    before = p.head()
    proc = _wt_run(p, tmp_path, "--tasks", "TASKS.md")
    assert proc.returncode == 0, fail_message(proc)
    # Marked done only after the fast-forward landed, in its own commit.
    assert p.task_line("fix-value").startswith("- [x]")
    assert p.git("log", "-1", "--pretty=%s").strip() == "loopkit: mark fix-value done"
    p.git("reset", "-q", "--hard", "HEAD~1")  # look at the task's own commit below
    assert p.worker_calls() == 2
    for n in (1, 2):
        ran_in = Path((p.scratch / f"cwd-{n}").read_text())
        assert ran_in.parent == tmp_path / "worktrees", ran_in
    # The branch moved by a fast-forward: the new commit sits right on the old head.
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.git("log", "-1", "--pretty=%s").startswith("loopkit: fix-value:")
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert p.git("status", "--porcelain") == ""
    # Every worktree is gone; the red attempt is kept under its ref.
    assert len(p.git("worktree", "list").splitlines()) == 1
    assert list((tmp_path / "worktrees").iterdir()) == []
    (red,) = [r for r in p.loopkit_refs() if r.startswith("refs/loopkit/fix-value/")]
    assert p.git("show", f"{red}:src/value.txt") == "bad\n"
    # The ledger and documents live in the checkout's state folder, not in the worktrees.
    assert [d["outcome"] for d in p.decisions("fix-value")][-1] == "complete"


def test_a_parked_attempt_never_touches_the_checkout(tmp_path: Path) -> None:
    body = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("half\\n")
Path("stray.txt").write_text("debris\\n")
sys.exit(2)
"""
    p = make_project(tmp_path, body)
    before = p.head()
    proc = _wt_run(p, tmp_path)
    assert proc.returncode == 21, fail_message(proc)
    assert not (p.root / "src").exists() and not (p.root / "stray.txt").exists()
    assert p.git("rev-parse", "HEAD~1").strip() == before  # only the park record landed
    assert "parked: fix-value" in (p.root / "MEMORY.md").read_text()
    assert len(p.git("worktree", "list").splitlines()) == 1
    refs = p.loopkit_refs()  # every attempt's worktree, saved before it was removed
    assert refs and all({"src/value.txt", "stray.txt"} <= p.files(ref) for ref in refs)


def test_a_branch_that_moved_meanwhile_keeps_the_green_commit_and_stops(tmp_path: Path) -> None:
    # The user commits on the branch while the attempt runs in its worktree: the green
    # commit cannot fast-forward the branch. It is kept under refs/loopkit/, the loop stops
    # (40), nothing is marked, the user's commit stays the branch's head.
    body = """
import subprocess
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                        capture_output=True, text=True, check=True).stdout.strip()
subprocess.run(["git", "-C", str(Path(common).parent), "-c", "user.name=u", "-c", "user.email=u@x",
                "commit", "-q", "--allow-empty", "-m", "the user's commit"], check=True)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    # The worker stands in for the user: without a sandbox (the checkout is read-only in one).
    p = make_project(
        tmp_path, body, tasks="- [ ] Make value good {#fix-value}\n", sandbox={"mode": "off"}
    )
    before = p.head()
    proc = _wt_run(p, tmp_path, "--tasks", "TASKS.md")
    assert proc.returncode == 40, fail_message(proc)
    assert "could not fast-forward" in proc.stderr
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.task_line("fix-value").startswith("- [ ]")
    (green,) = [r for r in p.loopkit_refs() if "/green-" in r]
    assert p.git("show", f"{green}:src/value.txt") == "good\n"
    assert p.git("rev-parse", f"{green}~1").strip() == before
