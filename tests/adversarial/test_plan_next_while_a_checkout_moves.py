"""lk-plan next while a lander moves the checkout under it (parallel.sh runs both at
once): TASKS.md and the files it names are read as one checkout, never halfway through
git's rewrite of it -- a task marked open again beside the new file it declares, still
there, is not a plan that lies.

The move happens at an exact point, not by chance: a ``sitecustomize`` on the command's
PYTHONPATH holds its first listing of the tree (TASKS.md already read) until the test has
moved the checkout the whole way, as git does (``read-tree -u -m`` under the index's lock,
then HEAD). So the test does not depend on timing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import git

OPEN = (
    "- [ ] Thank {#thank}\n  budget: 5 lines / 1 file\n  scope: NEWS.txt\n  new: NEWS.txt\n  end\n"
)
DONE = OPEN.replace("- [ ]", "- [x]", 1)

#: Loaded at start-up by lk-plan's interpreter: its first listing of the tree says so
#: (``LK_READING``) and waits for the test's move to be whole (``LK_MOVED``).
HOOK = """
import os, time
from pathlib import Path

from loopkit.plan import expanding

_real = expanding.tree_files
_reading, _moved = Path(os.environ["LK_READING"]), Path(os.environ["LK_MOVED"])


def tree_files(root):
    if not _reading.exists():
        _reading.write_text("reading")
        for _ in range(12000):  # two minutes at most
            if _moved.exists():
                break
            time.sleep(0.01)
    return _real(root)


expanding.tree_files = tree_files
"""


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(12000):
        if path.exists() or process.poll() is not None:
            return
        time.sleep(0.01)


def _planned(git_repo: Path) -> dict[str, str]:
    """The plan's commit (the task open) and the landing's (the task done, its new file)."""
    (git_repo / "loop.yaml").write_text(
        'version: 1\nobjective: Thank.\nscope: {writable: ["NEWS.txt"]}\n'
        'criteria: [{name: t, run: "true"}]\n'
    )
    (git_repo / "TASKS.md").write_text(OPEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "plan")
    commits = {"opened": git(git_repo, "rev-parse", "HEAD").strip()}
    (git_repo / "TASKS.md").write_text(DONE)
    (git_repo / "NEWS.txt").write_text("thanks\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "thank landed")
    commits["landed"] = git(git_repo, "rev-parse", "HEAD").strip()
    return commits


@pytest.mark.parametrize(
    ("start", "code"),
    [("opened", 1), ("landed", 0)],
    ids=["a landing moves it forward", "a returned landing moves it back"],
)
def test_lk_plan_next_never_reads_a_checkout_halfway_moved(
    git_repo: Path, tmp_path: Path, start: str, code: int
) -> None:
    commits = _planned(git_repo)
    other = "landed" if start == "opened" else "opened"
    git(git_repo, "checkout", "-q", "--detach", commits[start])

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    reading, moved = tmp_path / "reading", tmp_path / "moved"
    env = {**os.environ, "PYTHONPATH": str(hook), "LK_READING": str(reading)}
    env["LK_MOVED"] = str(moved)
    lk_plan = str(Path(sys.executable).parent / "lk-plan")
    reader = subprocess.Popen(
        [lk_plan, "next", "TASKS.md", "--contract", "loop.yaml"],
        cwd=git_repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for(reading, reader)
    assert reading.exists(), reader.communicate()  # TASKS.md read, the tree not yet listed
    git(git_repo, "read-tree", "-u", "-m", commits[start], commits[other])
    git(git_repo, "update-ref", "--no-deref", "HEAD", commits[other])
    moved.write_text("moved")
    out, err = reader.communicate(timeout=120)
    # What the checkout holds once moved: forward, the task done (1: nothing ready); back,
    # the task open and its new file gone (0: handed out).
    assert reader.returncode == code, err
    if code == 0:
        assert '"thank"' in out


#: Loaded at start-up by lk-plan's interpreter: the first time it asks who holds the
#: index's lock (its wait for the lock is over), it says so (``LK_ASKED``).
ASKING = """
import os
from pathlib import Path

from loopkit import git

_real = git._held_open
_asked = Path(os.environ["LK_ASKED"])


def _held_open(path):
    _asked.write_text("asked")
    return _real(path)


git._held_open = _held_open
"""


def test_lk_plan_next_waits_for_a_live_git_that_holds_the_index_past_its_wait(
    git_repo: Path, tmp_path: Path
) -> None:
    """A git in the middle of a long checkout -- the index's lock held open, the task's new
    file written, TASKS.md not yet -- is waited for past lk-plan's wait for a lock (10 s),
    which is for a lock no process holds (one a killed git left)."""
    landed = _planned(git_repo)["landed"]
    git(git_repo, "checkout", "-q", "--detach", "HEAD~1")
    final = tmp_path / "final-index"  # the index git will write at the end of its checkout
    subprocess.run(
        ["git", "read-tree", landed], cwd=git_repo, env={**os.environ, "GIT_INDEX_FILE": str(final)},
        check=True,
    )  # fmt: skip

    lock = git_repo / ".git" / "index.lock"
    hook, asked = tmp_path / "hook", tmp_path / "asked"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(ASKING)
    env = {**os.environ, "PYTHONPATH": str(hook), "LK_ASKED": str(asked)}
    with open(lock, "wb") as held:  # held open by a live process, as git holds it
        (git_repo / "NEWS.txt").write_text("thanks\n")  # halfway: the new file, the task open
        reader = subprocess.Popen(
            [str(Path(sys.executable).parent / "lk-plan"), "next", "TASKS.md", "--contract", "loop.yaml"],
            cwd=git_repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_for(asked, reader)  # lk-plan's wait is over and it asks who holds the lock
        (git_repo / "TASKS.md").write_text(DONE)  # the rest of the checkout, as git ends it
        held.write(final.read_bytes())
    lock.rename(git_repo / ".git" / "index")
    git(git_repo, "update-ref", "--no-deref", "HEAD", landed)
    _, err = reader.communicate(timeout=120)
    assert asked.exists(), err
    assert reader.returncode == 1, err  # the checkout as git left it: the task done
