"""One listing of a change: the new side's blob ids read from lk-diff's own ``diff-index
-M --raw --numstat`` records are those a second ``--no-renames`` listing would name."""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import git
from tests.helpers import git as run_git


def test_new_blob_ids_match_a_listing_without_renames(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    run_git(repo, "init", "-q")
    body = "".join(f"line {i} of a file long enough to be found renamed\n" for i in range(40))
    for name in ("moved.txt", "copied.txt", "gone.txt", "kept.txt", ":colon.txt"):
        (repo / name).write_text(body + name)
    (repo / "bin.dat").write_bytes(b"\0\1\2" * 100)
    run_git(repo, "add", "-A")
    run_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = run_git(repo, "rev-parse", "HEAD").strip()
    os.rename(repo / "moved.txt", repo / ":renamed.txt")  # a path that starts with ':'
    (repo / "copy-of.txt").write_text(body + "copied.txt")
    (repo / "gone.txt").unlink()
    (repo / "kept.txt").write_text(body + "kept, changed")
    (repo / "bin.dat").write_bytes(b"\0\3" * 100)
    (repo / "new.txt").write_text("new\n")
    (repo / "empty").write_text("")
    run_git(repo, "add", "-A")
    flags = ["diff-index", "--cached", "-z", "--raw"]
    records = git.git([*flags, "-M", "--numstat", base], cwd=repo).stdout
    assert b"\0:renamed.txt\0" in records and b" R" in records
    plain = git.git([*flags, "--no-renames", base], cwd=repo).stdout.split(b"\0")
    expected = [
        meta.split(b" ")[3].decode()
        for meta in plain[0 : len(plain) - 1 : 2]
        if meta.split(b" ")[1] not in (b"000000", b"160000")
    ]
    assert sorted(git.new_blob_ids(records)) == sorted(expected)
    assert len(expected) == 6


def test_a_commit_git_named_is_resolved_again_without_git(tmp_path: Path) -> None:
    """lk-invoke resolves HEAD before the worker; lk-diff's base is that id: answered from
    what git said, in this process and this repository only -- a tag's id (which peels
    to another) and an id git never named are asked of git."""
    from loopkit import timing

    repo = tmp_path / "r"
    repo.mkdir()
    run_git(repo, "init", "-q")
    (repo / "a").write_text("a\n")
    run_git(repo, "add", "a")
    run_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    run_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-am", "t", "v1")
    head = run_git(repo, "rev-parse", "HEAD").strip()
    tag = run_git(repo, "rev-parse", "v1").strip()
    assert git.locate(repo, base="HEAD").base == head
    timing.begin()
    assert git.resolve(repo, head) == head
    assert timing.git_processes() == 0
    assert git.resolve(repo, tag) == head  # peeled by git
    assert git.resolve(repo, tag) == head  # and asked again: a tag is not a commit
    assert git.resolve(repo, "0" * 40) is None
    assert timing.git_processes() >= 4
    other = tmp_path / "other"
    other.mkdir()
    run_git(other, "init", "-q")
    timing.begin()
    assert git.resolve(other, head) is None  # another repository has no such commit
    assert timing.git_processes() >= 1
