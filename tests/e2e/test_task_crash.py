"""A loop stopped at any point -- kill -9, SIGTERM, Ctrl-C, a full disk, refs that cannot
be written, a stale index.lock -- is finished by the plain rerun, and loses nothing.

Each fault comes at a chosen git call of a real run through recipes/loop.sh (the git
first on PATH is tests/helpers/faults.py's shim); the test then reruns the loop with no
flag and judges the outcome."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_recipes_loop import GOOD
from tests.helpers.faults import Faults, group_left
from tests.helpers.recipes import RECIPES, Project, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

ARGV = [str(RECIPES / "loop.sh"), "--contract", "loop.yaml", "--task-id", "fix-value",
        "--task", "Fix", "--tasks", "TASKS.md"]  # fmt: skip
TASKS = "- [ ] Fix {#fix-value}\n"
#: Red on the first call, green on every later one, whatever the tree it starts from.
RED_THEN_GREEN = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n" if n == 1 else "good\\n")
"""


def settled(p: Project) -> bool:
    """Every admitted attempt is decided or recorded interrupted, once."""
    admitted = sum(1 for r in p.ledger() if r.get("type") == "admission"
                   and (r.get("admission") or {}).get("admitted"))  # fmt: skip
    closed = sum(1 for r in p.ledger() if (r.get("type") in (None, "attempt", "interrupted")
                 and r.get("decision") is not None) or r.get("type") == "interrupted")  # fmt: skip
    return admitted == closed


def replay_agrees(p: Project) -> bool:
    done = subprocess.run(["lk-decide", "--replay", ".loopkit/ledger.jsonl"], cwd=p.root,
                          env=recipe_env(), capture_output=True, text=True)  # fmt: skip
    return done.returncode == 0


