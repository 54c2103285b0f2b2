"""Names the evidence shows (``text.shown``) and the special files a worker leaves
(``specialfiles.clear_new``)."""

from __future__ import annotations

import os
import socket
import stat
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
