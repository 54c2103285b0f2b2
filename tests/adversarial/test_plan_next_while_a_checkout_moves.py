"""lk-plan next while a lander moves the checkout under it (parallel.sh runs both at
once): TASKS.md and the files it names are read as one checkout, never halfway through
git's rewrite of it -- a task marked open again beside the new file it declares, still
there, is not a plan that lies."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from tests.helpers import git

OPEN = (
    "- [ ] Thank {#thank}\n  budget: 5 lines / 1 file\n  scope: NEWS.txt\n  new: NEWS.txt\n  end\n"
)
DONE = OPEN.replace("- [ ]", "- [x]", 1)


def test_lk_plan_next_never_reads_a_checkout_halfway_moved(git_repo: Path) -> None:
    (git_repo / "loop.yaml").write_text(
        'version: 1\nobjective: Thank.\nscope: {writable: ["NEWS.txt", "P/**"]}\n'
        'criteria: [{name: t, run: "true"}]\n'
    )
    (git_repo / "TASKS.md").write_text(OPEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "plan")
    opened = git(git_repo, "rev-parse", "HEAD").strip()
    # What a landing brings: the task marked done, its new file, and enough besides that
    # git's rewrite of the checkout takes a while. git writes in its index's order: the
    # new NEWS.txt, then P/, and TASKS.md last -- halfway, the file is there and the task
    # still open.
    (git_repo / "TASKS.md").write_text(DONE)
    (git_repo / "P").mkdir()
    for i in range(2000):
        (git_repo / "P" / f"{i}.txt").write_text(f"{i}\n")
    (git_repo / "NEWS.txt").write_text("thanks\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "thank landed")
    landed = git(git_repo, "rev-parse", "HEAD").strip()

    stop = threading.Event()

    def lander() -> None:  # the checkout back and forth, as git moves it, now and then
        at, other = landed, opened
        while not stop.wait(0.1):
            subprocess.run(["git", "read-tree", "-u", "-m", at, other], cwd=git_repo, check=True)
            subprocess.run(["git", "update-ref", "HEAD", other], cwd=git_repo, check=True)
            at, other = other, at

    moving = threading.Thread(target=lander)
    moving.start()
    codes = []
    try:
        for _ in range(20):
            done = subprocess.run(
                [str(Path(sys.executable).parent / "lk-plan"), "next", "TASKS.md", "--contract", "loop.yaml"],
                cwd=git_repo, capture_output=True, text=True, check=False,
            )  # fmt: skip
            codes.append((done.returncode, done.stderr.strip().splitlines()[-1:]))
    finally:
        stop.set()
        moving.join()
    # 0: the task handed out (the checkout before the landing); 1: nothing ready (after).
    assert all(code in (0, 1) for code, _ in codes), codes
