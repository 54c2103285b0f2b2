"""The worker re-includes the state folder with its own `.gitignore` (`!/.loopkit/`): a
`.gitignore` in the work tree outranks `.git/info/exclude`, so `git add -A` would take
`.loopkit/` in. With a contract that lets it write anywhere, the tree lk-diff hashes --
the one the checks run on and the recipe commits -- would then hold the ledger, the stat
cache and the run documents.

Every tree hash drops the state folder from its index whatever the ignore rules say: the
commit, the saved attempts and the index the recipe leaves never hold it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path(".gitignore").write_text("!/.loopkit/\\n!.loopkit\\n")
"""


def test_a_worker_gitignore_never_brings_the_state_folder_into_a_tree(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER, writable=["**"])
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert p.git("show", "HEAD:.gitignore") == "!/.loopkit/\n!.loopkit\n"
    committed = p.git("ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert not [x for x in committed if x.startswith(".loopkit")], committed
    for ref in p.loopkit_refs():
        saved = p.git("ls-tree", "-r", "--name-only", ref).splitlines()
        assert not [x for x in saved if x.startswith(".loopkit")], (ref, saved)
    assert p.git("ls-files", "--cached", "--", ".loopkit") == ""
    decided = p.docs("fix-value", "decide")[-1]
    changed = [c.get("path") for c in (decided.get("diff") or {}).get("files") or []]
    assert not [x for x in changed if str(x).startswith(".loopkit")], changed
