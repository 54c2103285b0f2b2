"""The one place loopkit starts processes.

Every child runs in a session of its own, so a timeout or a cancellation can end the
whole process group -- grandchildren included -- with SIGTERM, then SIGKILL after a
grace period. Output goes to a file, never only to a pipe a grandchild could hold open.

Nothing outlives its run. On Linux loopkit makes itself a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``): a daemon that double-forks out of the worker's tree, into a
session of its own, is re-parented to loopkit instead of init, so when the worker or a
check ends, every descendant is found and ended -- in its group, out of it, or orphaned.
A worker whose leader exits while a child keeps its output pipe open is ended the same
way (the deadline holds whether or not the leader lives). And a loopkit command whose
parent dies (``kill -9`` of the loop) gets SIGTERM (``PR_SET_PDEATHSIG``), which ends what
it started.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from loopkit import timing
from loopkit.values import record

#: Seconds between SIGTERM and SIGKILL when a group is stopped.
GRACE_S = 2.0
#: Seconds a worker's output may stay open after its leader exited (a child holding it).
LINGER_S = 1.0
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: Leaders of the runs in progress in this process: their trees are not orphans.
_ACTIVE: set[int] = set()
#: Held while a child is started and entered in ``_ACTIVE``, and while ``orphans`` looks:
#: a git call a thread makes as a run ends is never taken for that run's leftover.
_STARTING = threading.Lock()
_guarded = False
_subreaper = False


def _prctl(option: int, value: int) -> bool:
    """prctl(2) through ``_ctypes`` alone: the ``ctypes`` package on top of it costs every
    command ~4 ms of start-up for this one call (int arguments, an int result)."""
    try:
        import _ctypes

        c: Any = _ctypes  # typed by the stubs as ctypes' own internals

        class _Int(c._SimpleCData):  # type: ignore[misc]
            _type_ = "i"

        class _Function(c.CFuncPtr):  # type: ignore[misc]
            _flags_ = c.FUNCFLAG_CDECL | c.FUNCFLAG_USE_ERRNO
            _restype_ = _Int

        class _Libc:
            _handle = c.dlopen(None)

        prctl = _Function(("prctl", _Libc()))
        return int(prctl(option, value, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError):
        return False  # not Linux: no subreaper, groups and /proc are what there is


def _is_command() -> bool:
    """Whether this process is a loopkit command (lk-invoke, lk, python -m loopkit.cli...),
    not a program that runs one in-process (a test runner, an embedding tool), whose
    other children are its own business."""
    first = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return first.startswith("lk") or "loopkit" in (sys.argv[0] if sys.argv else "")


def guard() -> None:
    """For a loopkit command that starts workers or checks (never for a program that
    embeds loopkit: its other children are its own): become a child subreaper, turn
    SIGTERM into KeyboardInterrupt (so what was started is ended on the way out, exit
    130), and receive SIGTERM when the parent dies. Once per process; where the OS has
    neither, groups and /proc are what there is."""
    global _guarded
    if _guarded or not _is_command():
        return
    _guarded = True

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, terminated)
    global _subreaper
    _subreaper = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) and os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGTERM)  # the parent died before the request


def now_ticks() -> int:
    """The time since boot in the clock ticks /proc counts process start times in."""
    try:
        with open("/proc/uptime", "rb") as f:
            up = float(f.read().split()[0])
        return int(up * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def _table() -> list[tuple[int, int, int, int]]:
    """Every live (not zombie) process as (pid, parent, process group, start time in
    clock ticks), read from /proc; empty where there is no /proc."""
    out: list[tuple[int, int, int, int]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) < 20 or fields[0] == b"Z":
            continue
        out.append((int(name), int(fields[1]), int(fields[2]), int(fields[19])))
    return out


Table = list[tuple[int, int, int, int]]


def _children(pid: int, since: int = 0, table: Table | None = None) -> dict[int, list[int]]:
    """Every live process's children; with ``since``, a child of ``pid`` itself counts
    only when it started at or after it."""
    parents: dict[int, list[int]] = {}
    for child, parent, _, started in _table() if table is None else table:
        if parent == pid and since and started < since:
            continue  # a child of ours from before the run: not its leftover
        parents.setdefault(parent, []).append(child)
    return parents


def orphans(since: int = 0, table: Table | None = None) -> set[int]:
    """Processes re-parented to this one (it is their subreaper) and everything under
    them, leaving out the trees of the runs in progress. Empty unless ``guard`` made this
    process a subreaper: then every child it did not start itself is such an orphan."""
    if not _subreaper:
        return set()
    with _STARTING:
        tree = _children(os.getpid(), since, table)
        todo = [p for p in tree.get(os.getpid(), []) if p not in _ACTIVE]
    found: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(tree.get(pid, []))
    return found


def end_orphans(*, since: int = 0, grace_s: float = GRACE_S) -> None:
    """SIGTERM what ``orphans`` finds (those started since ``since``, a ``now_ticks``
    value), then SIGKILL what is left after ``grace_s``; reap."""
    left = orphans(since)
    if not left:
        return
    _signal_pids(left, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(left)
        left = {p for p in left | orphans(since) if _alive(p)}
        if not left:
            return
        time.sleep(0.02)
    left |= orphans(since)
    _signal_pids(left, signal.SIGKILL)
    time.sleep(0.01)
    _reap(left)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _reap(pids: set[int]) -> None:
    """Collect the exit status of those of ``pids`` that became our children (orphans
    re-parented to us): a zombie would otherwise stay in the process table."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


