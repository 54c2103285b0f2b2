"""A process the worker left running edits the tree after the checks passed (reproduction
4): the recipe must commit the tree the checks ran on, not what is on disk by then, and
lose nothing of what the process wrote.

loopkit ends every descendant of the worker; a process it had started outside its own
tree (`at now`, `systemd-run --user`, a crontab line) is not one. The test plays that
process: the worker only arms it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# The worker writes the right value and arms the process outside.
ARM = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
(STATE / "armed").write_text("yes")
"""

# Once armed, it waits for lk-decide's verdict to be written, then breaks the value --
# between "complete" and the recipe's commit.
LATER = """
import glob, os, sys, time
from pathlib import Path
state, root = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.time() + 60
while time.time() < deadline:
    decided = glob.glob(str(root / ".loopkit/runs/*/*/*-decide.json"))
    if (state / "armed").exists() and any(os.path.getsize(f) for f in decided):
        (root / "src/value.txt").write_text("bad\\n")
        (state / "escaped-wrote").write_text("yes")
        break
    time.sleep(0.005)
"""


def test_the_commit_holds_the_verified_tree_and_the_later_edit_is_saved(tmp_path: Path) -> None:
    p = make_project(tmp_path, ARM)
    before = p.head()
    later = subprocess.Popen([sys.executable, "-c", LATER, str(p.scratch), str(p.root)])
    try:
        proc = loop(p)
        later.wait(timeout=60)
    finally:
        later.kill()
    assert proc.returncode == 0, fail_message(proc)
    assert (p.scratch / "escaped-wrote").exists()
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert nothing_unverified_landed(p, before, tmp_path)
    # Nothing lost: what the process wrote is saved, and the disk holds the commit.
    (ref,) = [r for r in p.loopkit_refs() if r.endswith("-after-verify")]
    assert p.git("show", f"{ref}:src/value.txt") == "bad\n"
    assert p.git("rev-parse", f"{ref}~1").strip() == p.head()
    assert "changed after the checks ran" in proc.stderr and ref in proc.stderr
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert p.git("status", "--porcelain") == ""
