"""Writing files so that a crash leaves the old content or the new, never half of one, and
the newest of some files (``newest``)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

#: The mode of a new file when ``keep_mode`` finds none to keep (0644, as git checks out).
NEW_FILE_MODE = 0o644


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new private file beside ``path`` (no tempfile module: its import costs more than
    this whole write, and a commit hook pays start-up on every commit)."""
    for _ in range(100):
        name = os.path.join(path.parent, f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def atomic_write(
    path: Path,
    data: str | bytes,
    *,
    sync: bool = False,
    keep_mode: bool = False,
    mode: int | None = None,
    mtime_ns: int | None = None,
) -> None:
    """Write ``path`` whole or not at all (a temp file beside it, then a rename).

    ``sync`` flushes the file to disk before the rename and its folder after it (a ledger
    checkpoint, a checklist, a journal: a power loss leaves the old content or the new);
    ``keep_mode`` gives the new file the old one's permission bits (a user's file
    rewritten in place keeps being executable, or private); ``mode``: the new file's
    permission bits (else private, 0600, when there is none to keep); ``mtime_ns``: its modification
    time, set before it appears (an index copied with its own: git's racy-entry rule).
    Text is written as UTF-8, line endings untouched.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if keep_mode:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if mtime_ns is not None:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries to disk (a file renamed into it or removed from it)."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def newest(paths: Iterable[Path]) -> Path | None:
    """The path last modified (one gone meanwhile is passed over); None when there is none."""
    best: tuple[int, Path] | None = None
    for path in paths:
        try:
            at = path.stat().st_mtime_ns
        except OSError:
            continue
        if best is None or at > best[0]:
            best = (at, path)
    return best[1] if best else None
