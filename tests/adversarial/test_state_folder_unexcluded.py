"""A process the worker left running takes the state folder out of `.git/info/exclude`
right after lk-decide's verdict, so that the recipe's own hash before its commit -- and the
index that hash leaves as the real one -- would sweep `.loopkit/` in.

The recipe drops the state folder from that index unless git could not have added it
(absent, or left out by info/exclude as it stands then): a recipe that trusted the
exclusion it saw earlier would stage the state folder for the user's next commit, and
report the tree "changed after the checks ran"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import ARM, loop_with_a_later_process, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = (
    """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""
    + ARM
)


def test_the_state_folder_never_reaches_the_index_or_a_saved_tree(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER)
    before = p.head()
    # Once the verdict is written, the process outside empties info/exclude.
    proc = loop_with_a_later_process(p, '(root / ".git/info/exclude").write_text("")')
    assert proc.returncode == 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    staged = p.git("ls-files", "--cached", "--", ".loopkit")
    assert staged == "", staged
    assert not p.git("ls-tree", "-r", "--name-only", "HEAD", "--", ".loopkit")
    # Nothing was on disk but the verified tree: no false "changed after the checks ran".
    assert not [r for r in p.loopkit_refs() if r.endswith("-after-verify")], proc.stderr
    assert "changed after the checks ran" not in proc.stderr
