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
