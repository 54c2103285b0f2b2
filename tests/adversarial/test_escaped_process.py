"""A process the worker left running edits the tree after the checks passed (reproduction
4): the recipe must commit the tree the checks ran on, not what is on disk by then, and
lose nothing of what the process wrote.

loopkit ends every descendant of the worker; a process it had started outside its own
tree (`at now`, `systemd-run --user`, a crontab line) is not one. The test plays that
process: the worker only arms it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import ARM, loop_with_a_later_process, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# The worker writes the right value and arms the process outside, which breaks the value
# once lk-decide's verdict is written -- between "complete" and the recipe's commit.
WORKER = (
    """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    + ARM
)


def test_the_commit_holds_the_verified_tree_and_the_later_edit_is_saved(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER)
    before = p.head()
    proc = loop_with_a_later_process(p, '(root / "src/value.txt").write_text("bad\\n")')
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert nothing_unverified_landed(p, before, tmp_path)
    # Nothing lost: what the process wrote is saved, and the disk holds the commit.
    (ref,) = [r for r in p.loopkit_refs() if r.endswith("-after-verify")]
    assert p.git("show", f"{ref}:src/value.txt") == "bad\n"
    assert p.git("rev-parse", f"{ref}~1").strip() == p.head()
    assert "changed after the checks ran" in proc.stderr and ref in proc.stderr
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert p.git("status", "--porcelain") == ""
