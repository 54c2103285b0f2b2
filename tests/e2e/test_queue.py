"""The merge queue (lk queue): real attempts in worktrees, queued, each landed only when
verified on top of what landed before it; a red or conflicting one goes back to its task."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopkit.boundary import sandbox
from tests.helpers.queue import attempt, doc, lk, out
from tests.helpers.recipes import make_project, recipe_env, write_worker

pytestmark = pytest.mark.slow

# set-a and set-b each raise one number from 1 to 2: each green alone (2+1 <= 3), red
# together (2+2). Told that it was red on top of what landed, set-b keeps b at 1 and
# writes a note instead. edit-a sets a to 0: green alone, a conflict with set-a.
WORKER = """
if task == "set-a":
    Path("src/a.txt").write_text("2\\n")
elif task == "set-b":
    if "on top of what landed" in handoff:
        Path("src/b-note.txt").write_text("b stays 1: a is 2 now\\n")
    else:
        Path("src/b.txt").write_text("2\\n")
elif task == "edit-a":
    Path("src/a.txt").write_text("0\\n")
elif task == "add-c":
    Path("src/c.txt").write_text("c\\n")
"""
SUM = {"name": "sum", "run": "test $(( $(cat src/a.txt) + $(cat src/b.txt) )) -le 3", "timeout": 30}
TASKS = "- [ ] do set-a {#set-a}\n- [ ] do set-b {#set-b}\n- [ ] do add-c {#add-c}\n"


def _project(tmp_path: Path, **kw: object):
    kw.setdefault("checks", [SUM])
    return make_project(
        tmp_path,
        WORKER,
        files={"src/a.txt": "1\n", "src/b.txt": "1\n"},
        tasks=TASKS,
        **kw,  # type: ignore[arg-type]
    )


def _add(p, decided: Path) -> dict:
    done = lk(p, "queue", "add", str(decided), "--tasks", "TASKS.md")
    assert done.returncode == 0, done.stderr
    return out(done)["entries"][0]


def test_green_alone_red_together_never_lands_and_goes_back_to_its_task(tmp_path: Path) -> None:
    p = _project(tmp_path)
    base = p.head()
    a, b = attempt(p, "set-a", base=base), attempt(p, "set-b", base=base)
    assert doc(a)["decision"]["outcome"] == doc(b)["decision"]["outcome"] == "complete"
    _add(p, a)
    _add(p, b)
    assert p.head() == base  # queuing never moves the branch

    done = lk(p, "queue", "land")
    assert done.returncode == 1, done.stderr
    result = out(done)
    assert [e["task"] for e in result["landed"]] == ["set-a"]
    assert result["landed"][0]["verification"] == "entry"  # its own tree on its own base
    (back,) = result["returned"]
    assert back["task"] == "set-b" and "red on top of" in back["reason"]
    # Nothing red landed: the branch holds a's change and b as it was, and the checkout too.
    assert p.git("show", "HEAD:src/a.txt") == "2\n" and p.git("show", "HEAD:src/b.txt") == "1\n"
    assert (p.root / "src/a.txt").read_text() == "2\n"
    assert p.git("status", "--porcelain", "--untracked-files=no") == ""
    assert p.task_line("set-a").startswith("- [x]") and p.task_line("set-b").startswith("- [ ]")
    # The verified commit holds exactly the tree the attempt's checks ran on.
    assert p.git("rev-parse", "HEAD~1^{tree}").strip() == doc(a)["verify"]["tree"]

    # The returned document is the task's previous attempt: red, with the feedback.
    returned = json.loads(Path(back["document"]).read_text())
    assert returned["decision"]["outcome"] == "retry"
    assert returned["verify"]["passed"] is False
    retry = attempt(p, "set-b", previous=Path(back["document"]), n=2)
    assert "on top of what landed before it" in p.handoff(3)
    assert doc(retry)["decision"]["outcome"] == "complete", doc(retry)["decision"]
    _add(p, retry)
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    assert [e["task"] for e in out(done)["landed"]] == ["set-b"]
    assert p.git("show", "HEAD:src/b-note.txt")
    assert p.task_line("set-b").startswith("- [x]")
    statuses = [(e["task"], e["status"]) for e in out(lk(p, "queue", "status"))["entries"]]
    assert statuses == [("set-a", "landed"), ("set-b", "returned"), ("set-b", "landed")]


def test_a_conflict_is_returned_with_its_paths_never_resolved(tmp_path: Path) -> None:
    p = _project(tmp_path)
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    _add(p, attempt(p, "edit-a", base=base))
    done = lk(p, "queue", "land")
    assert done.returncode == 1, done.stderr
    (back,) = out(done)["returned"]
    assert back["conflicts"] == ["src/a.txt"]
    assert p.git("show", "HEAD:src/a.txt") == "2\n"
    feedback = json.loads(Path(back["document"]).read_text())["decision"]["feedback"]
    assert "conflicts with what landed before it in: src/a.txt" in feedback


def test_a_rebuilt_entry_is_verified_on_the_tip_and_a_verified_tree_is_not_run_again(
    tmp_path: Path,
) -> None:
    p = _project(tmp_path)
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    c = attempt(p, "add-c", base=base)
    _add(p, c)
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    first, second = out(done)["landed"]
    assert second["verification"] == "ran"  # a new tree: lk-verify ran on it
    assert second["tree"] != doc(c)["verify"]["tree"]
    assert second["tip"] == first["commit"]
    assert p.git("rev-parse", f"{second['verified']}^{{tree}}").strip() == second["tree"]
    assert {"src/a.txt", "src/c.txt"} <= p.files()
    # The same tree verified again (a rerun after a stop) reuses that verification.
    cached = list((p.root / ".git/loopkit/queue/verified").iterdir())
    assert len(cached) == 1 and json.loads(cached[0].read_text())["tree"] == second["tree"]


def test_the_branch_moving_under_the_lander_is_rebuilt_never_overwritten(tmp_path: Path) -> None:
    # A check that, the first time it runs, lands a commit of its own on main (another
    # lander, a person's push): the compare-and-swap must fail and the entry be rebuilt.
    mover = tmp_path / "move-once"
    # Without a sandbox the check reaches the repository's git folder by its path (its own
    # folder is the clean room's).
    move = (
        f"if [ -f {mover} ]; then rm {mover}; r={tmp_path / 'repo' / '.git'}; "
        'c=$(git --git-dir="$r" commit-tree "$(git --git-dir="$r" rev-parse main^{tree})" '
        '-p main -m sneaked); git --git-dir="$r" update-ref refs/heads/main "$c"; fi; true'
    )
    p = _project(
        tmp_path,
        sandbox={"mode": "off"},
    )
    data = json.loads((p.root / "loop.yaml").read_text())
    data["criteria"].append({"name": "move", "run": move, "timeout": 30})
    (p.root / "loop.yaml").write_text(json.dumps(data))
    p.git("commit", "-qam", "a check that moves main once")
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    _add(p, attempt(p, "add-c", base=base))
    mover.write_text("1")  # armed once the attempts ran: only the lander's check moves main
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    assert not mover.exists()
    assert "moved while it was verified" in done.stderr
    log = p.git("log", "--format=%s").splitlines()
    assert "sneaked" in log  # kept: the landing went on top of it
    assert log[:2] == ["loopkit: mark add-c done", "loopkit: add-c: do add-c"]


def test_add_refuses_what_is_not_green_and_land_refuses_a_second_lander(tmp_path: Path) -> None:
    p = _project(tmp_path)
    red = tmp_path / "red.json"
    d = doc(attempt(p, "set-a"))
    d["decision"]["outcome"] = "retry"
    red.write_text(json.dumps(d))
    done = lk(p, "queue", "add", str(red))
    assert done.returncode == 40 and "only a complete attempt is queued" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert p.git("for-each-ref", "refs/loopkit/queue/") == ""
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    done = lk(p, "queue", "add", str(junk))
    assert done.returncode == 3 and "junk.json" in done.stderr
    # A live lander holds the lock (its flock, and its pid named): a second one is refused
    # with one line (exit 4).
    folder = p.root / ".git/loopkit/queue"
    (folder / "loop.lock").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder / "lander.flock"), str(folder / "loop.lock")],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline()  # it holds the flock
        done = lk(p, "queue", "land")
        assert done.returncode == 4 and f"another lander (pid {holder.pid})" in done.stderr
    finally:
        holder.kill()
        holder.wait()
    done = lk(p, "queue", "land")  # its owner gone, the lock is taken over
    assert done.returncode == 0, done.stderr


#: A lander as the lock sees one: its flock held, its pid in loop.lock.
HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
open(os.path.join(sys.argv[2], "pid"), "w").write(f"{os.getpid()}\\n")
print("held", flush=True)
time.sleep(60)
"""

