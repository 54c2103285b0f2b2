"""The clean room's sync (loopkit.evidence.cleanroom): it lands on exactly the tree whatever the room
held, and its settled mark -- the shortcut of syncing by the difference between two trees
-- is a hint the hash after the checks keeps honest, never a way to a false pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import git
from loopkit.evidence import cleanroom
from loopkit.evidence.verify import in_clean_room

CHECK = [{"name": "calc", "run": "python3 check.py", "timeout": 30}]
# Passes when value.txt says good -- unless check.py itself is changed.
CHECK_PY = "import sys\nsys.exit(0 if open('value.txt').read() == 'good\\n' else 1)\n"


@pytest.fixture
def project(git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cleanroom.ROOM_ENV, str(tmp_path / "rooms"))
    (git_repo / "check.py").write_text(CHECK_PY)
    (git_repo / "value.txt").write_text("bad\n")
    for i in range(20):
        (git_repo / "pkg" / f"m{i}.py").parent.mkdir(exist_ok=True)
        (git_repo / "pkg" / f"m{i}.py").write_text(f"x = {i}\n")
    return git_repo


def _verify(root: Path, tmp_path: Path) -> dict:
    head = git.out(["rev-parse", "HEAD"], cwd=root)
    return in_clean_room(root, CHECK, log_dir=tmp_path / "logs", head=head).body


def _room_tree(room: Path) -> str:
    return git.tree_hash(room)


def test_a_settled_room_syncs_by_the_difference_and_lands_on_the_tree(
    project: Path, tmp_path: Path
) -> None:
    first = _verify(project, tmp_path)
    assert first["passed"] is False  # value.txt says bad
    room = cleanroom.home_of(project)
    mark = room / ".git" / cleanroom.SETTLED
    assert mark.read_text().split()[0] == first["tree"]  # the checks changed nothing
    (room / "debris.txt").write_text("left by a check\n")
    (room / "pkg" / "__pycache__").mkdir()
    (project / "value.txt").write_text("good\n")
    (project / "pkg" / "m3.py").unlink()
    (project / "pkg" / "new.py").write_text("y = 1\n")
    second = _verify(project, tmp_path)
    assert second["passed"] is True, second
    assert second["tree"] == git.tree_hash(project) == _room_tree(room)
    assert not (room / "debris.txt").exists() and not (room / "pkg" / "__pycache__").exists()
    assert not (room / "pkg" / "m3.py").exists() and (room / "pkg" / "new.py").is_file()
    assert git.out(["ls-files", "-o"], cwd=room) == ""  # nothing else, ignored or not
    assert git.git(["diff-files", "--quiet"], cwd=room, check=False).exit_code == 0
    assert mark.read_text().split()[0] == second["tree"]


def test_a_room_changed_between_verifications_never_passes(project: Path, tmp_path: Path) -> None:
    # What a worker without a sandbox, or any process of the user's, could do: rewrite a
    # file of the room the next tree shares with the last one (the check itself). The
    # settled sync does not look at it; the hash after the checks does -- the check that
    # passed ran on a file that is not the tree's, and the verification fails.
    _verify(project, tmp_path)
    room = cleanroom.home_of(project)
    (room / "check.py").write_text("raise SystemExit(0)\n")
    (project / "pkg" / "m1.py").write_text("x = 'changed'\n")  # another tree, same check.py
    body = _verify(project, tmp_path)
    assert body["passed"] is False and body["changed_by_checks"] == ["check.py"], body
    assert not (room / ".git" / cleanroom.SETTLED).exists()
    # Unsettled, the next sync checks every file: the room is whole again.
    body = _verify(project, tmp_path)
    assert body["passed"] is False and not body.get("changed_by_checks"), body
    assert (room / "check.py").read_text() == CHECK_PY


@pytest.mark.parametrize("forged", ["--help", "0" * 40, "nothing at all", ""])
def test_a_mark_that_does_not_hold_is_not_taken(project: Path, tmp_path: Path, forged: str) -> None:
    # A mark naming another tree, no tree, an option; or one whose index was rewritten
    # since: the sync checks every file, and the room holds exactly the tree.
    _verify(project, tmp_path)
    room = cleanroom.home_of(project)
    mark = room / ".git" / cleanroom.SETTLED
    # the mark's first line: the tree and the index's stamp; the rest: the tree's
    # .gitattributes entries, kept as they are so only the forged part differs
    first, _, rest = mark.read_text().partition("\n")
    tree, stamp = first.split()
    (room / "check.py").write_text("raise SystemExit(0)\n")
    mark.write_text(f"{forged} {stamp}\n{rest}")
    body = _verify(project, tmp_path)
    assert body["passed"] is False and not body.get("changed_by_checks"), body
    assert (room / "check.py").read_text() == CHECK_PY
    # The right tree, but the index rewritten since (a check's `git add`): not taken.
    (room / "check.py").write_text("raise SystemExit(0)\n")
    git.git(["update-index", "--refresh"], cwd=room, check=False)
    git.git(["add", "pkg/m0.py"], cwd=room)
    mark.write_text(f"{tree} {stamp}\n{rest}")
    body = _verify(project, tmp_path)
    assert body["passed"] is False and not body.get("changed_by_checks"), body
    assert (room / "check.py").read_text() == CHECK_PY


def test_a_room_settled_on_a_tree_the_store_lost_checks_every_file(
    project: Path, tmp_path: Path
) -> None:
    # The repository put back at the same path (a backup restored, a fresh clone, a prune):
    # the room's mark names a tree its store no longer has. The sync checks every file
    # instead of asking git for a difference it cannot give (the naive sync stops there).
    import shutil

    first = _verify(project, tmp_path)
    room = cleanroom.home_of(project)
    assert (room / ".git" / cleanroom.SETTLED).read_text().split()[0] == first["tree"]
    shutil.rmtree(project / ".git")
    git.git(["init", "-q"], cwd=project)
    (project / "value.txt").write_text("good\n")
    (project / "pkg" / "m3.py").unlink()
    git.git(["add", "-A"], cwd=project)
    git.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "again"], cwd=project)
    assert git.git(["cat-file", "-e", first["tree"]], cwd=project, check=False).exit_code != 0
    body = _verify(project, tmp_path)
    assert body["passed"] is True, body
    assert body["tree"] == git.tree_hash(project) == _room_tree(room)
    assert not (room / "pkg" / "m3.py").exists()


def _lock_is_free(root: Path) -> bool:
    """Whether another holder could take the clean room now (a second flock, not waiting)."""
    import fcntl

    with open(cleanroom.home_of(root).with_suffix(".lock"), "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return True


def test_an_early_room_is_the_room_the_checks_get_and_is_held_until_they_end(
    project: Path, tmp_path: Path
) -> None:
    # lk attempt begins the sync as lk-diff begins and hands it the tree once written.
    # Naive variants caught: a room synced early but let go before the checks (another
    # verification could sync it away meanwhile), one taken for another tree than the
    # checks asked for, one left held when it is not taken.
    _verify(project, tmp_path)  # the room exists and is settled
    (project / "value.txt").write_text("good\n")
    tree = git.tree_hash(project)
    head = git.out(["rev-parse", "HEAD"], cwd=project)
    early = cleanroom.EarlyRoom(project, head=head, carry=[])
    early.sync(tree)
    with cleanroom.held(project, tree, head=head, early=early) as room:
        assert room.tree == tree and _room_tree(room.path) == tree
        assert not _lock_is_free(project)  # still held while the checks run
    assert _lock_is_free(project)
    # Asked for another tree: not taken, let go, and the room synced as asked.
    early = cleanroom.EarlyRoom(project, head=head, carry=[])
    early.sync(tree)
    (project / "value.txt").write_text("bad\n")
    other = git.tree_hash(project)
    with cleanroom.held(project, other, head=head, early=early) as room:
        assert room.tree == other and _room_tree(room.path) == other
    assert _lock_is_free(project)
    # Never handed a tree (lk-diff failed first): dropped, nothing held.
    early = cleanroom.EarlyRoom(project, head=head, carry=[])
    early.release()
    assert _lock_is_free(project)


def test_debris_where_the_next_tree_puts_a_file_gives_way_to_it(
    project: Path, tmp_path: Path
) -> None:
    # The room is cleared before the tree is read in: a file a check left where the next
    # tree adds one of its own is never taken for the tree's.
    _verify(project, tmp_path)
    room = cleanroom.home_of(project)
    (room / "new.py").write_text("left by a check\n")
    (project / "new.py").write_text("the tree's own\n")
    body = _verify(project, tmp_path)
    assert body["tree"] == _room_tree(room) == git.tree_hash(project)
    assert (room / "new.py").read_text() == "the tree's own\n"
