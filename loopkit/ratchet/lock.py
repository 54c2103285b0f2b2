"""One loop per work tree.

The lock lives with the work tree -- in its own git folder (``<git-dir>/loopkit/loop.lock``),
not in the state folder -- so two loops with different state folders cannot both hold it.
It is a folder holding the owner's pid and start time (``pid``, ``started``). Whether the
owner is alive is what decides: a lock whose pid is gone, has ended (a zombie its parent
never reaps), or is now another process (a start time that differs: a reused pid), is
taken over and said so. A loop started by the
loop holding the lock (``phased-loop.sh`` starting ``loop.sh``) works under it.

Taking, checking and taking over happen under an ``flock`` on a guard file beside it:
two loops (or two reruns) started at once take it one after the other, and the second
finds the first alive and is refused with one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

from loopkit.errors import EnvironmentProblem

TYPE_CHECKING = False  # typing stays unloaded at run time
if TYPE_CHECKING:
    from collections.abc import Iterator

LOCK_NAME = "loop.lock"


def started(pid: int) -> str:
    """When process ``pid`` started, as text ("" when it cannot be told): Linux's start
    time in clock ticks since boot (``ticks N``), elsewhere ``ps``'s lstart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            line = f.read()
    except FileNotFoundError:
        return ""
    except OSError:
        line = ""
    if line:
        fields = line.rsplit(")", 1)[-1].split()
        return f"ticks {fields[19]}" if len(fields) >= 20 else ""
    if not os.path.isdir("/proc/self"):
        from loopkit import proc

        done = proc.capture(["ps", "-o", "lstart=", "-p", str(pid)])
        return done.stdout.decode("utf-8", "replace").strip()
    return ""


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True


def alive(pid: int, stamp: str) -> bool:
    """``pid`` runs and is the process that wrote ``stamp`` (its start time). A zombie (a
    process that ended and that its parent has not reaped) does not run."""
    if pid <= 0 or not _exists(pid) or _ended(pid):
        return False
    return not stamp or started(pid) == stamp


def _ended(pid: int) -> bool:
    """Whether ``pid`` ended but is still listed (Linux: state Z or X in /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in ("Z", "X")


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
        return int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0


def ancestors(pid: int) -> list[int]:
    """``pid`` and the processes above it, nearest first."""
    out: list[int] = []
    while pid > 1 and pid not in out and len(out) < 64:
        out.append(pid)
        pid = parent(pid)
    return out


class Held:
    """The lock as a step found or took it."""

    def __init__(self, path: Path, owner: int, *, nested: bool, taken_over: int | None) -> None:
        self.path = path
        self.owner = owner
        #: held by a loop above this one (phased-loop.sh): released by that loop
        self.nested = nested
        #: the pid of a gone loop whose lock was taken over (0: unknown), or None
        self.taken_over = taken_over


@contextlib.contextmanager
def guard(folder: Path) -> Iterator[None]:
    """The guard every lock step runs under (an ``flock``: gone with its process)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / "lock.guard", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {e.filename or folder}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read(path: Path) -> tuple[int, str]:
    """The pid (0 when unreadable) and start stamp a lock folder holds."""
    try:
        pid = int((path / "pid").read_text().strip() or 0)
    except (OSError, ValueError):
        pid = 0
    try:
        stamp = (path / "started").read_text().strip()
    except OSError:
        stamp = ""
    return pid, stamp


def take(folder: Path, owner: int, root: Path, *, outer: int | None = None) -> Held:
    """Take the lock for ``owner`` (a loop's pid), or refuse (exit 4) while a live loop
    holds it -- unless that loop is ``outer``, the loop that started this one (it says so
    in ``LK_LOCK_OWNER``) and one of ``owner``'s ancestors. Call under ``guard``."""
    path = folder / LOCK_NAME
    taken_over: int | None = None
    if path.exists() or path.is_symlink():
        pid, stamp = read(path)
        if pid and alive(pid, stamp):
            if pid == owner or (pid == outer and pid in ancestors(owner)):
                return Held(path, pid, nested=pid != owner, taken_over=None)
            raise EnvironmentProblem(
                f"another loop (pid {pid}) is running in this work tree ({root}): one loop "
                "per work tree -- two would save, revert and park each other's work. "
                f"Wait for it to end, or stop it (kill {pid})"
            )
        taken_over = pid
        _remove(path)
    part = folder / f"{LOCK_NAME}.{os.getpid()}"
    try:
        _remove(part)
        part.mkdir()
        (part / "started").write_text(started(owner) + "\n")
        (part / "pid").write_text(f"{owner}\n")
        os.rename(part, path)
    except OSError as e:
        _remove(part)
        raise EnvironmentProblem(f"cannot write {e.filename or path}: {e.strerror}") from None
    return Held(path, owner, nested=False, taken_over=taken_over)


def release(folder: Path, owner: int) -> bool:
    """Release the lock when ``owner`` holds it; True when it was released."""
    path = folder / LOCK_NAME
    pid, _ = read(path)
    if pid != owner:
        return False
    _remove(path)
    return True


def holder(folder: Path) -> int:
    """The pid of the live loop holding the lock, 0 when none does."""
    pid, stamp = read(folder / LOCK_NAME)
    return pid if pid and alive(pid, stamp) else 0


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
