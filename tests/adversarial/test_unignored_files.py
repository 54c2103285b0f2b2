"""The worker rewrites ``.gitignore`` so that ``git add -A`` takes what the repository kept
out of git: the user's ignored ``.env`` (its secrets), a build folder. With a scope of
``**`` every path is the worker's to write -- but a file the base ignored is not the
worker's to add: the change is an ``ignored_at_base`` violation and nothing of it is
committed, the secret stays on disk and out of every commit. A ``.gitignore`` that also
ignores itself (so that it is in no change) changes nothing to that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

UNIGNORE = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("RULES").parent.mkdir(parents=True, exist_ok=True)
Path("RULES").write_text(TEXT)
"""
SECRET = "API_TOKEN=hunter2-very-secret\n"


@pytest.mark.parametrize(
    ("rules", "text", "secret"),
    [
        (".gitignore", "'# nothing ignored\\n'", ".env"),
        ("conf/.gitignore", "'!app.env\\n.gitignore\\n'", "conf/app.env"),  # hides itself
        ("src/.gitignore", "'!/../.env\\n'", ".env"),  # cannot re-include a file above it
    ],
    ids=["emptied", "self-ignoring", "sub-gitignore"],
)
def test_an_ignored_secret_is_never_swept_into_the_commit(
    tmp_path: Path, rules: str, text: str, secret: str
) -> None:
    body = UNIGNORE.replace("RULES", rules).replace("TEXT", text)
    p = make_project(tmp_path, body, writable=["**"], gitignore=".env\n*.env\n",
                     budgets={"attempts": 1})  # fmt: skip
    (p.root / secret).parent.mkdir(parents=True, exist_ok=True)
    (p.root / secret).write_text(SECRET)
    before = p.head()
    proc = loop(p)
    tracked = p.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert secret not in tracked
    assert (p.root / secret).read_text() == SECRET
    for ref in p.loopkit_refs():  # nor in a saved attempt (fan-out pushes those)
        assert secret not in p.git("ls-tree", "-r", "--name-only", ref).split(), ref
    if rules == "src/.gitignore":  # nothing let in: nothing to catch
        assert proc.returncode == 0, fail_message(proc)
        return
    assert proc.returncode != 0, fail_message(proc)
    assert "src/value.txt" not in tracked
    assert nothing_unverified_landed(p, before, tmp_path)
    diff = sorted(p.root.glob(".loopkit/runs/*/*/1-diff.json"))[-1]
    violations = json.loads(diff.read_text())["diff"]["violations"]
    assert [v["path"] for v in violations if v["rule"] == "ignored_at_base"] == [secret]
