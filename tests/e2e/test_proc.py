"""The process door: timeouts and stops end whole process groups, nothing is orphaned."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from loopkit import proc
from tests.helpers.evidence import alive
from tests.helpers.invoke import pids_with


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _none_left(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pids_with(marker)


def test_run_captures_merged_output_and_exit_code() -> None:
    done = proc.run("echo out; echo err >&2; exit 3", shell=True)
    assert done.exit_code == 3
    assert b"out" in done.output and b"err" in done.output
    assert not done.timed_out


def test_run_writes_output_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "check.log"
    done = proc.run([sys.executable, "-c", "print('hello')"], output=log)
    assert done.exit_code == 0
    assert log.read_text() == "hello\n"


def test_timeout_kills_the_grandchild_too(tmp_path: Path) -> None:
    # The grandchild is found by its own command line (a sleep of a length no other
    # process has), not by a pid file: under load the kill may come before any echo.
    marker = f"60.{time.monotonic_ns() % 10**9:09d}"
    start = time.monotonic()
    done = proc.run(f"sleep {marker} & wait", shell=True, timeout=0.5)
    assert done.timed_out and done.exit_code is None
    assert time.monotonic() - start < 60  # the sleep was not waited out (bench/bench_stops.py)
    assert _none_left(marker)


def test_leftover_background_process_is_reaped_after_a_normal_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    done = proc.run(f"(sleep 60 >/dev/null 2>&1 &  echo $! > {pidfile})", shell=True, timeout=10)
    assert done.exit_code == 0
    assert _wait_gone(int(pidfile.read_text()))


def test_spawn_streams_lines_and_stops_on_timeout() -> None:
    running = proc.spawn(
        [sys.executable, "-u", "-c", "import time\nprint('a')\nprint('b')\ntime.sleep(60)"],
        timeout=0.5,
    )
    lines = list(running.lines())
    finished = running.wait()
    assert lines == [b"a\n", b"b\n"]
    assert finished.stopped == "timeout" and finished.timed_out
    assert _wait_gone(running.pid)


def test_spawn_should_stop_reason_is_kept(tmp_path: Path) -> None:
    flag = tmp_path / "stop"
    running = proc.spawn(
        ["sleep", "60"],
        should_stop=lambda: "cancelled" if flag.exists() else None,
        poll_s=0.05,
    )
    flag.touch()
    finished = running.wait()
    assert finished.stopped == "cancelled"
    assert finished.exit_code is None


def test_spawn_feeds_stdin_and_closes_it() -> None:
    running = proc.spawn(["cat"], stdin=b"handoff text\n")
    assert list(running.lines()) == [b"handoff text\n"]
    assert running.wait().exit_code == 0


def test_capture_keeps_streams_apart_and_reports_missing_tools() -> None:
    done = proc.capture(["sh", "-c", "echo o; echo e >&2"])
    assert (done.stdout, done.stderr) == (b"o\n", b"e\n")
    assert proc.capture(["no-such-tool-xyz"]).exit_code == 127


# A grandchild that leaves the worker's process group (a session of its own), as Claude
# Code's Bash tool does; optionally deaf to SIGTERM.
_DETACHED = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    'if sys.argv[2] == "deaf":\n'
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "time.sleep(300)\n"
)


def _worker(marker: str, mode: str) -> list[str]:
    inner = f"{sys.executable} -c '{_DETACHED}' {marker} {mode} >/dev/null 2>&1 </dev/null"
    return ["/bin/sh", "-c", f"{inner} & {inner} & sleep 300"]


@pytest.mark.parametrize("mode", ["polite", "deaf"])
def test_a_stopped_worker_leaves_no_process_in_another_session(mode: str) -> None:
    marker = f"loopkit-detached-{mode}-{time.time_ns()}"
    running = proc.spawn(_worker(marker, mode), timeout=1.5)
    time.sleep(0.5)
    assert len(pids_with(marker)) >= 3  # the shell and both escaped children
    list(running.lines())
    finished = running.wait()
    assert finished.stopped == "timeout"
    time.sleep(0.2)
    assert pids_with(marker) == []


def test_a_timed_out_check_leaves_no_process_in_another_session(tmp_path: Path) -> None:
    marker = f"loopkit-detached-run-{time.time_ns()}"
    done = proc.run(_worker(marker, "polite"), timeout=1.5, output=tmp_path / "out.log")
    assert done.timed_out
    time.sleep(0.2)
    assert pids_with(marker) == []


def test_childless_counts_live_and_unreaped_children() -> None:
    # What lets end_leftovers skip reading the process table: asked in a fresh process,
    # which has no child until it starts one, and keeps it until it is reaped.
    script = (
        "import subprocess, time\n"
        "from loopkit import proc\n"
        "assert proc._childless()\n"
        "p = subprocess.Popen(['sleep', '30'])\n"
        "assert not proc._childless()\n"
        "p.kill(); time.sleep(0.3)\n"
        "assert not proc._childless()  # a zombie is still a child\n"
        "p.wait()\n"
        "assert proc._childless()\n"
    )
    done = proc.run([sys.executable, "-c", script])
    assert done.exit_code == 0, done.output.decode()


# A loopkit command (a subreaper) whose thread runs git while a check ends: the check's
# leftovers are ended, the thread's git call is not one of them.
_THREAD_AND_CHECK = """
import sys, threading
sys.argv[0] = "lk-test"
from loopkit import proc
proc.guard()
got = {}
import time
def later():
    time.sleep(0.2)  # begun while the check runs, ended after it
    got.update(c=proc.capture(["sleep", "1"]))
t = threading.Thread(target=later)
t.start()
done = proc.run(["sleep", "0.5"], timeout=10)
t.join()
print(done.exit_code, got["c"].exit_code)
"""


def test_a_git_call_in_a_thread_is_not_a_leftover_of_a_check_that_ends() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _THREAD_AND_CHECK], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"]  # a -15 for the thread's call: taken for an orphan
