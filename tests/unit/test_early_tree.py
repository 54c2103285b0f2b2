"""controller.EarlyTree: lk-decide's hash of the tree on disk, begun by lk attempt the
moment the last check's process ended (beside the clean room's own hash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import git
from loopkit.decision import controller, ledger
from loopkit.errors import LoopkitError
from loopkit.evidence import statcache


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


def test_taken_for_another_tree_or_dropped_it_leaves_nothing(
    git_repo: Path, tmp_path: Path
) -> None:
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


def _handed(repo: Path, state: Path) -> statcache.Handoff:
    """What lk-diff leaves within lk attempt: a copy of the index its hash was taken with."""
    scratch = state / "scratch-index"
    tree = git.tree_hash(repo, seed=statcache.path(state), keep=scratch)
    handed = statcache.Handoff.leave(scratch, state / "stat-index.diff-test", tree)
    assert handed.file.stat().st_mtime_ns == scratch.stat().st_mtime_ns  # git's racy rule
    return handed


def test_it_starts_from_the_index_lk_diff_left_while_that_is_as_it_was_left(
    git_repo: Path,
) -> None:
    # Within lk attempt, lk-decide's hash starts from lk-diff's index (stat data loopkit
    # took after the worker) instead of the stat cache sealed before it.
    state = git_repo / ".git" / "lkstate"
    run = _sealed(git_repo, state)
    (git_repo / "new.txt").write_text("x\n")
    handed = _handed(git_repo, state)
    assert handed.seed() == handed.file
    (git_repo / "later.txt").write_text("written after lk-diff\n")  # a check, say
    early = controller.EarlyTree(git_repo, state, run, handed=handed)
    assert early.take(git_repo, state) == git.tree_hash(git_repo) != handed.tree


def _forge(index: Path, name: bytes, path: Path) -> None:
    """Give the entry ``name`` of the (version 2) index the stat data of ``path`` as it is
    now, its content id left as it was: what a forger does to hide a change from git."""
    import hashlib
    import os
    import struct

    data = bytearray(index.read_bytes())
    count = struct.unpack(">I", data[8:12])[0]
    off, st = 12, os.stat(path)
    for _ in range(count):
        length = struct.unpack(">H", data[off + 60 : off + 62])[0] & 0xFFF
        if bytes(data[off + 62 : off + 62 + length]) == name:
            stat = (int(st.st_ctime), st.st_ctime_ns % 10**9, int(st.st_mtime),
                    st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF)  # fmt: skip
            data[off : off + 24] = struct.pack(">6I", *stat)
            data[off + 36 : off + 40] = struct.pack(">I", st.st_size)
            data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
            index.write_bytes(bytes(data))
            later = st.st_mtime + 5  # the file no longer "racily clean": its stat trusted
            os.utime(index, (later, later))
            return
        off += (62 + length + 8) & ~7
    raise AssertionError(f"{name!r} is not in {index}")


def test_an_index_changed_since_it_was_left_is_not_started_from(git_repo: Path) -> None:
    # Naive variant caught: trusting the stat data of a file anyone can write between
    # lk-diff and lk-decide (without the sandbox): an entry given the stat data of a file
    # changed since hides the change from a hash that starts there.
    state = git_repo / ".git" / "lkstate"
    run = _sealed(git_repo, state)
    (git_repo / "a.txt").write_text("as lk-diff saw it\n")
    handed = _handed(git_repo, state)
    (git_repo / "a.txt").write_text("changed after !!\n")  # the same size
    _forge(handed.file, b"a.txt", git_repo / "a.txt")
    forged = git.tree_hash(git_repo, seed=handed.file)
    assert forged == handed.tree  # the forgery works on a hash that trusts it
    assert handed.seed() is None
    early = controller.EarlyTree(git_repo, state, run, handed=handed)
    assert early.take(git_repo, state) == git.tree_hash(git_repo, seed=git.NO_INDEX) != forged


def test_what_a_killed_process_left_beside_the_stat_cache_goes_at_the_next_start(
    git_repo: Path,
) -> None:
    # lk-diff's handoff and lk-decide's early hash are files of their process's own
    # (statcache.beside); a `kill -9` leaves them. The next lk-invoke removes those of
    # processes that are gone, never a live one's.
    import os
    import subprocess
    import sys

    state = git_repo / ".git" / "lkstate"
    _sealed(git_repo, state)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = state / f"{statcache.NAME}.diff-{gone}"
    left.write_bytes(b"stale")
    mine = statcache.beside(state, "early")
    mine.write_bytes(b"in use")
    assert mine.name == f"{statcache.NAME}.early-{os.getpid()}"
    statcache.ensure(state, git_repo / ".git" / "index")
    assert not left.exists() and mine.exists() and statcache.path(state).exists()
