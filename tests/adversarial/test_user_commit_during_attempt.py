"""The user commits on the branch while an attempt runs (reproduction 9, first half; the
worker plays the user). A park's `git reset --hard BASE` would throw that commit off the
branch; a green commit would bury it under the task's. Both must refuse (exit 40), save
the tree, reset nothing and keep the user's commit as the branch's head."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.recipes_helpers import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only to the worker and nothing it starts
#: outlives it): what the recipe does must hold on its own.
OFF = {"mode": "off"}

USER_COMMITS = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text({value!r})
Path("notes").mkdir(exist_ok=True)
Path("notes/user.txt").write_text("written and committed by the user\\n")
subprocess.run(["git", "add", "notes/user.txt"], check=True)
subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "the user's commit"], check=True)
sys.exit({code})
"""


@pytest.mark.parametrize(
    ("value", "code", "what"),
    [("bad\n", 3, "the revert"), ("good\n", 0, "the commit")],
    ids=["park", "complete"],
)
def test_a_commit_made_during_the_attempt_is_never_dropped(
    tmp_path: Path, value: str, code: int, what: str
) -> None:
    p = make_project(
        tmp_path,
        USER_COMMITS.format(value=value, code=code),
        writable=["src/**", "notes/**"],
        sandbox=OFF,
    )
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 40, fail_message(proc)
    assert f"{what} of fix-value refused: the branch moved" in proc.stderr
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert (p.root / "notes/user.txt").exists()
    assert (p.root / "src/value.txt").read_text() == value  # left as it is
    (ref,) = p.loopkit_refs()
    assert p.git("show", f"{ref}:src/value.txt") == value
    assert ref in proc.stderr
