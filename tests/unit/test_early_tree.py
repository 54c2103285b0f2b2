"""controller.EarlyTree: lk-decide's hash of the tree on disk, begun by lk attempt the
moment the last check's process ended (beside the clean room's own hash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import controller, git, ledger, statcache
from loopkit.errors import LoopkitError


def _sealed(repo: Path, state: Path) -> dict[str, object]:
    state.mkdir(exist_ok=True)
    statcache.ensure(state, repo / ".git" / "index")
    return {"state_seal": ledger.seal(state)}


def test_it_is_the_hash_lk_decide_takes_and_its_stat_cache_lands_only_when_taken(
    git_repo: Path,
) -> None:
    state = git_repo / ".git" / "lkstate"  # outside the tree's hash
    run = _sealed(git_repo, state)
    sealed = statcache.digest(state)
    (git_repo / "new.txt").write_text("x\n")
    want = git.tree_hash(git_repo)
    early = controller.EarlyTree(git_repo, state, run)
    early.wait()
    # Until lk-decide takes it, the sealed stat cache is untouched (a hash taken instead
    # still starts from it) and the early one waits beside it.
    assert statcache.digest(state) == sealed
    assert [p.name for p in state.iterdir() if ".early-" in p.name]
    assert early.take(git_repo, state) == want
    assert statcache.digest(state) != sealed  # the index the hash was taken with
    assert not [p.name for p in state.iterdir() if ".early-" in p.name]


def test_taken_for_another_tree_or_dropped_it_leaves_nothing(git_repo: Path, tmp_path: Path) -> None:
    state = git_repo / ".git" / "lkstate"
    run = _sealed(git_repo, state)
    sealed = statcache.digest(state)
    early = controller.EarlyTree(git_repo, state, run)
    assert early.take(tmp_path, state) is None  # another work tree: lk-decide hashes itself
    dropped = controller.EarlyTree(git_repo, state, run)
    dropped.drop()
    assert not [p.name for p in state.iterdir() if ".early-" in p.name]
    assert statcache.digest(state) == sealed


def test_a_hash_that_failed_fails_lk_decide_not_silently(tmp_path: Path) -> None:
    state, plain = tmp_path / "state", tmp_path / "not-a-repo"
    state.mkdir()
    plain.mkdir()
    early = controller.EarlyTree(plain, state, None)
    with pytest.raises(LoopkitError):
        early.take(plain, state)
