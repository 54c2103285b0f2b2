"""HEAD read from git's files (no process) says what ``git rev-parse`` says, in every ref
layout git writes, and declines (None) where only git can answer."""

from __future__ import annotations

from pathlib import Path

from loopkit import discovery, git
from loopkit.ratchet import trees
from tests.helpers import git as run_git


def _git_says(repo: Path) -> tuple[str, str]:
    commit = git.git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], cwd=repo, check=False)
    branch = git.git(["symbolic-ref", "-q", "HEAD"], cwd=repo, check=False)
    return commit.stdout.decode().strip(), branch.stdout.decode().strip()


def test_each_layout_reads_as_git_reads_it(git_repo: Path, tmp_path: Path) -> None:
    assert discovery.head_from_files(git_repo) == _git_says(git_repo)  # a loose branch
    run_git(git_repo, "pack-refs", "--all")
    assert not (git_repo / ".git/refs/heads/main").exists()
    assert discovery.head_from_files(git_repo) == _git_says(git_repo)  # packed-refs alone
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "two")  # loose beats packed
    assert discovery.head_from_files(git_repo) == _git_says(git_repo)
    run_git(git_repo, "checkout", "-q", "--detach", "HEAD~1")
    assert discovery.head_from_files(git_repo) == _git_says(git_repo)  # detached
    run_git(git_repo, "checkout", "-q", "--orphan", "unborn")
    assert discovery.head_from_files(git_repo) == ("", "refs/heads/unborn") == _git_says(git_repo)
    linked = tmp_path / "linked"
    run_git(git_repo, "worktree", "add", "-q", "-b", "side", str(linked), "main")
    run_git(linked, "commit", "-q", "--allow-empty", "-m", "side")
    assert (
        discovery.head_from_files(linked)
        == _git_says(linked)
        != discovery.head_from_files(git_repo)
    )


def test_a_symbolic_ref_below_head_is_left_to_git(git_repo: Path) -> None:
    run_git(git_repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    run_git(git_repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert discovery.head_from_files(git_repo) is None
    (git_repo / ".git" / "HEAD").write_text("ref: refs/remotes/x\n")
    assert discovery.head_from_files(git_repo) is None


def test_a_known_head_is_located_without_git_and_a_moved_one_is_asked(git_repo: Path) -> None:
    w = trees.Where(git_repo, git.git_dirs(git_repo).own, git_repo / ".loopkit")
    commit, tree, _ = trees.head_tree(w)  # as `lk task begin` reads it: now known
    calls: list[list[str]] = []
    real = git.git

    def counted(args, **kw):  # type: ignore[no-untyped-def]
        calls.append(list(args))
        return real(args, **kw)

    git.git = counted  # type: ignore[assignment]
    try:
        assert git.locate(git_repo, base="HEAD").base == commit
        assert git.resolve(git_repo, f"{commit}^{{tree}}") == tree
        assert calls == []
        run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "moved")  # behind its back
        moved = git.locate(git_repo, base="HEAD").base
    finally:
        git.git = real  # type: ignore[assignment]
    assert moved == _git_says(git_repo)[0] != commit


def test_head_and_its_tree_read_from_files_are_what_git_says(git_repo: Path) -> None:
    w = trees.Where(git_repo, git.git_dirs(git_repo).own, git_repo / ".loopkit")

    def git_says() -> tuple[str, str, str]:
        out = run_git(
            git_repo, "rev-parse", "HEAD^{commit}", "HEAD^{tree}", "--symbolic-full-name", "HEAD"
        )
        commit, tree, branch = out.split("\n")[:3]
        return commit, tree, branch

    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "loose")
    common = git.git_dirs(git_repo).common
    assert discovery.tree_from_files(common, git_says()[0]) == git_says()[1]  # from the file
    assert trees.head_tree(w) == git_says()
    run_git(git_repo, "gc", "-q")  # packed: git is asked, and says the same
    assert discovery.tree_from_files(common, git_says()[0]) is None
    assert trees.head_tree(w) == git_says()
    run_git(git_repo, "tag", "-a", "-m", "t", "v1")
    tag = run_git(git_repo, "rev-parse", "v1").strip()
    assert discovery.tree_from_files(common, tag) is None  # not a commit: git peels it


def test_a_worktree_kept_in_the_git_folder_is_found_as_git_finds_it(git_repo: Path) -> None:
    # A worktree kept inside the git folder: its own .git file stops git's walk there.
    room = git_repo / ".git" / "loopkit" / "queue" / "room"
    run_git(git_repo, "worktree", "add", "-q", "--detach", str(room), "HEAD")
    said = git.out(["rev-parse", "--absolute-git-dir", "--git-common-dir"], cwd=room)
    own, common = said.splitlines()
    found = discovery.find_dirs(room)
    assert found is not None
    assert (found.own, found.common) == (Path(own).resolve(), (room / common).resolve())
    # A folder inside the git folder with no .git of its own: git's rules decide.
    assert discovery.find_dirs(git_repo / ".git" / "loopkit") is None
    assert discovery.find_dirs(git_repo / ".git" / "refs") is None
