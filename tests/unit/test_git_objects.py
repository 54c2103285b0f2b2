"""A blob loopkit writes without starting git is the object git would write (same id,
readable, ``fsck`` clean), in a linked worktree too; where the store is not the plain
one (SHA-256 objects) git writes it. A config value answered from the kept listing is
what ``git config --get`` says, after the file changes too."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import discovery, git, gitstore
from tests.helpers import git as run_git


def _objects(repo: Path) -> set[str]:
    found = set()
    for folder in (repo / ".git" / "objects").iterdir():
        if len(folder.name) == 2:
            found |= {folder.name + p.name for p in folder.iterdir()}
    return found


def test_a_blob_written_without_git_is_the_object_git_writes(
    git_repo: Path, tmp_path: Path
) -> None:
    data = b"journal \x00 text\n" * 50
    oid = gitstore.write_blob(git_repo, data, durable=True)
    assert oid == git.out(["hash-object", "--stdin"], cwd=git_repo, input=data).strip()
    assert git.git(["cat-file", "blob", oid], cwd=git_repo).stdout == data
    assert oid in _objects(git_repo)  # loose, where git looks first
    assert git.git(["fsck", "--strict", "--no-dangling"], cwd=git_repo).exit_code == 0
    assert gitstore.write_blob(git_repo, data) == oid  # there already: left as it is
    linked = tmp_path / "linked"
    run_git(git_repo, "worktree", "add", "-q", "-b", "side", str(linked), "main")
    own = git.git_dirs(linked).own
    other = gitstore.write_blob(own, b"from a linked worktree\n", dirs=discovery.dirs_of(own))
    assert git.git(["cat-file", "blob", other], cwd=git_repo).stdout == b"from a linked worktree\n"


def test_a_sha256_store_is_left_to_git(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    run_git(tmp_path, "init", "-q", "--object-format=sha256", str(repo))
    oid = gitstore.write_blob(repo, b"x\n")
    assert len(oid) == 64
    assert git.git(["cat-file", "blob", oid], cwd=repo).stdout == b"x\n"


def test_a_config_value_follows_the_file(git_repo: Path) -> None:
    assert git.config_value(git_repo, "loopkit.attest") is None
    run_git(git_repo, "config", "loopkit.attest", "require")
    assert git.config_value(git_repo, "loopkit.attest") == "require"
    run_git(git_repo, "config", "--add", "loopkit.attest", "off")  # the last one wins
    assert git.config_value(git_repo, "loopkit.attest") == "off"
    include = git_repo.parent / "extra.cfg"
    include.write_text("[loopkit]\n\tattest = sign\n")
    run_git(git_repo, "config", "include.path", str(include))
    assert git.config_value(git_repo, "loopkit.attest") == "sign"
    include.write_text("[loopkit]\n\tattest = require\n")  # the included file alone changed
    assert git.config_value(git_repo, "loopkit.attest") == "require"


def test_a_key_is_looked_up_in_any_case_its_subsection_as_written(git_repo: Path) -> None:
    run_git(git_repo, "config", "gpg.ssh.allowedSignersFile", "/x")
    run_git(git_repo, "config", "remote.Up.url", "/y")
    assert git.config_value(git_repo, "gpg.ssh.allowedSignersFile") == "/x"
    assert git.config_value(git_repo, "GPG.ssh.ALLOWEDSIGNERSFILE") == "/x"
    assert git.config_value(git_repo, "remote.Up.URL") == "/y"
    assert git.config_value(git_repo, "remote.up.url") is None  # as git config --get says


def test_blobs_are_read_in_one_batch_in_the_order_asked(git_repo: Path) -> None:
    datas = [b"one\n", b"", b"three\x00\nwith a newline at the end\n\n", b"one\n"]
    ids = [gitstore.write_blob(git_repo, d) for d in datas]
    assert git.blobs(git_repo, ids) == datas
    assert git.blobs(git_repo, []) == []
    tree = git.out(["rev-parse", "HEAD^{tree}"], cwd=git_repo)
    with pytest.raises(git.GitError):  # a tree, or an id the store lacks: never its bytes
        git.blobs(git_repo, [ids[0], tree])
    with pytest.raises(git.GitError):
        git.blobs(git_repo, ["0" * 40])


def test_sizes_read_from_loose_objects_are_gits(git_repo: Path) -> None:
    """A loose object's size is read from its own header, a packed one's asked of git:
    both as ``cat-file --batch-check`` says, a missing id left out."""
    packed = gitstore.write_blob(git_repo, b"packed " * 100)
    run_git(git_repo, "repack", "-adq")
    loose = [gitstore.write_blob(git_repo, d) for d in (b"", b"x\n", bytes(range(256)) * 999)]
    tree = git.out(["rev-parse", "HEAD^{tree}"], cwd=git_repo)
    ids = [*loose, packed, tree, "1" * 40]
    sizes = git.object_sizes(git_repo, ids)
    checked = git.out(
        ["cat-file", "--batch-check=%(objectname) %(objectsize)"],
        cwd=git_repo,
        input="".join(f"{i}\n" for i in ids).encode(),
    )
    want = {
        n: int(s) for n, _, s in (x.partition(" ") for x in checked.splitlines()) if s.isdigit()
    }
    assert sizes == want
    assert set(sizes) == {*loose, packed, tree}
    assert sizes[loose[2]] == 256 * 999
