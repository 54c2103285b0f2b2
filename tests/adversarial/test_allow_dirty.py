"""`--allow-dirty` (reproduction 10): the user's own uncommitted edits were charged to the
worker (a scope violation for a README the worker never touched) and a park reverted them.
They must be recorded at the start, left out of the worker's diff, and come back exactly
on a park -- staged changes staged, unstaged ones unstaged, untracked files untracked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import Project, fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text({value!r})
Path("src/junk.tmp").write_text("debris\\n")
sys.exit({code})
"""


def _user_edits(p: Project) -> None:
    """Unstaged, staged-then-edited-again, and untracked changes, none of them in scope."""
    (p.root / "README.md").write_text("# project\n\nmy unsaved edit\n")
    (p.root / "CHANGES.md").write_text("v2, staged\n")
    p.git("add", "CHANGES.md")
    (p.root / "CHANGES.md").write_text("v3, edited after staging\n")
    (p.root / "notes.txt").write_text("my untracked notes\n")


def _charged(p: Project) -> set[str]:
    paths = set()
    for doc in p.docs("fix-value", "diff"):
        paths |= {f["path"] for f in doc["diff"]["files"]}
        paths |= {v["path"] for v in doc["diff"]["violations"]}
    return paths


def test_a_park_brings_the_users_edits_back_exactly(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER.format(value="bad\n", code=3), files={"CHANGES.md": "v1\n"})
    before = p.head()
    _user_edits(p)
    status = p.git("status", "--porcelain")
    proc = loop(p, "--allow-dirty")
    assert proc.returncode == 21, fail_message(proc)
    assert _charged(p) <= {"src/value.txt", "src/junk.tmp"}, _charged(p)
    # The user's state, exactly: content, what is staged, what is untracked.
    assert (p.root / "README.md").read_text() == "# project\n\nmy unsaved edit\n"
    assert (p.root / "CHANGES.md").read_text() == "v3, edited after staging\n"
    assert p.git("show", ":CHANGES.md") == "v2, staged\n"
    assert (p.root / "notes.txt").read_text() == "my untracked notes\n"
    assert not (p.root / "src").exists()  # the worker's change reverted
    assert p.git("status", "--porcelain") == status
    assert set(p.git("diff", "--name-only", before, "HEAD").split()) == {"MEMORY.md"}  # the record
    # Both are kept: the user's start and the attempt, whose parent is that start.
    start = p.git("rev-parse", "refs/loopkit/fix-value/user-start").strip()
    attempts = [r for r in p.loopkit_refs() if not r.endswith(("/user-start", "/user-index"))]
    attempt = attempts[-1]  # every attempt is saved; the park's is the last
    assert all(p.git("rev-parse", f"{a}~1").strip() == start for a in attempts)
    assert p.git("diff", "--name-only", f"{attempt}~1", attempt).split() == [
        "src/junk.tmp",
        "src/value.txt",
    ]


def test_a_commit_lands_the_users_edits_apart_from_the_workers(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER.format(value="good\n", code=0), files={"CHANGES.md": "v1\n"})
    before = p.head()
    _user_edits(p)
    proc = loop(p, "--allow-dirty")
    assert proc.returncode == 0, fail_message(proc)
    assert _charged(p) <= {"src/value.txt", "src/junk.tmp"}, _charged(p)
    # The user's starting state lands as a commit of its own, the task's on top of it.
    assert p.git("rev-parse", "HEAD~2").strip() == before
    assert "--allow-dirty" in p.git("log", "-1", "--pretty=%s", "HEAD~1")
    assert set(p.git("diff", "--name-only", "HEAD~1", "HEAD").split()) == {
        "src/value.txt",
        "src/junk.tmp",
    }
    assert p.git("show", "HEAD:README.md") == "# project\n\nmy unsaved edit\n"
    assert p.git("status", "--porcelain") == ""
