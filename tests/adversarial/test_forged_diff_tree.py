"""lk-verify checks the tree lk-diff recorded (diff.tree), not a fresh hash of the work
tree. A document handed on with diff.tree edited to name a green tree -- one that is not
on disk -- must not complete: the checks pass on that tree, and lk-decide still binds the
evidence to the tree on disk."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.recipes import BIN, make_project, recipe_env

BAD = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
"""


def _run(cmd: str, root: Path, doc: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / cmd), "--contract", "loop.yaml"], cwd=root, input=doc,
        capture_output=True, text=True, env=recipe_env(validate=True), timeout=120,
    )  # fmt: skip


def test_a_diff_tree_edited_to_a_green_one_does_not_complete(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD)
    # A green tree in the object store, never on disk: src/value.txt says good.
    (p.root / "src").mkdir(exist_ok=True)
    (p.root / "src/value.txt").write_text("good\n")
    p.git("add", "src/value.txt")
    green = p.git("write-tree").strip()
    p.git("rm", "-q", "--cached", "src/value.txt")
    (p.root / "src/value.txt").unlink()

    start = json.dumps({"kind": "loopkit/attempt", "version": 1,
                        "task": {"id": "fix-value", "text": "Fix", "kind": "task"}})  # fmt: skip
    invoked = _run("lk-invoke", p.root, start)
    assert invoked.returncode == 0, invoked.stderr
    diffed = _run("lk-diff", p.root, invoked.stdout)
    doc = json.loads(diffed.stdout)
    assert doc["diff"]["tree"] != green  # the bad tree is what is on disk
    doc["diff"]["tree"] = green  # the hand edit
    verified = _run("lk-verify", p.root, json.dumps(doc))
    assert verified.returncode == 0, verified.stderr  # the checks ran on the green tree
    assert json.loads(verified.stdout)["verify"]["tree"] == green
    decided = _run("lk-decide", p.root, verified.stdout)
    assert decided.returncode != 0, decided.stderr
    decision = json.loads(decided.stdout)["decision"]
    assert decision["outcome"] != "complete"
    assert "tree on disk" in decision["reason"]
