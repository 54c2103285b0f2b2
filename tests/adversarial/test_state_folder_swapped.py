"""A worker without the sandbox moves the state folder aside and puts a symlink to a copy
of its own in its place: the same bytes, so the ledger's sha256 and the index's files
match the seal -- but from then on loopkit would keep its ledger, budgets and stat cache
where the worker writes, and `/.loopkit/` in info/exclude (a folder pattern) does not
cover a symlink: `git add -A` would stage it.

The state seal records what the folder itself is: a replaced folder is tampering, and the
attempt is blocked, nothing committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
import os, shutil
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
copy = STATE / "state-copy"
shutil.copytree(".loopkit", copy, symlinks=True)
os.rename(".loopkit", STATE / "state-moved")
os.symlink(copy, ".loopkit")
"""


def test_a_state_folder_swapped_for_a_symlink_is_tampering(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER, sandbox={"mode": "off"})
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert "was replaced" in proc.stderr, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt", check=False) != "good\n"
    assert nothing_unverified_landed(p, before, tmp_path)
