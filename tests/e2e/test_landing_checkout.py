"""After a landing, the work tree is a checkout of the commit, attributes included: a file
under ``ident`` (or another conversion on checkout) holds what a fresh clone of the branch
writes, not the text the worker left (git's stored form, which ``git status`` finds
clean all the same). With the folded steps (``--fast``) the landing asks git nothing when no
attribute can apply; an attribute only in ``.git/info/attributes`` still applies."""

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


def test_an_attribute_outside_the_tree_still_converts_a_fast_landing(tmp_path: Path) -> None:
    """No ``.gitattributes`` in the tree: the rule is in ``.git/info/attributes`` alone,
    which a landing that trusted the tree's listing would miss."""
    p = make_project(
        tmp_path,
        WORKER,
        tasks="- [ ] Make value good {#value}\n",
        checks=CHECKS,
        files={"src/value.txt": "$Id$\nbad\n"},
    )
    (p.root / ".git/info").mkdir(exist_ok=True)
    (p.root / ".git/info/attributes").write_text("*.txt ident\n")
    done = p.run("loop.sh", "--fast", "--contract", "loop.yaml", "--task-id", "value",
                 "--task", "Fix", "--tasks", "TASKS.md")  # fmt: skip
    assert done.returncode == 0, fail_message(done)
    assert p.git("log", "-1", "--format=%s", "HEAD~1").startswith("loopkit: value:")
    for rel in ("src/value.txt", "src/new.txt"):
        blob = p.git("rev-parse", f"HEAD:{rel}").strip()
        assert (p.root / rel).read_text().startswith(f"$Id: {blob} $"), rel
    assert p.git("status", "--porcelain") == ""
