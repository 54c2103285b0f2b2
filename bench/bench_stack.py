"""lk stack's restack: a slice replayed onto its new parent by plumbing, against the
porcelain a person would run for the same result without touching their checkout.

A repository of 2,000 files (BENCH_STACK_FILES); a slice that changes one file, built on a
parent that then changed (a squash merge below it). ``onto.move`` (three throwaway commits and git's
``merge-tree --write-tree``: no work tree, no index) is timed against ``git worktree add
--detach`` + ``git rebase --onto`` + ``git worktree remove`` (what a restack needs when it
must leave the user's checkout alone). Target: plumbing at most 0.25x the porcelain. The
checkout lk stack then verifies each moved tree in (a detached worktree) is timed for
information: it, not the move, is a restack's cost per slice.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopkit.forge import onto  # noqa: E402

FILES = int(os.environ.get("BENCH_STACK_FILES", "2000"))
ROUNDS = int(os.environ.get("BENCH_STACK_ROUNDS", "5"))
TARGET = 0.25
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@localhost",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="loopkit-bench-stack-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        for i in range(FILES):
            d = repo / f"d{i % 100}"
            d.mkdir(exist_ok=True)
            (d / f"f{i}.txt").write_text(f"line {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        fork = commit(repo, "below.txt", "below\n")
        head = commit(repo, "d1/f1.txt", "the slice\n")
        git(repo, "checkout", "-q", "--detach", fork)
        new_parent = commit(repo, "below.txt", "below, squashed\n")
        git(repo, "checkout", "-q", "main")

        plumbing, porcelain, checkout = [], [], []
        for i in range(ROUNDS):
            t0 = time.perf_counter()
            moved = onto.move(repo, fork=fork, head=head, onto=new_parent)
            plumbing.append(time.perf_counter() - t0)
            room = Path(tmp) / f"room{i}"
            t0 = time.perf_counter()
            git(repo, "worktree", "add", "-q", "--detach", str(room), head)
            git(room, "rebase", "-q", "--onto", new_parent, fork)
            rebased = git(room, "rev-parse", "HEAD^{tree}")
            git(repo, "worktree", "remove", "--force", str(room))
            porcelain.append(time.perf_counter() - t0)
            if git(repo, "rev-parse", f"{moved}^{{tree}}") != rebased:
                raise SystemExit("the plumbing and the rebase disagree on the tree")
            t0 = time.perf_counter()
            git(repo, "worktree", "add", "-q", "--detach", str(room), moved)
            git(repo, "worktree", "remove", "--force", str(room))
            checkout.append(time.perf_counter() - t0)
        a, b, c = (statistics.median(x) for x in (plumbing, porcelain, checkout))
        ratio = a / b
        print(f"restack one slice in a {FILES:,}-file repository (median of {ROUNDS}):")
        print(f"  plumbing (onto.move)               {a * 1000:7.1f} ms")
        print(f"  worktree + rebase --onto + remove  {b * 1000:7.1f} ms")
        print(f"  ratio {ratio:.3f}x (target <= {TARGET}x)")
        print(f"  the verification's detached checkout, for information: {c * 1000:.1f} ms")
        return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
