"""The stat cache: loopkit's own index of the working tree, which the worker never wrote.

git hashes a working tree fast by trusting an index's stat data: a file whose size,
times and inode match its entry is not read again. The real index is the worker's to
write -- an assume-unchanged bit or a forged stat entry hides a change from every hash
taken through it -- and a hash that reads every file instead costs ~20 ms a thousand
files. So loopkit keeps an index of its own, ``<state>/stat-index``:

- lk-invoke makes it, before the first worker, from the real index as the user left it
  (a task starts on a clean tree), and seals it with the state folder: its sha256 goes
  into ``run.state_seal.stat_index``;
- lk-diff and lk-decide take their tree hashes through a copy of it -- but only while its
  content is what lk-invoke sealed; if it changed since (the worker wrote it), through no
  index at all: every file is read, nothing trusted. Within one ``lk attempt``, lk-decide's
  hash starts from the index lk-diff's left instead (``Handoff``), while it is unchanged;
- lk-decide leaves there the index its hash was taken with (the worker has ended: no one
  else writes in between), which the recipes' own hash then starts from, and the next
  lk-invoke seals. A stat cache the worker wrote is so never sealed, never trusted.

Without a seal (a command run alone, not after lk-invoke) the real index serves, as git
itself would.

In the sandbox the state folder is out of the worker's sight altogether.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit import git
from loopkit.digest import file_sha256, sha256
from loopkit.files import atomic_write

NAME = "stat-index"
#: The key of its sha256 in the state seal (``ledger.seal``).
SEAL_KEY = "stat_index"


def path(state: Path) -> Path:
    return state / NAME


def beside(state: Path, kind: str) -> Path:
    """A stat cache of this process's own beside the sealed one (``NAME.KIND-PID``: lk-diff's
    handoff, lk-decide's early hash), removed when it is done with; one a killed process
    left is removed by the next ``ensure``."""
    return state / f"{NAME}.{kind}-{os.getpid()}"


def _sweep(state: Path) -> None:
    """Remove what ``beside`` left for processes that are gone (a ``kill -9``)."""
    try:
        names = [e.name for e in os.scandir(state) if e.name.startswith(NAME + ".")]
    except OSError:
        return
    for name in names:
        pid = name.rpartition("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's): not ours to remove
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            os.unlink(state / name)
        except OSError:
            pass


def digest(state: Path) -> str:
    """sha256 of the stat cache's content; ``absent`` when there is none."""
    return _file_digest(path(state))


def _file_digest(file: Path) -> str:
    try:
        return file_sha256(file)
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        return f"unreadable: {e.strerror}"


class Handoff:
    """An index a hash after the worker left for a later one in the same process (``lk
    attempt``: lk-diff's, for lk-decide's hash of the tree on disk): where it is, the tree
    it holds, and the sha256 of the bytes loopkit wrote there -- taken (``seed``) only
    while its content is still that. Its stat data are loopkit's own, taken after the
    worker ended, as the stat cache's are; the later hash then reads again only what
    changed since."""

    def __init__(self, file: Path, tree: str, sha: str) -> None:
        self.file, self.tree, self._sha = file, tree, sha

    @classmethod
    def leave(cls, index: Path, file: Path, tree: str) -> Handoff:
        """A copy of ``index`` (holding ``tree``) at ``file``, its mtime kept (git's
        racy-entry rule), hashed from the very bytes written: no one can change it between
        the write and the hash."""
        data = index.read_bytes()
        atomic_write(file, data, mtime_ns=os.stat(index).st_mtime_ns)
        return cls(file, tree, sha256(data).hexdigest())

    def seed(self) -> Path | None:
        """The index, when it is still as it was left; else None."""
        return self.file if _file_digest(self.file) == self._sha else None

    def drop(self) -> None:
        try:
            os.unlink(self.file)
        except OSError:
            pass


def ensure(state: Path, real_index: Path) -> None:
    """Make the stat cache from the real index when there is none yet (before a worker
    runs: lk-invoke). A copy that keeps the index's mtime, so git's racy-entry rule holds.
    What killed processes left beside it goes first."""
    _sweep(state)
    if path(state).exists():
        return

    try:
        git.copy_index(real_index, path(state))
    except (OSError, git.GitError):
        pass  # a cache: without it, hashes go through the real index as before


def seed(state: Path, seal: Any) -> Path | None:
    """What a tree hash after the worker starts from: the stat cache while it is what
    lk-invoke sealed (``run.state_seal``), ``git.NO_INDEX`` once it changed, and None (the
    real index) with no seal to go by."""
    sealed = seal.get(SEAL_KEY) if isinstance(seal, Mapping) else None
    if not isinstance(sealed, str) or not sealed:
        return None
    return path(state) if sealed != "absent" and digest(state) == sealed else git.NO_INDEX
