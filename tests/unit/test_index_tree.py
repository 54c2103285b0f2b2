"""The tree read from an index without ``git write-tree`` (``git.index_tree``) is the one
write-tree answers -- SHA-1 and SHA-256 stores, version 3 entries, symlinks and modes --
and none when the index cannot tell it: an entry's id changed (a file rewritten to the
same size with its mtime put back), a version 4 index. A hash through ``TreeWatch`` after
such a rewrite is the new tree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from loopkit import git
from tests.helpers import git as run_git


def _fill(repo: Path) -> None:
    for i in range(30):
        p = repo / f"d{i % 4}" / f"f{i}.txt"
        p.parent.mkdir(exist_ok=True)
        p.write_text(f"{i}\n" * (i + 1))
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("d0/f0.txt")
    (repo / ("n" * 200)).write_text("long name\n")


def _written(repo: Path, index: Path) -> str:
    return git.out(["write-tree"], cwd=repo, env={"GIT_INDEX_FILE": str(index)})


@pytest.mark.parametrize("form", ["sha1", "sha256"])
def test_the_tree_read_from_the_index_is_write_trees(tmp_path: Path, form: str) -> None:
    repo = tmp_path / "r"
    run_git(tmp_path, "init", "-q", f"--object-format={form}", str(repo))
    _fill(repo)
    run_git(repo, "add", "-A")
    run_git(repo, "update-index", "--skip-worktree", "d0/f0.txt")  # a version 3 entry
    index = repo / ".git" / "index"
    assert index.read_bytes()[4:8] == b"\0\0\0\3"
    assert git.index_tree(index) is None  # no cache tree yet: write-tree must answer
    tree = _written(repo, index)
    assert git.index_tree(index) == tree
    (repo / "later.txt").write_text("intent to add\n")
    run_git(repo, "add", "-N", "later.txt")  # git keeps no whole root then
    assert _written(repo, index) == tree
    assert git.index_tree(index) is None
    scratch = tmp_path / "v4"
    shutil.copy2(index, scratch)
    git.git(
        ["update-index", "--index-version", "4"], cwd=repo, env={"GIT_INDEX_FILE": str(scratch)}
    )
    assert git.index_tree(scratch) is None


def test_only_stat_data_moved_keeps_the_tree_a_new_id_does_not(git_repo: Path) -> None:
    _fill(git_repo)
    run_git(git_repo, "add", "-A")
    index = git_repo / ".git" / "index"
    tree = _written(git_repo, index)
    before = index.read_bytes()
    # Stat data only: every file touched, the same content.
    for p in (git_repo / "d1").iterdir():
        os.utime(p, ns=(1, 1))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "update-index", "--refresh")
    assert index.read_bytes() != before
    assert git.index_tree(index, (before, tree)) == tree == _written(git_repo, index)
    assert git.index_tree(index, (before, None)) == tree  # the tree its own cache tree names
    # A file rewritten to the same size, its mtime put back: git reads it again (ctime),
    # its id changes, and the earlier tree is not taken for it.
    before = index.read_bytes()
    target = git_repo / "d2" / "f2.txt"
    st = target.stat()
    target.write_text("X\n" * 3)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    run_git(git_repo, "add", "-A")
    assert git.index_tree(index, (before, tree)) is None
    assert git.index_tree(index, (before, None)) is None
    assert _written(git_repo, index) != tree


def test_a_hash_after_a_same_size_rewrite_is_the_new_tree(git_repo: Path) -> None:
    _fill(git_repo)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "files")
    target = git_repo / "d3" / "f3.txt"
    with git.TreeWatch(git_repo) as watch:
        first = watch.hash()
        assert first == git.out(["rev-parse", "HEAD^{tree}"], cwd=git_repo)
        st = target.stat()
        target.write_text("Y\n" * 4)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        second = watch.hash()
        assert second != first
        with git.TreeWatch(git_repo, index=Path(watch.path)) as again:
            assert again.hash() == second  # what write-tree says of the same files
