"""lk task land reads HEAD and its branch from git's ref files (no git process): a branch
that moved and was then packed (its loose file gone, ``packed-refs`` naming the new
commit), or a HEAD switched to another branch at the same commit, must still refuse the
landing (40) and leave the branch where the user put it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.recipes import make_project, recipe_env

pytestmark = pytest.mark.slow


def _begin_and_decide(root: Path, doc: Path) -> None:
    begin = subprocess.run(["lk", "task", "begin", "--task-id", "t", "--owner", "1"], cwd=root,
                           capture_output=True, text=True, env=recipe_env())  # fmt: skip
    assert begin.returncode == 0, begin.stderr
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "x.txt").write_text("x\n")
    tree = subprocess.run(["bash", "-c", "git add -A && git write-tree && git reset -q"],
                          cwd=root, capture_output=True, text=True).stdout.strip()  # fmt: skip
    doc.write_text(json.dumps({
        "kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x", "kind": "task"},
        "verify": {"tree": tree}, "decision": {"outcome": "complete", "attempt": 1},
    }))  # fmt: skip


def _land(root: Path, doc: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["lk", "task", "land", str(doc)], cwd=root, capture_output=True,
                          text=True, env=recipe_env())  # fmt: skip


@pytest.mark.parametrize("how", ["commit-then-pack", "switch-branch"])
def test_a_branch_moved_out_of_the_loose_files_sight_refuses_the_landing(
    tmp_path: Path, how: str
) -> None:
    p = make_project(tmp_path, "pass\n")
    doc = tmp_path / "decided.json"
    _begin_and_decide(p.root, doc)
    if how == "commit-then-pack":
        p.git("commit", "-q", "--allow-empty", "-m", "meanwhile")
        p.git("pack-refs", "--all")
        assert not (p.root / ".git" / "refs" / "heads" / "main").exists()
        want = "refs/heads/main"
    else:
        p.git("update-ref", "refs/heads/elsewhere", p.head())
        p.git("symbolic-ref", "HEAD", "refs/heads/elsewhere")
        want = "refs/heads/elsewhere"
    before = p.head()
    done = _land(p.root, doc)
    assert done.returncode == 40 and "the branch moved" in done.stderr, done.stderr
    assert p.head() == before
    assert p.git("symbolic-ref", "HEAD").strip() == want
