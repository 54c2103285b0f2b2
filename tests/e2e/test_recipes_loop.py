"""recipes/loop.sh end to end: real git repositories, the installed lk-* commands, a Python
script as the worker (the ``command`` provider). Each regression test names the naive
recipe it catches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.recipes import (
    BIN,
    RECIPES,
    Project,
    fail_message,
    make_project,
    recipe_env,
    user_commits_during,
)

pytestmark = pytest.mark.slow

GOOD = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
print("wrote the value")
"""

# Attempt 1 leaves a wrong value (the check fails); attempt 2 must see that broken file on
# disk (retry in place) and the failure in its handoff (the feedback), then fixes it.
BAD_THEN_GOOD = """
Path("src").mkdir(exist_ok=True)
if n == 1:
    Path("src/value.txt").write_text("bad\\n")
    print("first try")
else:
    assert Path("src/value.txt").read_text() == "bad\\n", "the broken code was not left on disk"
    Path("src/value.txt").write_text("good\\n")
    print("fixed it")
"""

# A worker that leaves debris and then crashes: lk-decide parks it (unknown -> failed).
CRASH_WITH_DEBRIS = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("half done\\n")
Path("README.md").write_text("clobbered\\n")
Path("tests").mkdir(exist_ok=True)
Path("tests/test_stray.py").write_text("def test_stray():\\n    assert False\\n")
Path("data").mkdir(exist_ok=True)
Path("data/app.sqlite").write_text("schema drift\\n")
Path("data/extra_table").write_text("more drift\\n")
Path("cache.db").write_text("drift\\n")
print("giving up", file=sys.stderr)
sys.exit(3)
"""


def loop(project: Project, *args: str, task: str = "fix-value", **kw: object):
    return project.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        task,
        "--task",
        "Make value good",
        *args,
        **kw,
    )  # type: ignore[arg-type]


def test_green_attempt_is_committed_with_exactly_the_work(tmp_path: Path) -> None:
    p = make_project(tmp_path, GOOD)
    before = p.head()
    proc = loop(p, validate=True)  # every document the commands print checked against its schema
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.files() == {"README.md", "loop.yaml", "MEMORY.md", "src/value.txt"}
    assert p.git("status", "--porcelain") == ""
    msg = p.git("log", "-1", "--pretty=%B")
    assert msg.startswith("loopkit: fix-value: Make value good")
    assert "Loopkit-Task: fix-value" in msg
    # The commit is the tree the checks ran on; nothing changed after, nothing to save.
    assert (
        p.git("rev-parse", "HEAD^{tree}").strip()
        == p.docs("fix-value", "decide")[-1]["verify"]["tree"]
    )
    assert f"Loopkit-Tree: {p.git('rev-parse', 'HEAD^{tree}').strip()}" in msg
    assert p.loopkit_refs() == []
    # Every stage's document is kept for a person to read.
    for stage in ("admit", "invoke", "diff", "verify", "decide"):
        assert p.docs("fix-value", stage), stage
    assert p.decisions("fix-value")[-1]["outcome"] == "complete"


def test_retry_in_place_keeps_broken_code_and_pipes_the_feedback(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD_THEN_GOOD)
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 2
    outcomes = [d["outcome"] for d in p.decisions("fix-value")]
    assert outcomes[0] in ("retry", "replan") and outcomes[-1] == "complete"
    # The second handoff carries the first attempt's failure (the check's name at least).
    second = p.handoff(2)
    assert "value" in second and second != p.handoff(1)
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert (
        len(p.git("rev-list", "HEAD").split()) == 2
    )  # one commit for the task, none for the red attempt


def test_regression_1_state_is_never_committed_nor_reverted(tmp_path: Path) -> None:
    # Naive variants caught: a loop that logs into the work tree (./loop.log, as the
    # article's first version did) gets it swept in by `git add -A`; one that "cleans"
    # with `git clean -fdx`/`-fdX` or commits with `git add -A -f` wipes or commits
    # .loopkit/; one that does not write .git/info/exclude before its first log line
    # commits that log on a fresh clone.
    p = make_project(tmp_path, GOOD)
    exclude = p.root / ".git" / "info" / "exclude"
    exclude.write_text("")  # a fresh clone: nothing excluded yet
    proc = loop(p, task="first")
    assert proc.returncode == 0, fail_message(proc)
    committed = p.all_committed_paths()
    assert not [x for x in committed if x.startswith(".loopkit") or x.endswith(".log")], committed
    assert p.files() == {"README.md", "loop.yaml", "MEMORY.md", "src/value.txt"}
    log = p.state() / "recipes.log"
    ledger_before = len(p.ledger())
    assert ledger_before >= 1
    log_before = log.read_text()
    (p.state() / "notes.txt").write_text("kept by a person\n")

    # Now a task that parks: its revert must not touch a byte of the state folder.
    crash = tmp_path / "worker" / "crash.py"
    crash.write_text(
        "import sys\nfrom pathlib import Path\nPath('src/value.txt').write_text('x')\nsys.exit(5)\n"
    )
    data = json.loads((p.root / "loop.yaml").read_text())
    data["worker"]["command"] = f"{sys.executable} {crash}"
    (p.root / "loop.yaml").write_text(json.dumps(data))
    p.git("commit", "-qam", "switch worker")
    proc = loop(p, task="second")
    assert proc.returncode == 21, fail_message(proc)
    assert (p.state() / "notes.txt").read_text() == "kept by a person\n"
    after = log.read_text()
    assert after.startswith(log_before) and "parked second" in after
    assert len(p.ledger()) > ledger_before
    assert p.docs("first", "decide") and p.docs("second", "decide")
    committed = p.all_committed_paths()
    assert not [x for x in committed if x.startswith(".loopkit") or x.endswith(".log")], committed


def test_regression_2_a_commit_whose_branch_moved_stops_the_loop_loudly(tmp_path: Path) -> None:
    # Naive variants caught: `git add -A; git commit -m ...; lk-plan mark ... done` commits
    # on top of whatever the branch became meanwhile (here a commit the user made while the
    # checks ran), marks the task done and carries on; a commit whose status is not checked
    # goes unnoticed the same way. The recipe commits with `update-ref` guarded by the
    # commit the task began from: refused, exit 40, nothing marked, the tree saved.
    p = make_project(
        tmp_path,
        GOOD,
        tasks="- [ ] Make value good {#fix-value}\n- [ ] Another {#another}\n",
    )
    before = p.head()
    user = user_commits_during(p)
    try:
        proc = p.run(
            "loop.sh",
            "--contract",
            "loop.yaml",
            "--tasks",
            "TASKS.md",
            "--task-id",
            "fix-value",
            "--task",
            "Make value good",
        )
        user.wait(timeout=60)
    finally:
        user.kill()
    assert proc.returncode == 40, fail_message(proc)
    assert "the commit of fix-value refused: the branch moved" in proc.stderr
    assert "NOT marked" in proc.stderr
    # The user's commit is the branch's head, untouched; nothing was committed on it.
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.task_line("fix-value").startswith("- [ ]")
    # The green work is neither lost nor reverted: on disk, and saved under a ref.
    assert (p.root / "src/value.txt").read_text() == "good\n"
    refs = p.loopkit_refs()
    assert refs and refs[0].startswith("refs/loopkit/fix-value/")
    assert "src/value.txt" in p.files(refs[0])


def test_regression_4_reset_paths_wiped_and_directories_recreated_empty(tmp_path: Path) -> None:
    # Naive variants caught: `git reset --hard` alone leaves ignored state (the database)
    # with the failed attempt's drift; `rm -rf "$path"` without recreating leaves the data
    # directory missing, which breaks every later task that opens a file inside it.
    p = make_project(
        tmp_path,
        CRASH_WITH_DEBRIS,
        gitignore="data/\ncache.db\n",
    )
    (p.root / "data").mkdir()
    (p.root / "data" / "app.sqlite").write_text("pristine\n")
    (p.root / "cache.db").write_text("pristine\n")
    proc = loop(p, env={"RESET_PATHS": "data cache.db"})
    assert proc.returncode == 21, fail_message(proc)
    assert (p.root / "data").is_dir(), "a wiped directory must come back"
    assert list((p.root / "data").iterdir()) == [], "…and come back empty"
    assert not (p.root / "cache.db").exists()


def test_regression_4_a_deleted_data_directory_comes_back_empty(tmp_path: Path) -> None:
    # Naive variant caught: deciding "directory or file" only at park time; an attempt that
    # deleted the directory would leave it missing.
    body = "import shutil\nshutil.rmtree('data')\nsys.exit(3)\n"
    p = make_project(tmp_path, body, gitignore="data/\n")
    (p.root / "data").mkdir()
    (p.root / "data" / "seed").write_text("x")
    proc = loop(p, "--reset-path", "data")
    assert proc.returncode == 21, fail_message(proc)
    assert (p.root / "data").is_dir() and not list((p.root / "data").iterdir())


def test_regression_5_untracked_debris_is_gone_after_a_park_and_saved(tmp_path: Path) -> None:
    # Naive variants caught: `git reset --hard` without `git clean -fd` leaves the stray
    # test file that breaks the next task's test run; a revert without first saving the
    # tree under refs/loopkit/ loses the attempt for good.
    p = make_project(tmp_path, CRASH_WITH_DEBRIS, gitignore="data/\ncache.db\n")
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 21, fail_message(proc)
    assert not (p.root / "tests" / "test_stray.py").exists()
    assert not (p.root / "src" / "value.txt").exists()
    assert (p.root / "README.md").read_text() == "# project\n"
    # The park committed only its record (the retrospective), on top of the old HEAD.
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.git("status", "--porcelain") == ""
    refs = p.loopkit_refs()  # every attempt is saved (a crash is retried first)
    assert refs and all(r.startswith("refs/loopkit/fix-value/") for r in refs)
    saved = p.files(refs[-1])
    assert {"tests/test_stray.py", "src/value.txt", "README.md"} <= saved
    assert "data/app.sqlite" not in saved  # ignored state is RESET_PATHS' business
    assert p.git("show", f"{refs[-1]}:README.md") == "clobbered\n"
    assert p.git("rev-parse", f"{refs[-1]}^").strip() == before
    memory = (p.root / "MEMORY.md").read_text()
    assert "parked: fix-value" in memory and refs[-1] in memory
    assert "MEMORY.md" in p.git("show", "--name-only", "--pretty=format:", "HEAD")


def test_dirty_tree_is_refused_before_anything_runs(tmp_path: Path) -> None:
    # Naive variant caught: starting on a dirty tree, whose changes a park would revert
    # and a commit would sweep into the task.
    p = make_project(tmp_path, GOOD)
    (p.root / "README.md").write_text("my unsaved edit\n")
    proc = loop(p)
    assert proc.returncode == 4, fail_message(proc)
    assert "uncommitted changes" in proc.stderr
    assert p.worker_calls() == 0
    assert (p.root / "README.md").read_text() == "my unsaved edit\n"


@pytest.mark.parametrize("bad", ["/etc", "..", "../x", ".git", ".", "README.md", ".loopkit"])
def test_unsafe_reset_paths_are_refused(tmp_path: Path, bad: str) -> None:
    p = make_project(tmp_path, GOOD)
    proc = loop(p, "--reset-path", bad)
    assert proc.returncode == 4, fail_message(proc)
    assert "RESET_PATHS" in proc.stderr
    assert p.worker_calls() == 0


def test_without_jq_the_python_reader_gives_the_same_loop(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD_THEN_GOOD)
    proc = loop(p, env={"LK_JSON": "python"})
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 2


def test_cancel_stops_and_leaves_the_tree(tmp_path: Path) -> None:
    body = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
import subprocess
subprocess.run(["lk", "cancel", "--reason", "stop please"], check=True)
"""
    # The worker stands in for a person who cancels meanwhile: in the sandbox it could not
    # reach the state folder (tests/adversarial/test_control_files.py).
    p = make_project(tmp_path, body, sandbox={"mode": "off"})
    proc = loop(p)
    assert proc.returncode == 30, fail_message(proc)
    assert (p.root / "src/value.txt").read_text() == "bad\n"
    assert p.loopkit_refs()
    assert p.worker_calls() == 1


