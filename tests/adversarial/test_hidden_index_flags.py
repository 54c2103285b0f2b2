"""The worker hides a change from git by writing the index: a clobbered README marked
skip-worktree (or assume-unchanged) looks clean to `git status`, is skipped by `git add -A`
and survives a `git reset --hard`. After a commit or a park, the work tree must be what
the recipe says it is -- the commit, or where the task began -- and the hidden change must
be saved, not lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only to the worker and nothing it starts
#: outlives it): what the recipe does must hold on its own.
OFF = {"mode": "off"}

HIDE = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text(VALUE)
Path("README.md").write_text("clobbered\\n")
subprocess.run(["git", "update-index", "--FLAG", "README.md"], check=True)
sys.exit(CODE)
"""


@pytest.mark.parametrize("flag", ["skip-worktree", "assume-unchanged"])
@pytest.mark.parametrize(("value", "code"), [("good\n", 0), ("bad\n", 3)], ids=["green", "red"])
def test_a_change_hidden_in_the_index_is_saved_and_reverted(
    tmp_path: Path, flag: str, value: str, code: int
) -> None:
    body = HIDE.replace("VALUE", repr(value)).replace("CODE", str(code)).replace("FLAG", flag)
    p = make_project(tmp_path, body, budgets={"attempts": 1}, sandbox=OFF)
    before = p.head()
    proc = loop(p)
    assert proc.returncode in (0, 21, 22), fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    # The disk holds what git says it holds: nothing hidden is left behind.
    assert (p.root / "README.md").read_text() == "# project\n"
    assert p.git("ls-files", "-v", "README.md").startswith("H ")  # no flag left set
    # ... and the hidden change is not lost.
    assert any(p.git("show", f"{ref}:README.md") == "clobbered\n" for ref in p.loopkit_refs())
    if proc.returncode == 0:
        assert p.git("show", "HEAD:README.md") == "# project\n"
        assert p.git("show", "HEAD:src/value.txt") == "good\n"
