"""A note loopkit adds without starting git is the note ``git notes add -f -C`` adds: the
same notes tree, a commit on the ref's last one, the ref moved under its lock with
git's reflog line; git reads it, adds after it, and ``fsck --strict`` is clean. Where
git would do more (notes packed away, a fanned-out notes tree, the ref moved, a reflog
for every ref, a commit encoding) git is asked instead."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loopkit import git, gitstore
from tests.helpers import git as run_git

REF = "refs/notes/test-attest"


def _commits(repo: Path, n: int) -> list[str]:
    found = []
    for i in range(n):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-qm", f"c{i}")
        found.append(run_git(repo, "rev-parse", "HEAD").strip())
    return found


def _blob(repo: Path, text: str) -> str:
    return git.out(["hash-object", "-w", "--stdin"], cwd=repo, input=text.encode()).strip()


def test_a_note_added_without_git_is_the_note_git_adds(git_repo: Path, tmp_path: Path) -> None:
    a, b, c = _commits(git_repo, 3)
    run_git(git_repo, "notes", "--ref", REF, "add", "-m", "by git", a)
    twin = tmp_path / "twin"
    shutil.copytree(git_repo, twin, symlinks=True)
    blob = _blob(git_repo, '{"statement": 1}\n')
    before = run_git(git_repo, "rev-parse", REF).strip()
    assert gitstore.add_note(git_repo, REF, b, blob)
    assert run_git(git_repo, "notes", "--ref", REF, "show", b) == '{"statement": 1}\n'
    assert run_git(git_repo, "rev-parse", f"{REF}~1").strip() == before
    # The tree git makes for the same note.
    _blob(twin, '{"statement": 1}\n')
    run_git(twin, "notes", "--ref", REF, "add", "-f", "-C", blob, b)
    assert run_git(git_repo, "rev-parse", f"{REF}^{{tree}}") == run_git(
        twin, "rev-parse", f"{REF}^{{tree}}"
    )
    ours, theirs = (
        run_git(r, "reflog", "show", "-1", "--format=%H %gs %gn <%ge>", REF)
        for r in (git_repo, twin)
    )
    ident = run_git(git_repo, "var", "GIT_COMMITTER_IDENT").rsplit(" ", 2)[0]
    assert ours.split(" ", 1)[1] == theirs.split(" ", 1)[1]
    assert ours.split(" ", 1)[1] == f"notes: Notes added by 'git notes add' {ident}\n"
    # With the tests' fixed dates, the very commit git makes.
    assert ours.split(" ", 1)[0] == theirs.split(" ", 1)[0]
    # Replaced, then git adds after it.
    other = _blob(git_repo, "again\n")
    assert gitstore.add_note(git_repo, REF, b, other)
    run_git(git_repo, "notes", "--ref", REF, "add", "-m", "git again", c)
    listed = run_git(git_repo, "notes", "--ref", REF, "list").split()
    assert {a, b, c} <= set(listed) and other in listed and blob not in listed
    run_git(git_repo, "fsck", "--strict")


@pytest.mark.parametrize(
    "case", ["packed", "fanned out", "reflog always", "an encoding", "first note"]
)
def test_where_git_would_do_more_it_is_asked(git_repo: Path, case: str) -> None:
    a, b = _commits(git_repo, 2)
    blob = _blob(git_repo, "statement\n")
    if case == "first note":  # no notes yet: ours is the first, with no parent
        assert gitstore.add_note(git_repo, REF, b, blob)
        assert run_git(git_repo, "rev-list", "--count", REF).strip() == "1"
        return
    run_git(git_repo, "notes", "--ref", REF, "add", "-m", "by git", a)
    if case == "packed":
        run_git(git_repo, "gc", "-q", "--prune=now")
    elif case == "fanned out":
        note = run_git(git_repo, "notes", "--ref", REF, "list", a).strip()
        inner = git.out(["mktree"], cwd=git_repo, input=f"100644 blob {note}\t{a[2:]}\n".encode())
        tree = git.out(["mktree"], cwd=git_repo, input=f"040000 tree {inner}\t{a[:2]}\n".encode())
        commit = git.out(["commit-tree", tree, "-m", "fanned"], cwd=git_repo)
        run_git(git_repo, "update-ref", REF, commit)
    elif case == "an encoding":  # git names it in the notes commit it writes
        run_git(git_repo, "config", "i18n.commitEncoding", "ISO-8859-1")
    else:
        run_git(git_repo, "config", "core.logAllRefUpdates", "always")
    before = run_git(git_repo, "rev-parse", REF)
    assert not gitstore.add_note(git_repo, REF, b, blob)
    assert run_git(git_repo, "rev-parse", REF) == before


def test_notes_fan_out_into_folders_as_git_fans_them(git_repo: Path, tmp_path: Path) -> None:
    # git writes its notes flat until every first hex digit starts two notes, then in
    # folders named by a commit's first two digits: step by step, the tree loopkit writes
    # is the tree git writes for the same notes, through the change of shape and after.
    twin = tmp_path / "twin"
    shutil.copytree(git_repo, twin, symlinks=True)
    note = _blob(git_repo, "statement\n")
    _blob(twin, "statement\n")
    names = "\n".join(f"o{i}" for i in range(240))
    for repo in (git_repo, twin):
        for i in range(240):
            (repo / f"o{i}").write_text(f"object {i}\n")
    objects = git.out(["hash-object", "-w", "--stdin-paths"], cwd=git_repo, input=names.encode())
    git.out(["hash-object", "-w", "--stdin-paths"], cwd=twin, input=names.encode())
    shapes = set()
    for i, obj in enumerate(objects.split()):
        assert gitstore.add_note(git_repo, REF, obj, note), f"note {i} went to git"
        run_git(twin, "notes", "--ref", REF, "add", "-f", "-C", note, obj)
        ours, theirs = (
            run_git(r, "rev-parse", f"{REF}^{{tree}}").strip() for r in (git_repo, twin)
        )
        assert ours == theirs, f"note {i}: the notes tree is not git's"
        top = run_git(git_repo, "ls-tree", f"{REF}^{{tree}}").split("\n", 1)[0]
        shapes.add(top.split()[1])
    assert shapes == {"blob", "tree"}  # flat first, in folders since
    run_git(git_repo, "fsck", "--strict")
    listed = run_git(git_repo, "notes", "--ref", REF, "list").split()
    assert len(listed) == 2 * 240
