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


@pytest.mark.parametrize(
    ("start", "code"),
    [("opened", 1), ("landed", 0)],
    ids=["a landing moves it forward", "a returned landing moves it back"],
)
def test_lk_plan_next_never_reads_a_checkout_halfway_moved(
    git_repo: Path, tmp_path: Path, start: str, code: int
) -> None:
    (git_repo / "loop.yaml").write_text(
        'version: 1\nobjective: Thank.\nscope: {writable: ["NEWS.txt"]}\n'
        'criteria: [{name: t, run: "true"}]\n'
    )
    (git_repo / "TASKS.md").write_text(OPEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "plan")
    commits = {"opened": git(git_repo, "rev-parse", "HEAD").strip()}
    # What a landing brings: the task marked done and its new file.
    (git_repo / "TASKS.md").write_text(DONE)
    (git_repo / "NEWS.txt").write_text("thanks\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "thank landed")
    commits["landed"] = git(git_repo, "rev-parse", "HEAD").strip()
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