@record
class Finished:
    """A process that has ended (or was ended).

    This module's records are ``loopkit.values.record`` classes: every command builds
    them, and ``dataclasses`` (with ``inspect`` under it) costs a command that needs no
    click -- ``lk workspace`` -- more of its start-up than its whole work."""

    exit_code: int | None  # None when loopkit killed it
    duration_s: float
    timed_out: bool = False
    stopped: str | None = None  # why loopkit stopped it: "timeout", "cancelled", ...
    output: bytes = b""  # captured output (when not written to a file)
    output_path: Path | None = None


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def _escaped(pgid: int, known: set[int], table: Table | None = None) -> set[int]:
    """Live descendants of ``pgid``'s leader (and of ``known``) outside its process group.

    Claude Code, for one, starts its Bash tool in a session of its own: ending the
    worker's group alone would leave that shell and its children running. Read from
    /proc (nothing found where there is none).
    """
    parents: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    for pid, parent, group, _ in _table() if table is None else table:
        parents.setdefault(parent, []).append(pid)
        groups[pid] = group
    found: set[int] = set()
    todo = [pgid, *known]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found | known if pid in groups and groups[pid] != pgid}


def _childless() -> bool:
    """Whether this process has no child at all, live or not yet reaped (one system call)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    except (AttributeError, OSError):
        pass  # no waitid here: the process table answers
    return False


def end_leftovers(pgid: int, *, since: int, grace_s: float = 0.2) -> None:
    """End what a finished run left behind: its process group, descendants that left it,
    orphans re-parented to loopkit (a double-forked daemon). When the group is empty, a
    child subreaper with no child at all has nothing left to end (every descendant whose
    parent died became its child); otherwise one look at the process table tells whether
    anything is left (the common case), and ``kill_group`` and ``end_orphans`` look again
    until it is all gone."""
    if not group_alive(pgid):
        if _subreaper and _childless():
            return
        table = _table()
        if not _escaped(pgid, set(), table) and not orphans(since, table):
            return
    kill_group(pgid, grace_s=grace_s)
    end_orphans(since=since, grace_s=grace_s)


def _signal_pids(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_group(
    pgid: int, *, grace_s: float = GRACE_S, leader: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM the group, wait up to ``grace_s`` for it to go, then SIGKILL what is left.

    Descendants that left the group (a new session of their own) are ended the same way.
    ``leader`` (our own child) is reaped while waiting: an unreaped zombie still counts
    as a member of its group and would make every stop take the whole grace period.
    """
    escaped = _escaped(pgid, set())
    if not _signal_group(pgid, signal.SIGTERM) and not escaped:
        return
    _signal_pids(escaped, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        more = _escaped(pgid, escaped)
        _signal_pids(more - escaped, signal.SIGTERM)
        escaped = more
        if not group_alive(pgid) and not escaped:
            return
        time.sleep(0.02)
    _signal_group(pgid, signal.SIGKILL)
    _signal_pids(_escaped(pgid, escaped), signal.SIGKILL)


def _popen(
    cmd: str | Sequence[str],
    *,
    shell: bool,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    stdin: int | IO[bytes] | None,
    stdout: int | IO[bytes],
    stderr: int | IO[bytes],
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cmd if shell else list(cmd),
        shell=shell,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )


def run(
    cmd: str | Sequence[str],
    *,
    shell: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input: bytes | None = None,
    output: str | os.PathLike[str] | None = None,
    reap: bool = True,
    should_stop: Callable[[], str | None] | None = None,
    poll_s: float = 0.2,
) -> Finished:
    """Run to completion (or ``timeout``), stdout and stderr merged.

    With ``output`` the merged output goes to that file; otherwise it is returned in
    ``Finished.output``. With ``reap`` anything the command left running in its process
    group is ended too, so a check cannot leave a server behind. ``should_stop`` is asked
    every ``poll_s`` while the command runs; a reason it returns (``"cancelled"``) ends the
    group at once (``Finished.stopped``).
    """
    start = time.monotonic()
    since = now_ticks()
    out_path = Path(output) if output is not None else None
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        sink: IO[bytes] = open(out_path, "wb")  # noqa: SIM115
    else:
        import tempfile

        sink = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        stdin_arg: int | None = subprocess.PIPE if input is not None else subprocess.DEVNULL
        with _STARTING:
            proc = _popen(
                cmd,
                shell=shell,
                cwd=cwd,
                env=env,
                stdin=stdin_arg,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            _ACTIVE.add(proc.pid)
        try:
            if input is not None and proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(input)
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
            timed_out = False
            stopped: str | None = None
            try:
                code: int | None = _wait(proc, timeout, should_stop, poll_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                stopped = "timeout"
            except _Stopped as why:
                stopped = why.reason
            except BaseException:  # interrupted (Ctrl-C, SIGTERM): end all it started
                kill_group(proc.pid, leader=proc)
                end_orphans(since=since, grace_s=0.2)
                raise
            if stopped is not None:
                kill_group(proc.pid, leader=proc)
                proc.wait()
                code = None
        finally:
            _ACTIVE.discard(proc.pid)
        if reap:
            # what it left in its group or session, and what double-forked out of its tree
            end_leftovers(proc.pid, since=since)
        captured = b""
        if out_path is None:
            sink.seek(0)
            captured = sink.read()
        return Finished(
            exit_code=code,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            stopped=stopped,
            output=captured,
            output_path=out_path,
        )
    finally:
        sink.close()


class _Stopped(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float | None,
    should_stop: Callable[[], str | None] | None,
    poll_s: float,
) -> int:
    """``proc.wait(timeout)``, asking ``should_stop`` every ``poll_s`` (``_Stopped``)."""
    if should_stop is None:
        return _wait_exact(proc, timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0)
        try:
            return _wait_exact(proc, poll_s if left is None else min(poll_s, left))
        except subprocess.TimeoutExpired:
            reason = should_stop()
            if reason:
                raise _Stopped(reason) from None


def _wait_exact(proc: subprocess.Popen[bytes], timeout: float | None) -> int:
    """``proc.wait(timeout)`` that returns the moment the child exits: a pidfd polled
    (``Popen.wait`` with a timeout sleeps in steps that double up to 50 ms, so it sees an
    exit up to that late: several milliseconds of every check). Where there is no pidfd
    (an old kernel), ``Popen.wait`` itself."""
    if timeout is None:
        return proc.wait()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child is already reaped
        return proc.wait(timeout=timeout)
    try:
        watch = select.poll()
        watch.register(fd, select.POLLIN)
        if not watch.poll(max(0, int(timeout * 1000))):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


class Running:
    """A child whose stdout is read line by line while it runs (an agent's event stream)."""

    def __init__(self, proc: subprocess.Popen[bytes], started: float, since: int = 0) -> None:
        self.proc = proc
        self.started = started
        self.stopped: str | None = None
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None
        #: Set once stdout reached its end (or the run was waited for).
        self.closed = threading.Event()
        #: When it started, in ``now_ticks`` units: leftovers are what started since.
        self.since = since

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, reason: str) -> None:
        """End the whole process group; the first reason given is the one kept."""
        with self._lock:
            if self.stopped is None:
                self.stopped = reason
        kill_group(self.proc.pid)
        end_orphans(since=self.since, grace_s=0.5)

    def lines(self) -> Iterator[bytes]:
        """stdout, one line at a time, until the child closes it (or is stopped)."""
        assert self.proc.stdout is not None
        yield from iter(self.proc.stdout.readline, b"")
        self.closed.set()

    def leftovers(self) -> None:
        """End whatever the run left behind: its group, descendants that left it, and
        orphans re-parented to loopkit (a double-forked daemon)."""
        end_leftovers(self.proc.pid, since=self.since)

    def wait(self) -> Finished:
        code = self.proc.wait()
        self.closed.set()
        if self._watch is not None:
            self._watch.join()  # a stop in progress ends what escaped the group too
        _ACTIVE.discard(self.proc.pid)
        self.leftovers()  # leave nothing behind
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return Finished(
            exit_code=None if self.stopped else code,
            duration_s=time.monotonic() - self.started,
            timed_out=self.stopped == "timeout",
            stopped=self.stopped,
        )


def spawn(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    stderr_path: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    should_stop: Callable[[], str | None] | None = None,
    poll_s: float = 0.25,
) -> Running:
    """Start ``argv`` with stdout piped for live reading.

    stdin is /dev/null unless ``stdin`` bytes are given (some CLIs wait for EOF on an open
    pipe). A watchdog stops the group at ``timeout`` or as soon as ``should_stop()``
    returns a reason (e.g. "cancelled"). When the leader exits but its output stays open
    (a child holding the pipe), the leftovers are ended after ``LINGER_S``.
    """
    since = now_ticks()
    err: int | IO[bytes]
    if stderr_path is not None:
        Path(stderr_path).parent.mkdir(parents=True, exist_ok=True)
        err = open(stderr_path, "wb")  # noqa: SIM115
    else:
        err = subprocess.DEVNULL
    try:
        with _STARTING:
            proc = _popen(
                argv,
                shell=False,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            _ACTIVE.add(proc.pid)
    finally:
        if not isinstance(err, int):
            err.close()
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    running = Running(proc=proc, started=time.monotonic(), since=since)
    deadline = running.started + timeout if timeout is not None else None

    def watch() -> None:
        exited: float | None = None
        while not running.closed.wait(poll_s if exited is None else min(poll_s, 0.05)):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                running.stop("timeout")
                return
            if should_stop is not None:
                reason = should_stop()
                if reason:
                    running.stop(reason)
                    return
            if exited is None and proc.poll() is not None:
                exited = now
            elif exited is not None and now - exited >= LINGER_S:
                # The leader is gone but its output is still open: a child holds it.
                running.leftovers()
                return

    running._watch = threading.Thread(target=watch, name="loopkit-watchdog", daemon=True)
    running._watch.start()
    return running


class Captured:
    """What a short tool printed, and how it ended."""

    def __init__(self, exit_code: int, stdout: bytes, stderr: bytes) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


def capture(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    timeout: float | None = None,
) -> Captured:
    """Run a short, well-behaved tool (git) and keep stdout and stderr apart. The child is
    one of the runs in progress while it runs (``_ACTIVE``): a thread's git call is no
    orphan of a check that ends meanwhile."""
    began = time.perf_counter()
    try:
        with _STARTING:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            _ACTIVE.add(proc.pid)
    except FileNotFoundError:
        return Captured(exit_code=127, stdout=b"", stderr=f"{argv[0]}: not found".encode())
    try:
        with proc:
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except BaseException:  # a timeout, Ctrl-C: the child goes too, as with run()
                proc.kill()
                proc.wait()
                raise
    finally:
        _ACTIVE.discard(proc.pid)
        if argv[0] == "git":
            timing.git_ran(time.perf_counter() - began)
    return Captured(exit_code=proc.returncode, stdout=out, stderr=err)
