"""The one place loopkit starts processes.

Every child runs in a session of its own, so a timeout or a cancellation can end the
whole process group -- grandchildren included -- with SIGTERM, then SIGKILL after a
grace period. Output goes to a file, never only to a pipe a grandchild could hold open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: Seconds between SIGTERM and SIGKILL when a group is stopped.
GRACE_S = 2.0


@dataclass
class Finished:
    """A process that has ended (or was ended)."""

    exit_code: int | None  # None when loopkit killed it
    duration_s: float
    timed_out: bool = False
    stopped: str | None = None  # why loopkit stopped it: "timeout", "cancelled", "stuck", ...
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


def _escaped(pgid: int, known: set[int]) -> set[int]:
    """Live descendants of ``pgid``'s leader (and of ``known``) outside its process group.

    Claude Code, for one, starts its Bash tool in a session of its own: ending the
    worker's group alone would leave that shell and its children running. Read from
    /proc (nothing found where there is none).
    """
    parents: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) < 3 or fields[0] == b"Z":
            continue
        pid = int(name)
        parents.setdefault(int(fields[1]), []).append(pid)
        groups[pid] = int(fields[2])
    found: set[int] = set()
    todo = [pgid, *known]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found | known if pid in groups and groups[pid] != pgid}


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
) -> Finished:
    """Run to completion (or ``timeout``), stdout and stderr merged.

    With ``output`` the merged output goes to that file; otherwise it is returned in
    ``Finished.output``. With ``reap`` anything the command left running in its process
    group is ended too, so a check cannot leave a server behind.
    """
    start = time.monotonic()
    out_path = Path(output) if output is not None else None
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        sink: IO[bytes] = open(out_path, "wb")  # noqa: SIM115
    else:
        import tempfile

        sink = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        stdin_arg: int | None = subprocess.PIPE if input is not None else subprocess.DEVNULL
        proc = _popen(
            cmd,
            shell=shell,
            cwd=cwd,
            env=env,
            stdin=stdin_arg,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        if input is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(input)
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid, leader=proc)
            proc.wait()
            code = None
        except BaseException:  # interrupted (Ctrl-C): the group is in its own session
            kill_group(proc.pid, leader=proc)
            raise
        if reap:
            _signal_group(proc.pid, signal.SIGKILL)
        captured = b""
        if out_path is None:
            sink.seek(0)
            captured = sink.read()
        return Finished(
            exit_code=code,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            stopped="timeout" if timed_out else None,
            output=captured,
            output_path=out_path,
        )
    finally:
        sink.close()


@dataclass
class Running:
    """A child whose stdout is read line by line while it runs (an agent's event stream)."""

    proc: subprocess.Popen[bytes]
    started: float
    stopped: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watch: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, reason: str) -> None:
        """End the whole process group; the first reason given is the one kept."""
        with self._lock:
            if self.stopped is None:
                self.stopped = reason
        kill_group(self.proc.pid)

    def lines(self) -> Iterator[bytes]:
        """stdout, one line at a time, until the child closes it (or is stopped)."""
        assert self.proc.stdout is not None
        yield from iter(self.proc.stdout.readline, b"")

    def wait(self) -> Finished:
        code = self.proc.wait()
        if self.stopped and self._watch is not None:
            self._watch.join()  # a stop in progress ends what escaped the group too
        _signal_group(self.proc.pid, signal.SIGKILL)  # leave nothing behind
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
    returns a reason (e.g. "cancelled").
    """
    err: int | IO[bytes]
    if stderr_path is not None:
        Path(stderr_path).parent.mkdir(parents=True, exist_ok=True)
        err = open(stderr_path, "wb")  # noqa: SIM115
    else:
        err = subprocess.DEVNULL
    try:
        proc = _popen(
            argv,
            shell=False,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    finally:
        if not isinstance(err, int):
            err.close()
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    running = Running(proc=proc, started=time.monotonic())

    if timeout is not None or should_stop is not None:
        deadline = running.started + timeout if timeout is not None else None

        def watch() -> None:
            while proc.poll() is None:
                if deadline is not None and time.monotonic() >= deadline:
                    running.stop("timeout")
                    return
                if should_stop is not None:
                    reason = should_stop()
                    if reason:
                        running.stop(reason)
                        return
                time.sleep(poll_s)

        running._watch = threading.Thread(target=watch, name="loopkit-watchdog", daemon=True)
        running._watch.start()
    return running


@dataclass
class Captured:
    exit_code: int
    stdout: bytes
    stderr: bytes


def capture(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    timeout: float | None = None,
) -> Captured:
    """Run a short, well-behaved tool (git) and keep stdout and stderr apart."""
    try:
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return Captured(exit_code=127, stdout=b"", stderr=f"{argv[0]}: not found".encode())
    return Captured(exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr)
