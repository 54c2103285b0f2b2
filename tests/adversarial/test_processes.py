"""Nothing outlives its run, and every deadline holds: workers and checks that leave
processes behind -- a child holding the output pipe, a double-forked daemon in a session
of its own -- and a loop killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.recipes_helpers import BIN, make_project, recipe_env

pytestmark = pytest.mark.slow

# Writes the pid of a daemon that escaped twice (fork, setsid, fork) and sleeps; then the
# worker itself exits at once.
DAEMON = """
import os, sys, time
pidfile = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3):
            os.close(fd)
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
time.sleep(0.5)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def wait_pid(path: Path, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path}")


def gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _lk(cmd: str, cwd: Path, *args: str, stdin: str = "", timeout: float = 60):
    return subprocess.run([str(BIN / cmd), *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, env=recipe_env(), timeout=timeout)


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    return script


def test_a_double_forked_daemon_does_not_outlive_the_worker(tmp_path: Path) -> None:
    p = make_project(tmp_path, "pass\n")
    pidfile = tmp_path / "daemon.pid"
    cmd = f"{sys.executable} {_script(tmp_path)} {pidfile}"
    done = _lk("lk-invoke", p.root, "--contract", "loop.yaml", "--command", cmd)
    assert done.returncode in (0, 1), done.stderr
    pid = wait_pid(pidfile)
    assert gone(pid), f"daemon {pid} outlived lk-invoke"


def test_a_double_forked_daemon_does_not_outlive_a_check(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    check = {"name": "spawns", "run": f"{sys.executable} {_script(tmp_path)} {pidfile}",
             "timeout": 30}
    p = make_project(tmp_path, "pass\n", checks=[check])
    done = _lk("lk-verify", p.root)
    assert done.returncode == 0, done.stderr
    pid = wait_pid(pidfile)
    assert gone(pid), f"daemon {pid} outlived lk-verify"


def test_the_deadline_holds_when_a_child_keeps_the_output_open(tmp_path: Path) -> None:
    p = make_project(tmp_path, "pass\n")
    pidfile = tmp_path / "child.pid"
    # The leader exits at once; its child inherits stdout and sleeps for five minutes.
    cmd = f"sh -c 'sleep 300 & echo $! > {pidfile}; exit 0'"
    start = time.monotonic()
    done = _lk("lk-invoke", p.root, "--contract", "loop.yaml", "--command", cmd,
               "--timeout", "3")
    took = time.monotonic() - start
    assert done.returncode in (0, 1), done.stderr
    assert took < 10, f"lk-invoke took {took:.1f}s with a 3s timeout"
    assert gone(wait_pid(pidfile))


def test_the_deadline_holds_for_a_worker_that_never_exits(tmp_path: Path) -> None:
    p = make_project(tmp_path, "pass\n")
    pidfile = tmp_path / "child.pid"
    cmd = f"sh -c 'sleep 300 & echo $! > {pidfile}; sleep 300'"
    start = time.monotonic()
    done = _lk("lk-invoke", p.root, "--contract", "loop.yaml", "--command", cmd,
               "--timeout", "2")
    assert time.monotonic() - start < 10
    assert json.loads(done.stdout)["stop_reason"] == "timeout"
    assert gone(wait_pid(pidfile))


def test_kill_9_of_the_loop_ends_the_worker(tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    body = f"""
import os, time
Path({str(pidfile)!r}).write_text(str(os.getpid()))
time.sleep(120)
"""
    p = make_project(tmp_path, body)
    loop = subprocess.Popen(
        [str(Path(__file__).resolve().parents[2] / "recipes" / "loop.sh"), "--contract",
         "loop.yaml", "--task-id", "t", "--task", "T"],
        cwd=p.root, env=recipe_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        worker = wait_pid(pidfile, timeout=30)
        assert alive(worker)
        os.kill(loop.pid, signal.SIGKILL)  # the loop's shell only, as an OOM killer would
        loop.wait()
        assert gone(worker, timeout=10), "the worker outlived its killed loop"
    finally:
        with_group = loop.pid
        try:
            os.killpg(with_group, signal.SIGKILL)
        except ProcessLookupError:
            pass