def stopped_then_rerun(
    p: Project,
    faults: Faults,
    kind: str,
    *,
    match: str = "",
    at: int | None = None,
    after: bool = False,
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    faults.arm(kind, match=match, at=at, after=after)
    first = faults.run(ARGV, cwd=p.root, env=recipe_env())
    assert faults.fired(), f"the fault never came: {match or at}\n{fail_message(first)}"
    pgid = int((faults.dir / "pgid").read_text())
    assert group_left(pgid) == [], "a process outlived its loop"
    faults.disarm()
    rerun = p.execute(ARGV)
    return first, rerun


def landed_and_marked(p: Project) -> None:
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert p.task_line("fix-value").startswith("- [x]")
    subjects = p.git("log", "--pretty=%s").splitlines()
    assert subjects[0] == "loopkit: mark fix-value done" and subjects[1].startswith(
        "loopkit: fix-value:"
    )
    assert p.git("status", "--porcelain") == ""
    assert not p.lock().exists() and not (p.root / ".git/loopkit/task.json").exists()


@pytest.mark.parametrize("kind", ["term", "int"])
def test_an_orderly_stop_mid_attempt_saves_the_tree_and_the_plain_rerun_finishes(
    tmp_path: Path, kind: str
) -> None:
    # A CI runner's cancel or a person's Ctrl-C while the checks run on a tree that passes
    # them. Naive variant caught (the old exit trap): the note recovery needs removed with
    # the lock, the rerun refusing the "dirty" tree, the attempt admitted and never settled.
    p = make_project(tmp_path, GOOD, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    first, rerun = stopped_then_rerun(p, faults, kind, match="write-tree", after=True)
    assert first.returncode != 0, fail_message(first)
    assert rerun.returncode == 0, fail_message(rerun)
    saved = [r for r in p.loopkit_refs() if r.startswith("refs/loopkit/fix-value/")]
    assert saved and any("src/value.txt" in p.files(r) for r in saved), saved
    landed_and_marked(p)
    assert settled(p) and replay_agrees(p)


def test_a_landing_cut_after_the_branch_moved_is_finished_by_the_rerun(tmp_path: Path) -> None:
    # kill -9 right after the task's commit moved HEAD, before the index followed and the
    # task was marked. Naive variants caught: TASKS.md left open with the commit on the
    # branch; a staged deletion of the verified file in `git status`.
    p = make_project(tmp_path, GOOD, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    first, rerun = stopped_then_rerun(
        p, faults, "kill9", match="update-ref -m loopkit: fix-value complete", after=True
    )
    assert first.returncode == -9 or first.returncode == 137 or first.returncode < 0
    assert rerun.returncode == 0, fail_message(rerun)
    assert "finished the landing of fix-value" in rerun.stderr
    landed_and_marked(p)
    assert p.worker_calls() == 1  # landed, not done again


def test_a_mark_written_but_not_committed_is_committed_by_the_rerun(tmp_path: Path) -> None:
    p = make_project(tmp_path, GOOD, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    _first, rerun = stopped_then_rerun(p, faults, "kill9", match="hash-object -w -- TASKS.md")
    assert rerun.returncode == 0, fail_message(rerun)
    landed_and_marked(p)
    assert p.worker_calls() == 1


def test_a_kill_between_a_decision_and_the_next_admission_charges_nothing(tmp_path: Path) -> None:
    # Killed right after the red attempt was saved: the rerun records no interrupted
    # attempt (none was admitted and left open), so no attempt of the budget is lost.
    p = make_project(tmp_path, RED_THEN_GREEN, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    _first, rerun = stopped_then_rerun(
        p, faults, "kill9", match="update-ref -m loopkit: save refs/loopkit/fix-value/1", after=True
    )
    assert rerun.returncode == 0, fail_message(rerun)
    assert [r["type"] for r in p.ledger()].count("interrupted") == 0
    assert settled(p) and replay_agrees(p)
    landed_and_marked(p)


@pytest.mark.parametrize("kind", ["disk", "roref"])
def test_a_full_disk_or_unwritable_refs_is_exit_4_with_the_path_and_the_rerun_finishes(
    tmp_path: Path, kind: str
) -> None:
    # Naive variants caught: exit 70 "internal error" with a traceback; a rerun that
    # refuses the tree the stopped loop left.
    p = make_project(tmp_path, GOOD, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    match = "commit-tree" if kind == "disk" else "update-ref -m loopkit: fix-value complete"
    first, rerun = stopped_then_rerun(p, faults, kind, match=match)
    assert first.returncode == 4, fail_message(first)
    assert "Traceback" not in first.stderr and "internal error" not in first.stderr
    assert ("No space left" if kind == "disk" else "cannot write") in first.stderr
    assert first.stderr.count("error:") == 1
    assert rerun.returncode == 0, fail_message(rerun)
    landed_and_marked(p)
    assert settled(p) and replay_agrees(p)


def test_a_stale_index_lock_is_cleared_when_its_owner_is_gone(tmp_path: Path) -> None:
    # A git killed in the repository, or in loopkit's clean room, leaves index.lock behind.
    # Naive variant caught: every later call failing with "remove the file manually".
    p = make_project(tmp_path, GOOD, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    faults.arm("lock", match="read-tree")  # the clean room's sync reads a tree first
    first = faults.run(ARGV, cwd=p.root, env=recipe_env())
    assert faults.fired()
    assert first.returncode == 0, fail_message(first)
    landed_and_marked(p)


def test_a_lock_a_live_process_holds_is_named_with_its_remedy(tmp_path: Path) -> None:
    p = make_project(tmp_path, GOOD)
    lock = p.root / ".git" / "index.lock"
    holder = subprocess.Popen(["sleep", "30"], stdin=open(lock, "w"))  # noqa: SIM115
    try:
        done = subprocess.run(["lk", "task", "begin", "--task-id", "t", "--allow-dirty"],
                              cwd=p.root, env=recipe_env(), capture_output=True, text=True)  # fmt: skip
        (p.root / "x.txt").write_text("x")
        done = subprocess.run(["lk", "task", "save", "x"], cwd=p.root, env=recipe_env(),
                              capture_output=True, text=True)  # fmt: skip
    finally:
        holder.kill()
    assert done.returncode in (0, 4), done.stderr
    if done.returncode == 4:
        assert str(lock) in done.stderr and "rm -f" in done.stderr
        assert done.stderr.count("\n") == 1


def test_two_loops_with_different_state_folders_are_still_one_loop_per_work_tree(
    tmp_path: Path,
) -> None:
    # The lock lives with the work tree, not in the state folder. Naive variant caught: a
    # second loop with its own LOOPKIT_STATE_DIR running beside the first (a task
    # committed twice, a worker run beyond its budget).
    body = """
import time
(STATE / "running").write_text("1")
while not (STATE / "release").exists():
    time.sleep(0.05)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    p = make_project(tmp_path, body)
    argv = ARGV[:7]
    first = subprocess.Popen(argv, cwd=p.root, env=recipe_env({"LOOPKIT_STATE_DIR": str(tmp_path / "a")}),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for _ in range(600):
            if (p.scratch / "running").exists():
                break
            import time

            time.sleep(0.05)
        second = p.execute(argv, env={"LOOPKIT_STATE_DIR": str(tmp_path / "b")})
        assert second.returncode == 4, fail_message(second)
        assert "another loop" in second.stderr
    finally:
        (p.scratch / "release").write_text("1")
        _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert p.worker_calls() == 1


def test_two_plain_reruns_at_once_recover_once(tmp_path: Path) -> None:
    # After a kill -9 mid-attempt, two reruns start together: one recovers and runs, the
    # other is refused with one line; the interrupted attempt is settled once.
    body = """
import time
if n == 1:
    Path("src").mkdir(exist_ok=True)
    Path("src/value.txt").write_text("half\\n")
    time.sleep(60)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    p = make_project(tmp_path, body, tasks=TASKS)
    faults = Faults(tmp_path / "faults")
    faults.arm("kill9", match="checkout-index")  # never: the worker hangs; killed below
    loop = subprocess.Popen(ARGV, cwd=p.root, env=recipe_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    import signal
    import time

    for _ in range(600):
        if p.worker_calls() >= 1 and (p.root / "src/value.txt").exists():
            break
        time.sleep(0.05)
    os.killpg(loop.pid, signal.SIGKILL)
    loop.wait()
    reruns = [subprocess.Popen(ARGV, cwd=p.root, env=recipe_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    results = [(r.wait(timeout=120), r.communicate()[1]) for r in reruns]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 4], results
    refused = next(err for code, err in results if code == 4)
    assert "another loop" in refused and refused.count("\n") == 1
    assert [r["type"] for r in p.ledger()].count("interrupted") == 1
    assert settled(p) and replay_agrees(p)
    landed_and_marked(p)


def test_the_crash_handler_survives_a_full_disk_and_a_full_disk_is_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Naive variants caught: a full disk reported as a bug (70, a traceback log); a
    # handler whose own log write fails and lets a traceback out with exit 1.
    import tempfile

    from loopkit.handling import handle

    def full() -> int:
        raise OSError(28, "No space left on device", str(tmp_path / "ledger.jsonl"))

    assert handle(full, "lk") == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "ledger.jsonl") in err

    def no_room(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device", "/tmp/loopkit-crash.log")

    monkeypatch.setattr(tempfile, "mkstemp", no_room)

    def bug() -> int:
        raise RuntimeError("a bug")

    assert handle(bug, "lk") == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and "could not be written" in err


def test_a_kill_after_the_admission_before_the_worker_started_charges_nothing(
    tmp_path: Path,
) -> None:
    # Killed inside lk-invoke's set-up (its look at what git ignores, before the worker
    # starts): the rerun records the admitted attempt as interrupted, numbered but not
    # charged -- the task still has its whole budget of attempts.
    p = make_project(tmp_path, RED_THEN_GREEN, tasks=TASKS, budgets={"attempts": 2})
    faults = Faults(tmp_path / "faults")
    _first, rerun = stopped_then_rerun(
        p, faults, "kill9", match="ls-files -z --others --ignored --exclude-standard --directory"
    )
    run = next(d for d in p.run_dirs("fix-value") if (d / "1-admit.json").exists())
    assert (run / "1-invoke.json").exists() and not (run / "1-worker").exists()
    interrupted = [r for r in p.ledger() if r.get("type") == "interrupted"]
    assert [r.get("ran") for r in interrupted] == [False]
    # Two attempts are left: red, then green -- with the lost one charged, the budget of
    # 2 would park the task after the red one.
    assert rerun.returncode == 0, fail_message(rerun)
    assert settled(p) and replay_agrees(p)
    landed_and_marked(p)


def test_a_killed_loop_its_parent_never_reaps_is_dead_to_the_rerun(tmp_path: Path) -> None:
    # kill -9 of a loop mid-attempt under a parent that never reaps it (a container whose
    # pid 1 does not): its pid stays listed, a zombie holding the lock's pid; the plain
    # rerun takes the lock over and finishes. Naive variant caught: a lock that takes
    # whatever `kill -0` finds for a live loop (exit 4 until the zombie is reaped).
    import signal
    import time

    body = """
import time
if n == 1:
    Path("src").mkdir(exist_ok=True)
    Path("src/value.txt").write_text("half\\n")
    time.sleep(60)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    p = make_project(tmp_path, body, tasks=TASKS)
    loop_pid = tmp_path / "loop.pid"
    argv = " ".join(f"'{a}'" for a in ARGV)
    parent = subprocess.Popen(["sh", "-c", f'setsid {argv} >/dev/null 2>&1 & echo $! >"{loop_pid}"; exec sleep 300'],
                              cwd=p.root, env=recipe_env(), start_new_session=True)  # fmt: skip
    try:
        for _ in range(1200):
            if loop_pid.exists() and p.worker_calls() >= 1 and (p.root / "src/value.txt").exists():
                break
            time.sleep(0.05)
        loop = int(loop_pid.read_text())
        os.killpg(loop, signal.SIGKILL)
        for _ in range(100):
            state = Path(f"/proc/{loop}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.1)
        assert state == "Z"
        rerun = p.execute(ARGV)
        assert Path(f"/proc/{loop}/stat").exists()  # the zombie is still there
        assert rerun.returncode == 0, fail_message(rerun)
        assert "took over the lock of a loop that is gone" in rerun.stderr
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert settled(p) and replay_agrees(p)
    landed_and_marked(p)
