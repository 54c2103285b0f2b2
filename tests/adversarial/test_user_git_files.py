"""The worker (no sandbox) writes the user's own git files, outside the repository: a
``* -diff`` in ``~/.config/git/attributes`` takes every line out of the changed-lines
budget, a filter or an alias in ``~/.gitconfig`` reaches every later git call of the user.
The change is a ``git_control_changed`` violation, and the task does not complete."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

OFF = {"mode": "off"}

WRITE = """
import os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("src/notes.txt").write_text("".join(f"note {i}\\n" for i in range(60)))
target = Path(os.path.expanduser("~")) / "FILE"
target.parent.mkdir(parents=True, exist_ok=True)
with open(target, "a") as f:
    f.write("TEXT")
"""


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        (".config/git/attributes", "* -diff\\n", "~/.config/git/attributes"),
        (".gitconfig", "[alias]\\n\\tst = status\\n", "~/.gitconfig"),
    ],
    ids=["attributes", "gitconfig"],
)
def test_a_worker_writing_the_users_git_files_does_not_complete(
    tmp_path: Path, file: str, text: str, key: str
) -> None:
    body = WRITE.replace("FILE", file).replace("TEXT", text)
    p = make_project(tmp_path, body, sandbox=OFF, budgets={"attempts": 1, "changed_lines": 80})
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    assert "src/notes.txt" not in p.git("ls-tree", "-r", "--name-only", "HEAD").split()
    diff = sorted(p.root.glob(".loopkit/runs/*/*/1-diff.json"))[-1]
    violations = json.loads(diff.read_text())["diff"]["violations"]
    assert any(v["path"] == key and v["rule"] == "git_control_changed" for v in violations), (
        violations
    )
    assert Path(os.path.expanduser("~"), file).is_file()  # the test's own HOME, not yours


EMPTY_EXCLUDES = """
import os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path(os.path.expanduser("~/.gitignore_global")).write_text("# nothing\\n")
"""


def test_emptying_a_configured_excludes_file_does_not_sweep_in_a_secret(tmp_path: Path) -> None:
    # A common set-up: core.excludesFile = ~/.gitignore_global, holding .env. The worker
    # empties that file: the user's .env is no longer ignored and `git add -A` takes it.
    home = Path(os.path.expanduser("~"))
    with open(home / ".gitconfig", "a") as f:
        f.write("[core]\n\texcludesFile = ~/.gitignore_global\n")
    (home / ".gitignore_global").write_text(".env\n")
    p = make_project(tmp_path, EMPTY_EXCLUDES, sandbox=OFF, writable=["**"],
                     budgets={"attempts": 1})  # fmt: skip
    (p.root / ".env").write_text("API_TOKEN=hunter2\n")
    assert p.git("status", "--porcelain") == ""
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert ".env" not in p.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert nothing_unverified_landed(p, before, tmp_path)
    diff = sorted(p.root.glob(".loopkit/runs/*/*/1-diff.json"))[-1]
    violations = json.loads(diff.read_text())["diff"]["violations"]
    key = f"git config file: {home / '.gitignore_global'}"
    assert any(v["path"] == key for v in violations), violations
