"""An ignore file that is in no commit -- a tool's self-ignoring ``.venv/.gitignore``, a
``secrets/.gitignore`` holding ``*`` that the user never committed -- is not among the
base's ignore rules. A worker that empties or deletes it makes ``git add -A`` take the
folder it kept out of git. lk-invoke records what git ignored when the task started
(``run.ignored_at_start``), and a change that brings one of those files in is an
``ignored_at_base`` violation: nothing of it is committed, the secret stays on disk and
out of every saved attempt. A retry is held to what the first attempt found, not to what
its worker left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

SECRET = "API_TOKEN=hunter2-very-secret\n"
WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
rules = Path("secrets/.gitignore")
ACTION
"""
ACTIONS = {
    "emptied": 'rules.write_text("# nothing ignored\\n")',
    "deleted": "rules.unlink()",
    # The first attempt deletes it and takes the secret away (nothing comes in: only its
    # checks fail); the retry, which starts with nothing ignored there, brings it back.
    "deleted-then-retried": """
aside = Path(WORKER_DIR) / "token.env"
if not aside.exists():
    aside.write_text(Path("secrets/token.env").read_text())
    Path("secrets/token.env").unlink()
    rules.unlink()
    Path("src/value.txt").write_text("bad\\n")
else:
    Path("secrets/token.env").write_text(aside.read_text())
""",
}


@pytest.mark.parametrize("how", list(ACTIONS))
def test_a_folder_kept_out_by_an_uncommitted_ignore_file_is_never_committed(
    tmp_path: Path, how: str
) -> None:
    action = ACTIONS[how].replace("WORKER_DIR", repr(str(tmp_path / "worker")))
    check = {"name": "value", "run": "grep -qx good src/value.txt", "timeout": 30}
    p = make_project(tmp_path, WORKER.replace("ACTION", action), writable=["**"],
                     checks=[check], budgets={"attempts": 2})  # fmt: skip
    (p.root / "secrets").mkdir()
    (p.root / "secrets" / ".gitignore").write_text("*\n")  # ignores itself: in no commit
    (p.root / "secrets" / "token.env").write_text(SECRET)
    assert p.git("status", "--porcelain") == ""  # the start is clean: secrets/ is ignored
    before = p.head()
    proc = loop(p)
    tracked = p.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert "secrets/token.env" not in tracked, fail_message(proc)
    assert (p.root / "secrets" / "token.env").read_text() == SECRET
    for ref in p.loopkit_refs():  # nor in a saved attempt (fan-out pushes those)
        assert "secrets/token.env" not in p.git("ls-tree", "-r", "--name-only", ref).split()
    assert proc.returncode != 0, fail_message(proc)
    assert "src/value.txt" not in tracked
    assert nothing_unverified_landed(p, before, tmp_path)
    diff = sorted(p.root.glob(".loopkit/runs/*/*/*-diff.json"))[-1]
    violations = json.loads(diff.read_text())["diff"]["violations"]
    flagged = [v["path"] for v in violations if v["rule"] == "ignored_at_base"]
    assert "secrets/token.env" in flagged, violations
