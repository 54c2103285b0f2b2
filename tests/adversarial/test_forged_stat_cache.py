"""The worker writes loopkit's own stat cache (<state>/stat-index, the index every tree hash
after it starts from): an entry marked assume-unchanged or skip-worktree there would hide
a clobbered README from lk-diff, lk-decide and the recipe's own hash alike. Without a
sandbox (in one the state folder is out of its sight) the cache must then not be
trusted: the hashes read every file, the change is seen, and nothing hidden is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

OFF = {"mode": "off"}

FORGE = """
import os, subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("README.md").write_text("clobbered\\n")
cache = os.path.join(".loopkit", "stat-index")
assert os.path.exists(cache), "no stat cache to forge"
env = dict(os.environ, GIT_INDEX_FILE=cache)
subprocess.run(["git", "update-index", "--FLAG", "README.md"], check=True, env=env)
"""


@pytest.mark.parametrize("flag", ["skip-worktree", "assume-unchanged"])
def test_a_change_hidden_in_the_stat_cache_is_seen(tmp_path: Path, flag: str) -> None:
    p = make_project(tmp_path, FORGE.replace("FLAG", flag), budgets={"attempts": 1}, sandbox=OFF)
    before = p.head()
    proc = loop(p)
    # README.md lies outside the writable scope: seen, it is a violation, never a commit.
    assert proc.returncode in (21, 22), fail_message(proc)
    assert "README.md" in proc.stderr
    assert nothing_unverified_landed(p, before, tmp_path)
    assert (p.root / "README.md").read_text() == "# project\n"  # reverted, not hidden
    assert any(p.git("show", f"{ref}:README.md") == "clobbered\n" for ref in p.loopkit_refs())
