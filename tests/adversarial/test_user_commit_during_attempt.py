"""The user commits on the branch while an attempt runs (reproduction 9, first half). A
park's `git reset --hard BASE` would throw that commit off the branch; a green commit
would bury it under the task's. Both must refuse (exit 40), save the tree, revert nothing
and keep the user's commit as the branch's head. The test plays the user: its commit
lands while the attempt's checks run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project, user_commits_during

pytestmark = pytest.mark.slow

WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text(VALUE)
sys.exit(CODE)
"""


@pytest.mark.parametrize(
    ("value", "code", "what"),
    [("bad\n", 3, "the revert"), ("good\n", 0, "the commit")],
    ids=["park", "complete"],
)
def test_a_commit_made_during_the_attempt_is_never_dropped(
    tmp_path: Path, value: str, code: int, what: str
) -> None:
    body = WORKER.replace("VALUE", repr(value)).replace("CODE", str(code))
    p = make_project(tmp_path, body, budgets={"attempts": 1})
    before = p.head()
    user = user_commits_during(p)
    try:
        proc = loop(p)
        user.wait(timeout=60)
    finally:
        user.kill()
    assert proc.returncode == 40, fail_message(proc)
    assert f"{what} of fix-value refused: the branch moved" in proc.stderr
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert (p.root / "src/value.txt").read_text() == value  # left as it is
    (ref,) = p.loopkit_refs()
    assert p.git("show", f"{ref}:src/value.txt") == value
    assert ref in proc.stderr