#: A git first on PATH that stops at the landing's move of the branch (and says so).
STALL = """#!/bin/bash
case " $* " in *" update-ref "*" refs/heads/"*) echo $$ >"$(dirname "$0")/stalled"; exec sleep 300 ;; esac
exec __GIT__ "$@"
"""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_killed_lander_its_parent_never_reaps_does_not_block_the_queue(tmp_path: Path) -> None:
    """kill -9 of a lander in the middle of its landing, under a parent that never reaps
    it (a container whose pid 1 does not): the zombie holds no lock, the next lander lands."""
    p = _project(tmp_path)
    _add(p, attempt(p, "set-a"))
    shim = tmp_path / "stall"
    shim.mkdir()
    (shim / "git").write_text(STALL.replace("__GIT__", shutil.which("git") or "/usr/bin/git"))
    (shim / "git").chmod(0o755)
    env = recipe_env()
    env["PATH"] = f"{shim}:{env['PATH']}"
    # sh starts the lander and becomes a sleep: a parent that never waits for its child
    parent = subprocess.Popen(
        ["sh", "-c", f'lk queue land >/dev/null 2>&1 & echo $! >"{shim}/lander"; exec sleep 300'],
        cwd=p.root, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(1200):
            if (shim / "stalled").exists() and (shim / "lander").exists():
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the lander never reached its landing")
        lander = int((shim / "lander").read_text())
        os.kill(lander, signal.SIGKILL)
        os.kill(int((shim / "stalled").read_text()), signal.SIGKILL)
        for _ in range(100):
            if _state(lander) == "Z":
                break
            time.sleep(0.1)
        assert _state(lander) == "Z"
        assert (p.root / ".git/loopkit/queue/loop.lock/pid").read_text().strip() == str(lander)
        done = lk(p, "queue", "land")
        assert _state(lander) == "Z"  # still a zombie: it was taken for dead all the same
        assert done.returncode == 0, done.stderr
        assert (
            f"took over the queue's lock from a lander that is gone (pid {lander})" in done.stderr
        )
        assert p.git("log", "--format=%s", "main").splitlines()[:2] == [
            "loopkit: mark set-a done",
            "loopkit: set-a: do set-a",
        ]
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


# A worker without a sandbox that moves main itself: a red commit (b = 5) made with git's
# plumbing in a scratch index and put on main with `git update-ref`; its own change is
# green. A person's commit outside loopkit, green, is verified and built on.
EVIL = """
import os, subprocess
def g(*a, **kw):
    return subprocess.run(["git", *a], check=True, capture_output=True, text=True, **kw).stdout.strip()
env = {**os.environ, "GIT_INDEX_FILE": str(STATE / "evil-index")}
g("read-tree", "main", env=env)
blob = g("hash-object", "-w", "--stdin", input="5\\n")
g("update-index", "--cacheinfo", f"100644,{blob},src/b.txt", env=env)
red = g("commit-tree", g("write-tree", env=env), "-p", "main", "-m", "all fine")
g("update-ref", "refs/heads/main", red)
Path("src/c.txt").write_text("c\\n")
"""


def test_the_queue_builds_only_on_a_tip_it_landed_or_verified(tmp_path: Path) -> None:
    p = _project(tmp_path, sandbox={"mode": "off"})
    assert lk(p, "queue", "land").returncode == 0  # the first lander trusts the tip it finds
    # A person's green commit made outside loopkit: verified, then built on.
    (p.root / "README.md").write_text("# project, edited\n")
    p.git("commit", "-qam", "a person's edit")
    _add(p, attempt(p, "set-a"))
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    assert "not landed by the queue) is green" in done.stderr
    assert p.git("log", "--format=%s", "-3").splitlines() == [
        "loopkit: mark set-a done", "loopkit: set-a: do set-a", "a person's edit",
    ]  # fmt: skip
    # The worker's red tip: refused with one line, recorded, nothing built on it.
    write_worker(p.scratch, WORKER.replace('elif task == "add-c":', 'elif task == "no":') + EVIL)
    _add(p, attempt(p, "add-c"))
    red = p.head()
    assert p.git("log", "-1", "--format=%s", "main").strip() == "all fine"
    done = lk(p, "queue", "land")
    assert done.returncode == 40, done.stderr
    assert "a commit the queue did not land, and its checks fail (sum)" in done.stderr
    assert done.stderr.count("\n") <= 2 and "Traceback" not in done.stderr
    assert p.git("rev-parse", "main").strip() == red  # nothing landed on it
    record = json.loads((p.root / ".git/loopkit/queue/untrusted.jsonl").read_text())
    assert record["tip"] == red and record["failed"] == ["sum"]


def test_a_filter_driver_in_the_repositorys_config_never_runs_in_the_lander(
    tmp_path: Path,
) -> None:
    # The queue's room is a worktree kept inside the git folder: the config it shares with
    # the checkout defines filter drivers, and none may run in the lander's git calls
    # (the room's sync, lk-verify's hashes there, the checkout brought along).
    p = _project(tmp_path)
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    _add(p, attempt(p, "add-c", base=base))  # rebuilt on set-a: verified in the room
    mark = tmp_path / "filter-ran"
    script = tmp_path / "filter"
    script.write_text(f'#!/bin/sh\necho "$@" >> {mark}\nexec cat\n')
    script.chmod(0o755)
    with open(p.root / ".git/config", "a") as f:
        f.write(f'[filter "x"]\n\tclean = {script}\n\tsmudge = {script}\n')
        f.write(f'[filter "p"]\n\tprocess = {script}\n\trequired = true\n')
    (p.root / ".git/info").mkdir(exist_ok=True)
    (p.root / ".git/info/attributes").write_text("*.txt filter=x\n*.md filter=p\n")
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    assert [e["verification"] for e in out(done)["landed"]] == ["entry", "ran"]
    assert (p.root / "src/c.txt").read_text() == "c\n"  # the checkout brought along
    assert not mark.exists(), f"a filter driver ran in the lander:\n{mark.read_text()}"


def test_the_landers_checks_run_in_the_checks_sandbox(tmp_path: Path) -> None:
    # The checks run the worker's code: on the tip, as in its attempt, they run in the
    # clean room inside the checks' sandbox -- nothing outside it written, not the
    # repository's checkout nor its git folder (the record of trusted tips, the branch).
    available, reason = sandbox.probe()
    if not available:
        pytest.skip(f"no sandbox: {reason}")
    outside = tmp_path / "escaped"
    real = tmp_path / "repo"
    escape = (
        f"echo escaped >> {outside}; echo escaped >> {real}/src/escaped.txt; "
        f"git --git-dir={real}/.git update-ref refs/loopkit/trusted/main HEAD; true"
    )
    p = _project(tmp_path, checks=[SUM, {"name": "escape", "run": escape, "timeout": 30}])
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    _add(p, attempt(p, "add-c", base=base))  # rebuilt on set-a: its checks run by the lander
    assert not outside.exists()  # the attempts' own checks ran in their sandbox
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    assert [e["verification"] for e in out(done)["landed"]] == ["entry", "ran"]
    assert not outside.exists(), "a check the lander ran wrote outside its sandbox"
    assert not (real / "src/escaped.txt").exists()
    assert p.git("rev-parse", "refs/loopkit/trusted/main") == p.git("rev-parse", "main")
    (record,) = (real / ".git/loopkit/queue/verified").iterdir()
    verify = json.loads(record.read_text())
    assert verify["clean_room"] is True and verify["sandbox"]["used"] is True
