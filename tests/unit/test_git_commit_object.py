"""A commit loopkit writes without starting git is the object ``git commit-tree`` writes
for the same tree, parent, message and moment (same id, ``fsck --strict`` clean), with
the dates of the environment in the forms git's own and ISO 8601 give them; where git
would do more than write it (a date in another form, signing, another encoding, an
identity git would trim, a tree that is not a loose tree object here), git is asked
instead."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopkit import git, gitstore
from tests.helpers import git as run_git

MESSAGE = "loopkit: t1: edit\n\nwhy, in a line é\n\nLoopkit-Task: t1\nLoopkit-Tree: x"


def _new_tree(repo: Path) -> str:
    (repo / "new.txt").write_text("new\n")
    run_git(repo, "add", "new.txt")
    return run_git(repo, "write-tree").strip()


@pytest.fixture
def zone_with_minutes() -> Iterator[None]:
    """Local time at +0530 for the test (a zone of whole hours would hide the minutes)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "IST-5:30"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.usefixtures("zone_with_minutes")
def test_the_commit_is_the_object_commit_tree_writes(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))]:
        monkeypatch.delenv(key)
    run_git(git_repo, "config", "user.name", "A Person")
    run_git(git_repo, "config", "user.email", "a@example.org")
    run_git(git_repo, "config", "committer.name", "The Lander")
    tree, parent = _new_tree(git_repo), run_git(git_repo, "rev-parse", "HEAD").strip()
    ours = gitstore.commit_object(git_repo, tree, parent, MESSAGE)
    assert ours is not None
    body = run_git(git_repo, "cat-file", "commit", ours)
    when = re.search(r"^author .* (\d+ [+-]\d{4})$", body, re.M)
    assert when is not None and when.group(1).endswith("+0530")
    assert "committer The Lander <a@example.org>" in body
    env = {**os.environ, "GIT_AUTHOR_DATE": when.group(1), "GIT_COMMITTER_DATE": when.group(1)}
    theirs = git.out(["commit-tree", tree, "-p", parent, "-m", MESSAGE], cwd=git_repo, env=env)
    assert ours == theirs.strip()
    run_git(git_repo, "fsck", "--strict")


@pytest.mark.parametrize(
    "setting",
    [
        ("env", "GIT_AUTHOR_DATE", "yesterday noon"),
        ("config", "commit.gpgSign", "true"),
        ("config", "i18n.commitEncoding", "ISO-8859-1"),
        ("env", "GIT_AUTHOR_NAME", " Trimmed Name."),
        ("env", "GIT_COMMITTER_EMAIL", "<odd>@example.org"),
        ("packed", "", ""),
    ],
    ids=lambda s: s[1] or s[0],
)
def test_what_git_would_do_more_for_is_left_to_git(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, setting: tuple[str, str, str]
) -> None:
    kind, key, value = setting
    run_git(git_repo, "config", "user.name", "A Person")
    run_git(git_repo, "config", "user.email", "a@example.org")
    tree, parent = _new_tree(git_repo), run_git(git_repo, "rev-parse", "HEAD").strip()
    if kind == "env":
        monkeypatch.setenv(key, value)
    elif kind == "config":
        run_git(git_repo, "config", key, value)
    else:
        run_git(git_repo, "commit", "-qm", "holds the tree")
        run_git(git_repo, "gc", "-q", "--prune=now")
    assert gitstore.commit_object(git_repo, tree, parent, MESSAGE) is None


@pytest.mark.parametrize(
    "date",
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T05:30:00+05:30",
        "2026-01-01 00:00:00 +0100",
        "@1700000000 +0200",
        "1700000000 -0130",
        "2024-02-29T12:00:00Z",
        "1999-12-31T23:59:59-08:00",
    ],
)
def test_a_date_from_the_environment_is_read_as_git_reads_it(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, date: str
) -> None:
    monkeypatch.setenv("GIT_AUTHOR_DATE", date)
    monkeypatch.setenv("GIT_COMMITTER_DATE", date)
    tree, parent = _new_tree(git_repo), run_git(git_repo, "rev-parse", "HEAD").strip()
    ours = gitstore.commit_object(git_repo, tree, parent, MESSAGE)
    theirs = git.out(["commit-tree", tree, "-p", parent, "-m", MESSAGE], cwd=git_repo)
    assert ours == theirs.strip()
