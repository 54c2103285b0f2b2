"""Names the evidence shows (``text.shown``) and the special files a worker leaves
(``specialfiles.clear_new``)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from loopkit import text
from loopkit.evidence import specialfiles


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"src/plain.txt", "src/plain.txt"),
        ("src/caf\u00e9.txt".encode(), "src/caf\u00e9.txt"),  # UTF-8 stays as it is
        (b"src/caf\xe9.txt", "src/caf\\xe9.txt"),
        (b"\xff\xfe", "\\xff\\xfe"),
    ],
)
def test_a_name_is_shown_as_text_any_json_reader_takes(raw: bytes, shown: str) -> None:
    name = text.shown(raw.decode("utf-8", "surrogateescape"))
    assert name == shown
    name.encode("utf-8")  # no lone surrogate left


def test_only_special_files_made_since_the_start_go(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "old-pipe")
    start = time.time_ns()
    time.sleep(0.02)
    (tmp_path / "src" / "deep").mkdir(parents=True)
    os.mkfifo(tmp_path / "src" / "deep" / ".gitignore")
    (tmp_path / "src" / "file.txt").write_text("x\n")
    os.symlink("file.txt", tmp_path / "src" / "link")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "src" / "sock"))
    (tmp_path / "ignored").mkdir()
    os.mkfifo(tmp_path / "ignored" / "pipe")
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".git" / "pipe")
    try:
        found = specialfiles.clear_new(tmp_path, since_ns=start, prune=["ignored/"])
    finally:
        server.close()
    assert found == [
        {"path": "src/deep/.gitignore", "type": "fifo"},
        {"path": "src/sock", "type": "socket"},
    ]
    assert not (tmp_path / "src" / "deep" / ".gitignore").exists()
    assert stat.S_ISFIFO((tmp_path / "old-pipe").lstat().st_mode)  # there before: kept
    assert stat.S_ISFIFO((tmp_path / "ignored" / "pipe").lstat().st_mode)
    assert stat.S_ISFIFO((tmp_path / ".git" / "pipe").lstat().st_mode)
    assert (tmp_path / "src" / "file.txt").exists() and (tmp_path / "src" / "link").is_symlink()


def test_with_the_folders_known_only_changed_folders_are_listed_and_none_is_missed(
    tmp_path: Path,
) -> None:
    # A clean room's folders are its tree's: a check that leaves a FIFO anywhere -- deep in
    # an old folder whose time it sets back, in a folder it made, in one it removed and
    # made again, in a submodule's folder -- has it found; old folders are not listed.
    for rel in ("a/b/c", "quiet/deep", "gone", "sub"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "quiet" / "deep" / "old-pipe").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "quiet" / "deep" / "old-pipe")
    folders = {"", "a", "a/b", "a/b/c", "quiet", "quiet/deep", "gone", "sub"}
    old = time.time_ns() - 10_000_000_000
    for rel in sorted(folders):
        os.utime(tmp_path / rel, ns=(old, old))
    time.sleep(0.02)
    start = time.time_ns()
    time.sleep(0.02)
    os.mkfifo(tmp_path / "a" / "b" / "c" / ".gitignore")
    os.utime(tmp_path / "a" / "b" / "c", ns=(old, old))  # the mtime set back: not the ctime
    (tmp_path / "new" / "deeper").mkdir(parents=True)
    os.mkfifo(tmp_path / "new" / "deeper" / ".gitattributes")
    os.rmdir(tmp_path / "gone")
    (tmp_path / "gone").mkdir()
    os.mkfifo(tmp_path / "gone" / "pipe")
    os.mkfifo(tmp_path / "sub" / ".git")
    found = specialfiles.clear_new(tmp_path, since_ns=start, folders=folders)
    assert [f["path"] for f in found] == [
        "a/b/c/.gitignore",
        "gone/pipe",
        "new/deeper/.gitattributes",
        "sub/.git",
    ]
    assert {"new", "new/deeper"} <= folders  # known from now on
    assert stat.S_ISFIFO((tmp_path / "quiet" / "deep" / "old-pipe").lstat().st_mode)
    # The same FIFOs made again after a second start: found again, in the folders now known.
    start = time.time_ns()
    time.sleep(0.02)
    os.mkfifo(tmp_path / "new" / "deeper" / "again")
    found = specialfiles.clear_new(tmp_path, since_ns=start, folders=folders)
    assert [f["path"] for f in found] == ["new/deeper/again"]


def test_the_tree_folders_are_its_trees_and_gitlinks(git_repo: Path) -> None:
    from loopkit import git

    (git_repo / "src" / "deep").mkdir(parents=True)
    (git_repo / "src" / "deep" / "f.txt").write_text("x\n")
    (git_repo / "top.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(git_repo), "add", "-A"], check=True)
    commit = "0123456789abcdef0123456789abcdef01234567"
    subprocess.run(
        [
            "git",
            "-C",
            str(git_repo),
            "update-index",
            "--add",
            "--cacheinfo",
            f"160000,{commit},mod",
        ],
        check=True,
    )
    tree = subprocess.run(
        ["git", "-C", str(git_repo), "write-tree"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert git.tree_folders(git_repo, tree) >= {"", "src", "src/deep", "mod"}
    assert "top.txt" not in git.tree_folders(git_repo, tree)
