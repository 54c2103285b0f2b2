"""A nested git repository inside the change: git records a gitlink (a commit id of
another repository), so the commit holds none of its files and a clone gets nothing; one
without a commit is in no tree at all (and used to make lk-diff fail). Either is a
violation, inside the writable scope or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.adversarial.stages import attempt, rules, section
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# src/lib is a repository of its own with a commit: the outer commit would record a
# gitlink, and the library's code would live nowhere but on this disk.
NESTED = """
import subprocess
Path("src/lib").mkdir(parents=True, exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("src/lib/helper.py").write_text("def helper():\\n    return 1\\n")
ident = ["-c", "user.name=w", "-c", "user.email=w@example.invalid"]
subprocess.run(["git", "init", "-q"], cwd="src/lib", check=True)
subprocess.run(["git", *ident, "add", "-A"], cwd="src/lib", check=True)
subprocess.run(["git", *ident, "commit", "-qm", "lib"], cwd="src/lib", check=True)
"""

# The same without a commit: `git add -A` cannot even record a gitlink.
UNBORN = """
import subprocess
Path("src/lib").mkdir(parents=True, exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("src/lib/helper.py").write_text("def helper():\\n    return 1\\n")
subprocess.run(["git", "init", "-q"], cwd="src/lib", check=True)
"""


def test_a_nested_repository_in_scope_is_a_violation(tmp_path: Path) -> None:
    p = make_project(tmp_path, NESTED)
    done = attempt(p)
    assert done["lk-diff"].returncode == 1, done["lk-diff"].stderr
    diff = section(done["lk-diff"], "diff")
    assert rules(diff).get("nested_repository") == {"src/lib"}, diff["violations"]
    assert done["lk-decide"].returncode != 0
    assert section(done["lk-decide"], "decision")["outcome"] != "complete"


def test_a_nested_repository_is_never_committed_as_a_gitlink(tmp_path: Path) -> None:
    p = make_project(tmp_path, NESTED, budgets={"attempts": 2})
    proc = loop(p)
    assert p.worker_calls() >= 1
    assert proc.returncode != 0, fail_message(proc)
    modes = {line.split()[0] for line in p.git("ls-tree", "-r", "HEAD").splitlines()}
    assert "160000" not in modes, p.git("ls-tree", "-r", "HEAD")


def test_a_nested_repository_without_a_commit_is_reported_not_a_crash(tmp_path: Path) -> None:
    p = make_project(tmp_path, UNBORN)
    done = attempt(p)
    assert done["lk-diff"].returncode == 1, done["lk-diff"].stderr
    diff = section(done["lk-diff"], "diff")
    assert rules(diff) == {"nested_repository": {"src/lib"}}, diff["violations"]
    # Everything else is still hashed and diffed.
    assert {f["path"] for f in diff["files"]} == {"src/value.txt"}
    # lk-verify hashes the same tree without failing on the nested repository.
    assert done["lk-verify"].returncode == 0, done["lk-verify"].stderr
    assert section(done["lk-verify"], "verify")["tree"] == diff["tree"]
    assert done["lk-decide"].returncode != 0
