"""Files git cannot hold: FIFOs, sockets and device nodes in the work tree.

Git stores regular files, symlinks and gitlinks only. It skips an untracked FIFO or
socket, fails on a tracked path that became one ("can only add regular files"), and
*opens* one named ``.gitignore`` or ``.gitattributes`` -- which blocks for ever on a
FIFO nobody writes: a worker's ``mkfifo src/.gitignore`` would hang every later stage
that lets git look at the tree (lk-diff's hash, lk-decide's, the park's ``git status``).
So what the worker leaves of them goes with its run: lk-invoke walks the work tree
after the worker (``os.scandir``, no file opened; ``.git`` folders, the state folder and
the folders git ignored at the start are not entered), removes every such file made or
changed while the worker ran (its change time is the run's: no process can set it
back), and records them in ``run.special_files``; lk-diff reports each as a
``special_file`` violation. Nothing is lost: a FIFO holds no data, a socket's listener
ended with the worker's process group, and one there before the worker is left alone.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

#: What ``run.special_files`` says a file was.
_KINDS = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)

#: At most this many are recorded (all are removed).
MAX_RECORDED = 200
#: The kernel stamps a file's times from a clock coarser than the one ``time.time_ns()``
#: reads: a change made just after a start may read as up to a tick before it. Whatever
#: judges "changed since" by a file's change time takes this much off its start.
CLOCK_MARGIN_NS = 100_000_000


def kind_of(mode: int) -> str | None:
    """``fifo``, ``socket``, ``character device`` or ``block device``; None for what git
    can hold (a file, a symlink, a folder)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None


def clear_new(
    root: Path,
    *,
    since_ns: int,
    prune: Sequence[str] = (),
    folders: set[str] | None = None,
) -> list[dict[str, str]]:
    """Remove the special files under ``root`` whose change time is ``since_ns`` or later;
    return them as ``[{path, type}]`` (repository-relative, at most ``MAX_RECORDED``).

    ``prune``: repository-relative folders not entered (the state folder; folders git
    ignored at the start, ending in ``/`` or not). Folders named ``.git`` are never
    entered, and symlinks never followed.

    ``folders``: every folder under ``root`` as it stood at ``since_ns`` ("" the root
    itself), when the caller knows them all (a clean room: its tree's folders). Then only
    the folders whose change time is ``since_ns`` or later are listed -- a new entry, of
    whatever kind, changes its folder's change time, which no process can set back --
    and a folder new in one of them is walked whole and added to ``folders``."""
    skip = {p.rstrip("/") for p in prune if p.rstrip("/")}
    found: list[dict[str, str]] = []
    stack = [""] if folders is None else _changed(root, folders, since_ns)
    known = folders if folders is not None else set()
    while stack:
        rel = stack.pop()
        try:
            entries = os.scandir(os.path.join(root, rel) if rel else root)
        except OSError:
            continue
        with entries:
            for e in entries:
                try:  # the entry's type from the folder listing: no call but for the odd ones
                    if e.is_file(follow_symlinks=False):
                        continue
                    if e.is_dir(follow_symlinks=False):
                        sub = f"{rel}/{e.name}" if rel else e.name
                        if e.name != ".git" and sub not in skip and sub not in known:
                            stack.append(sub)
                            if folders is not None:
                                known.add(sub)
                        continue
                    if e.is_symlink():
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = kind_of(st.st_mode)
                if kind is None or st.st_ctime_ns < since_ns:
                    continue
                try:
                    os.unlink(e.path)
                except FileNotFoundError:
                    continue
                except OSError:  # left (a folder it cannot write): still reported
                    pass
                if len(found) < MAX_RECORDED:
                    found.append({"path": f"{rel}/{e.name}" if rel else e.name, "type": kind})
    return sorted(found, key=lambda f: f["path"])


def _changed(root: Path, folders: set[str], since_ns: int) -> list[str]:
    """The folders among ``folders`` whose change time is ``since_ns`` or later (one that is
    gone, or no longer a folder, is its parent's change)."""
    out = []
    for rel in folders:
        try:
            st = os.lstat(os.path.join(root, rel) if rel else root)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_ctime_ns >= since_ns:
            out.append(rel)
    return out
