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


def _fresh(listing: git.TreeListing) -> tuple[frozenset[str], tuple[tuple[str, str, str], ...]]:
    return listing.folders, listing.attributes


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
    first = git.tree_changes(r, old, new)
    assert git.tree_changes(r, old, new) is first
    assert [(s, e.path) for s, _, e in git.tree_diff(r, old, new)] == [("A", b"n.txt")]
