"""The worker moves the branch or HEAD: `git reset --soft HEAD~2` makes the user's last
two commits vanish from the branch while the tree still looks like a small change; a
commit of its own or a switch to another branch changes what the recipe would commit
onto. lk-diff reports head_moved, and a retry does not take the moved branch for the
new start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.adversarial.stages import attempt, rules, section
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only): what loopkit detects must hold on its own.
OFF = {"mode": "off"}

RESET_SOFT = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
if n == 1:
    subprocess.run(["git", "reset", "-q", "--soft", "HEAD~2"], check=True)
"""


def _user_commits(p) -> list[str]:
    ids = []
    for name in ("notes-1", "notes-2"):
        (p.root / f"{name}.txt").write_text(f"{name}\n")
        p.git("add", f"{name}.txt")
        p.git("commit", "-q", "-m", f"user: {name}")
        ids.append(p.head())
    return ids


def test_a_soft_reset_does_not_drop_the_users_commits(tmp_path: Path) -> None:
    p = make_project(tmp_path, RESET_SOFT, sandbox=OFF, budgets={"attempts": 2})
    mine = _user_commits(p)
    proc = loop(p)
    assert p.worker_calls() >= 1
    assert proc.returncode != 0, fail_message(proc)
    for commit in mine:
        done = p.execute(["git", "merge-base", "--is-ancestor", commit, "HEAD"])
        assert done.returncode == 0, f"{commit} is no longer on the branch"
    # Every attempt is held to where the branch was when the task started.
    diffs = p.docs("fix-value", "diff")
    assert len(diffs) == 2
    for doc in diffs:
        assert "refs/heads/main" in rules(doc["diff"]).get("head_moved", set()), doc["diff"]
    assert "complete" not in [d["outcome"] for d in p.decisions("fix-value")]


COMMIT = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
ident = ["-c", "user.name=w", "-c", "user.email=w@example.invalid"]
subprocess.run(["git", "add", "src/value.txt"], check=True)
subprocess.run(["git", *ident, "commit", "-qm", "worker"], check=True)
"""

SWITCH = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
subprocess.run(["git", "switch", "-q", "-c", "elsewhere"], check=True)
"""


@pytest.mark.parametrize(
    ("body", "moved"), [(COMMIT, {"refs/heads/main"}), (SWITCH, {"HEAD"})], ids=["commit", "switch"]
)
def test_a_moved_branch_or_head_is_a_violation(tmp_path: Path, body: str, moved: set[str]) -> None:
    p = make_project(tmp_path, body, sandbox=OFF)
    start = p.head()
    done = attempt(p)
    run = section(done["lk-invoke"], "run")
    assert run["base"] == start
    diff = section(done["lk-diff"], "diff")
    assert rules(diff).get("head_moved") == moved, diff["violations"]
    # The change itself is still measured from where the worker started.
    assert {f["path"] for f in diff["files"]} == {"src/value.txt"}
    assert done["lk-decide"].returncode != 0
    assert section(done["lk-decide"], "decision")["outcome"] != "complete"
