"""After a landing, the work tree is a checkout of the commit, attributes included: a file
under ``ident`` (or another conversion on checkout) holds what a fresh clone of the branch
writes, not the text the worker left (git's stored form, which ``git status`` finds
clean all the same)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# The worker writes the file as git stores it: "$Id$" unexpanded.
WORKER = """
Path("src/value.txt").write_text("$Id$\\ngood\\n")
Path("src/new.txt").write_text("$Id$\\nnew\\n")
"""
CHECKS = [{"name": "good", "run": "grep -qx good src/value.txt", "timeout": 30}]


def test_a_landed_file_under_ident_is_what_a_clone_checks_out(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        WORKER,
        tasks="- [ ] Make value good {#value}\n",
        checks=CHECKS,
        files={".gitattributes": "*.txt ident\n", "src/value.txt": "$Id$\nbad\n"},
    )
    done = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "value", "--task", "Fix",
                 "--tasks", "TASKS.md")  # fmt: skip
    assert done.returncode == 0, fail_message(done)
    assert p.git("log", "-1", "--format=%s", "HEAD~1").startswith("loopkit: value:")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(p.root), str(clone)], check=True)
    for rel in ("src/value.txt", "src/new.txt"):
        mine, theirs = (p.root / rel).read_text(), (clone / rel).read_text()
        assert theirs.startswith("$Id: ") and mine == theirs, (rel, mine, theirs)
    assert p.git("status", "--porcelain") == ""