@pytest.mark.parametrize("where", ["attempt", "base"])
def test_cancel_ends_a_running_check_at_once(tmp_path: Path, where: str) -> None:
    # Naive variant caught: the cancellation seen only at the next boundary, after the
    # checks ran to their end (the loop exited 12 s after the worker had stopped) -- the
    # attempt's own checks, or the base's, run beside the worker.
    import glob
    import os
    import subprocess
    import time

    marker = f"61.{os.getpid() % 1000:03d}"  # the check's sleep, told apart from others'
    slow_on = "-f" if where == "attempt" else "! -f"  # the worker writes src/value.txt
    # The base's run starts half a second into the worker's turn: a worker that takes
    # its time (as a model does) has it run beside it.
    turn = "time.sleep(5)\n" if where == "base" else ""
    p = make_project(
        tmp_path,
        turn + 'Path("src").mkdir(exist_ok=True)\nPath("src/value.txt").write_text("good\\n")\n',
        checks=[{"name": "slow", "run": f"if [ {slow_on} src/value.txt ]; then echo started; "
                 f"sleep {marker}; fi", "timeout": 120},
                {"name": "after", "run": "echo never", "timeout": 30}],
    )  # fmt: skip
    loop_sh = subprocess.Popen(
        [str(RECIPES / "loop.sh"), "--contract", "loop.yaml", "--task-id", "fix-value",
         "--task", "Fix"],
        cwd=p.root, env=recipe_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        below = ["baseline"] if where == "base" else []
        logs = str(p.root.joinpath(".loopkit", "artifacts", "*", *below, "verify-01-slow.log"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and loop_sh.poll() is None:
            if any("started" in Path(f).read_text() for f in glob.glob(logs, recursive=True)):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the slow check never started")
        asked = time.monotonic()
        subprocess.run([str(BIN / "lk"), "cancel", "--reason", "stop now"], cwd=p.root,
                       env=recipe_env(), check=True, capture_output=True)  # fmt: skip
        stdout, stderr = loop_sh.communicate(timeout=60)
        took = time.monotonic() - asked
    finally:
        loop_sh.kill()
    assert loop_sh.returncode == 30, f"exit {loop_sh.returncode}\n{stdout}\n{stderr}"
    assert took < 61, f"the loop ended {took:.1f} s after lk cancel"  # the check sleeps 61 s
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout == "", "the check's process outlived the cancellation"
    assert p.git("log", "--format=%s").count("\n") == 1  # nothing committed
    if where == "attempt":
        assert (p.root / "src/value.txt").read_text() == "good\n"  # nothing lost
        verify = p.docs("fix-value", "verify")[-1]["verify"]
        assert verify["checks"][0]["cancelled"] is True and verify["passed"] is False
        assert verify["skipped"] == ["after"]
        assert "slow failed (ended by lk cancel)" in stderr
    else:  # a cut-short base run is never kept as the base's results
        assert not list((p.root / ".loopkit").rglob("baseline/*.json"))


def test_a_home_path_in_the_sandbox_is_the_home_not_a_folder_named_tilde(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    body = 'Path("src").mkdir(exist_ok=True)\nPath("src/value.txt").write_text("good\\n")\n'
    p = make_project(
        tmp_path, body, sandbox={"writable": [str(tmp_path / "worker"), "~/.cache/lk"]}
    )
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "fix-value", "--task", "Fix",
                 env={"HOME": str(home)})  # fmt: skip
    assert proc.returncode == 0, fail_message(proc)
    assert not (p.root / "~").exists()  # was: a folder named ~ in the repository
    assert (home / ".cache" / "lk").is_dir()
    assert "~" not in p.files()


def test_an_exhausted_budget_parks_and_saves_the_last_attempt(tmp_path: Path) -> None:
    # Naive variant caught: treating exit 22 like a retry (the loop never ends) or like
    # success; and reverting without saving the last attempt's tree first.
    body = 'Path("src").mkdir(exist_ok=True)\nPath("src/value.txt").write_text(f"bad {n}\\n")\n'
    p = make_project(tmp_path, body, budgets={"attempts": 1})
    proc = loop(p)
    assert proc.returncode == 22, fail_message(proc)
    assert p.worker_calls() == 1
    assert not (p.root / "src").exists()
    ref = p.loopkit_refs()[-1]  # every attempt is saved; the last one is the park's
    assert p.git("show", f"{ref}:src/value.txt") == "bad 1\n"
    memory = (p.root / "MEMORY.md").read_text()
    assert "parked: fix-value (budget_exhausted)" in memory
    assert p.git("status", "--porcelain") == ""


def test_a_worker_that_commits_on_its_own_stops_the_loop_and_loses_nothing(tmp_path: Path) -> None:
    # Naive variants caught: `git reset --hard BASE` throws the worker's commit off the
    # branch (and with it anything else committed meanwhile); `git reset --hard HEAD` keeps
    # a failed attempt the worker committed itself. The branch moved: the park refuses,
    # the tree is saved, nothing is reset, the loop stops and says why.
    body = """
import subprocess
Path("src").mkdir(exist_ok=True)
if n == 1:
    Path("src/value.txt").write_text("committed by the worker\\n")
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-qm", "worker's own commit"], check=True)
Path("src/later.txt").write_text("uncommitted\\n")
sys.exit(9)
"""
    # Without a sandbox: in one, .git is read-only to the worker.
    p = make_project(tmp_path, body, sandbox={"mode": "off"})
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 40, fail_message(proc)
    assert "the revert of fix-value refused: the branch moved" in proc.stderr
    assert p.git("log", "-1", "--pretty=%s").strip() == "worker's own commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert (p.root / "src/later.txt").read_text() == "uncommitted\n"  # nothing reverted
    ref = p.loopkit_refs()[-1]  # every attempt is saved; the last one is the park's
    assert p.git("rev-parse", f"{ref}~1").strip() == p.head()  # the worker's commit kept
    assert {"src/value.txt", "src/later.txt"} <= p.files(ref)
    assert ref in proc.stderr
    assert "parked" not in (p.root / "MEMORY.md").read_text()


def test_reset_paths_never_follow_a_symlink_out_of_the_repository(tmp_path: Path) -> None:
    # Naive variant caught: `rm -rf "$root/$path"` after an attempt turned a parent folder
    # into a symlink to somewhere else -- the wipe would land outside the repository.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cache.db").write_text("not yours\n")
    body = f"""
import os, shutil
shutil.rmtree("store")
os.symlink({str(outside)!r}, "store")
sys.exit(3)
"""
    p = make_project(tmp_path, body, gitignore="store\n")
    (p.root / "store").mkdir()
    (p.root / "store" / "cache.db").write_text("drift\n")
    proc = loop(p, "--reset-path", "store/cache.db")
    assert proc.returncode == 21, fail_message(proc)
    assert (outside / "cache.db").read_text() == "not yours\n"
    assert "outside the repository" in proc.stderr


def test_reset_paths_refuse_a_symlink_at_start(tmp_path: Path) -> None:
    p = make_project(tmp_path, GOOD, gitignore="data\n")
    (tmp_path / "elsewhere").mkdir()
    (p.root / "data").symlink_to(tmp_path / "elsewhere")
    proc = loop(p, env={"RESET_PATHS": "data/*"})  # quoted, never globbed
    assert proc.returncode == 4, fail_message(proc)
    assert "symlink" in proc.stderr
    assert p.worker_calls() == 0


def test_one_loop_per_work_tree_a_lock_of_a_loop_that_is_gone_is_taken_over(
    tmp_path: Path,
) -> None:
    # Naive variants caught: no lock (two loops park each other's work); a lock file that
    # a killed loop leaves behind forever; a pid check alone (a reused pid holds the lock).
    import os

    p = make_project(tmp_path, GOOD)
    lock = p.lock()
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")  # this test's own process: alive
    proc = loop(p)
    assert proc.returncode == 4, fail_message(proc)
    assert f"another loop (pid {os.getpid()}) is running in this work tree" in proc.stderr
    assert p.worker_calls() == 0 and p.run_dirs("fix-value") == []
    # The same pid, but a process that started at another time: a reused pid, not the loop.
    (lock / "started").write_text("Thu Jan  1 00:00:00 1970\n")
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert "took over the lock of a loop that is gone" in proc.stderr
    assert not lock.exists()  # released on exit
    lock.mkdir()
    (lock / "pid").write_text("999999999\n")  # no such process
    proc = loop(p, task="again")
    assert "took over the lock of a loop that is gone (pid 999999999)" in proc.stderr
    assert not lock.exists()


def test_the_early_start_check_leaves_nothing_behind_and_a_dirty_tree_is_still_refused(
    tmp_path: Path,
) -> None:
    # lk task begin checks the tree once it holds the lock, and refuses a dirty one. Naive
    # variants caught: its scratch answer left in the git folder when the loop stops
    # early (a lock held, a bad contract, a dirty tree); an answer taken before the state
    # folder existed trusted as "dirty" or "clean" without a second look.
    import os

    p = make_project(tmp_path, GOOD)

    def scratch() -> list[str]:
        return sorted(n for n in os.listdir(p.root / ".git") if n.startswith("loopkit-recipe"))

    (p.root / "README.md").write_text("my unsaved edit\n")
    proc = loop(p)
    assert proc.returncode == 4 and "uncommitted changes" in proc.stderr, fail_message(proc)
    assert scratch() == []
    (p.root / "README.md").unlink()
    p.git("checkout", "-q", "--", "README.md")
    bad = tmp_path / "bad.yaml"  # outside the work tree: the tree stays clean
    bad.write_text("version: 1\ncriteria: nope\n")
    proc = p.run("loop.sh", "--contract", str(bad), "--task-id", "t", "--task", "x")
    assert proc.returncode == 3, fail_message(proc)
    assert scratch() == []
    lock = p.lock()
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")  # a live loop holds it
    proc = loop(p)
    assert proc.returncode == 4 and "another loop" in proc.stderr, fail_message(proc)
    assert scratch() == []
    (lock / "pid").unlink()
    lock.rmdir()
    # First run on a fresh clone: no state folder yet when the early walk starts.
    assert not p.lock().exists()
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert scratch() == []


@pytest.mark.parametrize("kind", ["none", "garbage", "blob", "commit", "missing"])
def test_a_decided_document_naming_no_tree_commits_nothing(tmp_path: Path, kind: str) -> None:
    # lk task land asks git only once the commit fails whether the tree is the fault.
    # Naive variants caught: committing whatever verify.tree names (a commit's id, a
    # blob's), or a failed commit reported as a missing identity when the tree is.
    import subprocess

    from tests.helpers.recipes import recipe_env

    p = make_project(tmp_path, GOOD)
    head = p.head()
    blob = p.git("hash-object", "-w", "README.md").strip()
    tree = {"none": "", "garbage": "not-a-tree", "blob": blob, "commit": head,
            "missing": "0" * 40}[kind]  # fmt: skip
    doc = tmp_path / "decided.json"
    doc.write_text(json.dumps({
        "kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x", "kind": "task"},
        "verify": {"tree": tree}, "decision": {"outcome": "complete", "attempt": 1},
    }))  # fmt: skip
    script = 'lk task begin --task-id t --owner $$ >/dev/null && lk task land "$1"'
    done = subprocess.run(
        ["bash", "-c", script, "-", str(doc)], cwd=p.root, capture_output=True, text=True,
        env=recipe_env(), check=False,
    )  # fmt: skip
    assert done.returncode == 40, done.stderr
    assert "names no tree its checks ran on" in done.stderr
    assert p.head() == head  # nothing committed


def _attempts_running(root: Path) -> list[int]:
    """The `lk attempt` processes working under ``root``."""
    import os

    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if b"attempt" in argv and cwd.startswith(str(root)):
            found.append(int(pid))
    return found


def test_each_round_is_one_lk_attempt_and_each_decision_one_lk_task_step(tmp_path: Path) -> None:
    # The recipe is the commands and nothing else: the lock, the start, each round, each
    # decision's step and the end are one loopkit command each (no library of its own, no
    # lk workspace of its own), and no lk attempt outlives the loop. Naive variants caught:
    # a recipe that asks git or lk workspace itself; one that leaves the lock (no end); one
    # whose red round is not saved. A bad contract is refused in lk's own words.
    import os
    import stat

    from tests.helpers.recipes import BIN

    calls = tmp_path / "lk-calls"
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    lk = wrap / "lk"
    lk.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1 $2\" >> '{calls}'\nexec '{BIN / 'lk'}' \"$@\"\n")
    lk.chmod(lk.stat().st_mode | stat.S_IXUSR)
    path = f"{wrap}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"
    # By default the ratchet shows: begin, each round, each round's step (save, then land,
    # which releases the lock itself), no `lk task end` after a success.
    (tmp_path / "shown").mkdir()
    shown = make_project(tmp_path / "shown", BAD_THEN_GOOD)
    proc = loop(shown, env={"PATH": path})
    assert proc.returncode == 0, fail_message(proc)
    assert calls.read_text().splitlines() == [
        "task begin", "attempt --keep", "task save", "attempt --keep", "task land",
    ]  # fmt: skip
    assert shown.git("show", "HEAD:src/value.txt") == "good\n" and not shown.lock().exists()
    calls.unlink()
    state = tmp_path / "elsewhere"
    p = make_project(tmp_path, BAD_THEN_GOOD)
    proc = loop(p, "--fast", env={"PATH": path, "LOOPKIT_STATE_DIR": str(state)})
    assert proc.returncode == 0, fail_message(proc)
    # --fast: round 1 runs inside begin (--attempt), round 2 is one lk attempt; each
    # round's step (save, then land, which releases the lock itself) is taken by that
    # process (--settle): no `lk task` of its own, no `lk task end` after a success.
    assert calls.read_text().splitlines() == ["task begin", "attempt --keep"]
    saved = p.git("for-each-ref", "--format=%(refname)", "refs/loopkit/").split()
    assert any(ref.endswith("/1") for ref in saved), saved  # the red round's tree
    assert p.worker_calls() == 2 and p.git("show", "HEAD:src/value.txt") == "good\n"
    assert (state / "ledger.jsonl").is_file() and not p.state().exists()
    log = (state / "recipes.log").read_text()
    assert "round 1: lk attempt exited 10" in log and "round 2: lk attempt exited 0" in log
    assert _attempts_running(tmp_path) == [] and not p.lock().exists()

    (tmp_path / "bad").mkdir()
    p = make_project(tmp_path / "bad", GOOD)
    (p.root / "loop.yaml").write_text("version: 1\nobjective: [\n")
    proc = loop(p, env={"PATH": path}, timeout=60)
    assert proc.returncode == 3, fail_message(proc)
    assert "lk: error:" in proc.stderr and "loop.yaml" in proc.stderr, proc.stderr
    assert not p.lock().exists() and p.worker_calls() == 0
