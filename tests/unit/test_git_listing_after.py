"""A tree's listing made from another's and the changes between the two trees (what the
clean room's sync does, with no listing of the whole tree) is the listing git gives:
folders made and removed, a file that becomes a folder and back, a submodule's gitlink,
``.gitattributes`` added, changed and removed at any depth."""

from __future__ import annotations

import shutil
from pathlib import Path

from loopkit import git
from tests.helpers import git as run_git


def _tree(repo: Path) -> str:
    run_git(repo, "add", "-A")
    return run_git(repo, "write-tree").strip()


def _fresh(listing: git.TreeListing) -> tuple[object, ...]:
    return listing.folders, listing.attributes, dict(listing.counts)


def test_a_listing_made_from_the_changes_is_gits(git_repo: Path) -> None:
    r = git_repo
    (r / "a/b/c").mkdir(parents=True)
    (r / "a/b/c/f.txt").write_text("f\n")
    (r / "a/.gitattributes").write_text("*.txt text\n")
    (r / "x").write_text("a file\n")
    (r / "gone/deep").mkdir(parents=True)
    (r / "gone/deep/g.txt").write_text("g\n")
    trees = [_tree(r)]
    # A folder removed with its subfolder, a file that becomes a folder, a new
    # .gitattributes deep down, the old one changed, a gitlink.
    shutil.rmtree(r / "gone")
    (r / "x").unlink()
    (r / "x/inner").mkdir(parents=True)
    (r / "x/inner/.gitattributes").write_text("* -text\n")
    (r / "a/.gitattributes").write_text("*.txt -text\n")
    trees.append(_tree(r))
    head = run_git(r, "rev-parse", "HEAD").strip()
    run_git(r, "update-index", "--add", "--cacheinfo", f"160000,{head},sub")
    trees.append(run_git(r, "write-tree").strip())
    # And back: the folder a file again, the attributes gone, a folder named .gitattributes.
    run_git(r, "rm", "-q", "--cached", "sub")
    shutil.rmtree(r / "x")
    (r / "x").write_text("a file again\n")
    (r / "a/.gitattributes").unlink()
    (r / "a/b/.gitattributes").mkdir()
    (r / "a/b/.gitattributes/k").write_text("k\n")
    trees.append(_tree(r))
    for old, new in zip(trees, trees[1:] + trees[:1], strict=True):
        git._LISTINGS.clear()
        git._CHANGES.clear()
        held = git.tree_listing(r, old)
        git._LISTINGS.clear()
        made = git.listing_after(r, old, held, new)
        git._LISTINGS.clear()
        assert _fresh(made) == _fresh(git.tree_listing(r, new)), (old, new)


def test_the_changes_of_a_pair_are_asked_once(git_repo: Path) -> None:
    r = git_repo
    old = run_git(r, "rev-parse", "HEAD^{tree}").strip()
    (r / "n.txt").write_text("n\n")
    new = _tree(r)
    first = git.tree_diff(r, old, new)
    assert git.tree_diff(r, old, new) is first
    assert [(s, e.path) for s, _, e in first] == [("A", b"n.txt")]


def _entries(changes: list[tuple[str, git.Entry, git.Entry]]) -> list[tuple[object, ...]]:
    return sorted((s, w.path, w.mode, w.oid, n.mode, n.oid) for s, w, n in changes)


def test_lk_diffs_records_answer_the_pair_as_diff_tree_does(git_repo: Path) -> None:
    """A rename found by ``-M`` is the path gone and the path made; a type change, an exec
    bit, a symlink, a folder that becomes a file, a file in a new folder: as ``diff-tree``."""
    r = git_repo
    body = "".join(f"line {i} long enough to be found renamed\n" for i in range(40))
    (r / "moved.txt").write_text(body)
    (r / "tool.sh").write_text("echo\n")
    (r / "link").write_text("was a file\n")
    (r / "d").mkdir()
    (r / "d/inside.txt").write_text("d\n")
    run_git(r, "add", "-A")
    run_git(r, "commit", "-qm", "base")
    base = run_git(r, "rev-parse", "HEAD").strip()
    base_tree = run_git(r, "rev-parse", "HEAD^{tree}").strip()
    git.known_commit(r, base, base_tree)
    (r / "moved.txt").rename(r / "renamed.txt")
    (r / "tool.sh").chmod(0o755)
    (r / "link").unlink()
    (r / "link").symlink_to("renamed.txt")
    (r / "d/inside.txt").unlink()
    (r / "d").rmdir()
    (r / "d").write_text("a file now\n")
    (r / "new/deep").mkdir(parents=True)
    (r / "new/deep/f.txt").write_text("f\n")
    git._CHANGES.clear()
    with git.worktree_changes(r, base) as (records, tree, _sizes, _unborn):
        assert b"\0renamed.txt\0" in records and b" R" in records
        new = tree()
    told = git.tree_diff(r, base_tree, new)  # answered from the records
    git._CHANGES.clear()
    asked = git.tree_diff(r, base_tree, new)  # asked of git
    assert _entries(told) == _entries(asked) and len(asked) == 7
