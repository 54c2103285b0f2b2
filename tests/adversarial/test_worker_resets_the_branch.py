"""The worker runs `git reset --soft HEAD~2` (reproduction 8): the user's last two commits
leave the branch while their content stays staged, so a recipe that commits "what is on
disk" lands a green commit that quietly drops them from the history. The commit must
refuse (the branch moved), keep every commit reachable and say how to put the branch back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.recipes_helpers import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only to the worker and nothing it starts
#: outlives it): what the recipe does must hold on its own.
OFF = {"mode": "off"}

RESET_THEN_FIX = """
import subprocess
subprocess.run(["git", "reset", "-q", "--soft", "HEAD~2"], check=True)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


def test_a_worker_that_resets_the_branch_stops_the_loop_and_loses_no_commit(
    tmp_path: Path,
) -> None:
    p = make_project(tmp_path, RESET_THEN_FIX, sandbox=OFF)
    for n in (1, 2):
        (p.root / f"user-{n}.txt").write_text(f"the user's work {n}\n")
        p.git("add", f"user-{n}.txt")
        p.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", f"user commit {n}")
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 40, fail_message(proc)
    assert "the branch moved" in proc.stderr
    assert f"git reset --keep {before}" in proc.stderr  # how to put it back
    # Nothing committed on the rewound branch, nothing reverted on disk.
    assert p.head() == p.git("rev-parse", f"{before}~2").strip()
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert (p.root / "user-2.txt").exists()
    # The user's commits are kept: the saved attempt descends from them.
    (ref,) = p.loopkit_refs()
    p.git("merge-base", "--is-ancestor", before, ref)  # raises if not
    assert {"src/value.txt", "user-1.txt", "user-2.txt"} <= p.files(ref)
