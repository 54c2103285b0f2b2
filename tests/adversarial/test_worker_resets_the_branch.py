"""The worker runs `git reset --soft HEAD~2` (reproduction 8): the user's last two commits
leave the branch while their content stays staged, so a recipe that commits "what is on
disk" lands a commit that quietly drops them from the history, and one that reverts with
`git reset --hard` hides what happened. The recipe must stop (exit 40), say so, save the
tree first, and put the branch back where the task began: every commit on it again, the
files and the index as the worker left them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only to the worker): the recipe on its own.
OFF = {"mode": "off"}

RESET_THEN_FIX = """
import subprocess
if n == 1:
    subprocess.run(["git", "reset", "-q", "--soft", "HEAD~2"], check=True)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


def test_a_worker_that_resets_the_branch_stops_the_loop_and_loses_no_commit(
    tmp_path: Path,
) -> None:
    p = make_project(tmp_path, RESET_THEN_FIX, sandbox=OFF, budgets={"attempts": 2})
    for n in (1, 2):
        (p.root / f"user-{n}.txt").write_text(f"the user's work {n}\n")
        p.git("add", f"user-{n}.txt")
        p.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", f"user commit {n}")
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 40, fail_message(proc)
    assert "refused: the branch moved" in proc.stderr
    assert "it is back at" in proc.stderr
    # The branch is where the task began, the user's commits on it; nothing committed.
    assert p.head() == before
    assert p.git("log", "-1", "--pretty=%s").strip() == "user commit 2"
    # Nothing reverted on disk; the index holds only the worker's change against the head.
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert (p.root / "user-2.txt").exists()
    assert p.git("diff", "--cached", "--name-only").split() in ([], ["src/value.txt"])
    # The tree was saved first, on top of the commit the task began from.
    refs = p.loopkit_refs()
    assert refs
    for ref in refs:
        p.git("merge-base", "--is-ancestor", before, ref)  # raises if not
    assert {"src/value.txt", "user-1.txt", "user-2.txt"} <= p.files(refs[-1])
