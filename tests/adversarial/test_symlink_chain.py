"""A chain of symlinks that each read as inside the repository: `L0 -> ..`, then
`Li -> L(i-1)/..`. By its text `src/L24` points at `src/`; followed on disk it is `/`. The
worker points `src/value.txt` through it at a file of its own outside the repository, so
the checks in the clean room read what the worker keeps outside.

A symlink is judged by its target's text and by where it resolves on disk through the
tree's other symlinks: the chain is a symlink out of the repository, and nothing lands."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
import os
(STATE / "good").write_text("good\\n")
os.symlink("..", "src/L0")
for i in range(1, 25):
    os.symlink(f"L{i - 1}/..", f"src/L{i}")
os.remove("src/value.txt")
os.symlink(f"L24{STATE}/good", "src/value.txt")
"""


def test_a_chain_of_symlinks_out_of_the_repository_never_lands(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER, files={"src/value.txt": "bad\n"})
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt") == "bad\n"  # the file, not a link, as it was
    assert nothing_unverified_landed(p, before, tmp_path)
    decided = [d for d in p.docs("fix-value", "diff") if d.get("diff")]
    rules = {v.get("rule") for d in decided for v in d["diff"].get("violations") or []}
    assert "symlink_outside_repo" in rules, rules
