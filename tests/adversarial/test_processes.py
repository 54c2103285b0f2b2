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

from tests.helpers.recipes import BIN, make_project, recipe_env

pytestmark = pytest.mark.slow

# A daemon that escaped twice (fork, setsid, fork) and beats: it rewrites a file every
# 0.1 s for five minutes; then the worker itself exits at once. A beat that stops means
# the daemon is gone, whether or not it ran in a PID namespace of its own.
DAEMON = """
import os, sys, time
beat = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3):
            os.close(fd)
        end = time.time() + 300
        while time.time() < end:
            with open(beat, "w") as f:
                f.write(str(time.time()))
            time.sleep(0.1)
    os._exit(0)
time.sleep(0.5)
"""

MODES = pytest.mark.parametrize("mode", ["off", "auto"])


def beating(path: Path, *, within: float = 10) -> bool:
    """Whether the file is still being rewritten (waits up to ``within`` for it to stop).
    A file that never appeared is an error, not a stop: the beat never started, so
    nothing was shown to end."""
    started(path, timeout=within)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        first = path.stat().st_mtime_ns
        time.sleep(0.6)
        if path.stat().st_mtime_ns == first:
            return False
    return True


def started(path: Path, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _lk(cmd: str, cwd: Path, *args: str, stdin: str = "", timeout: float = 60):
    return subprocess.run(
        [str(BIN / cmd), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=recipe_env(),
        timeout=timeout,
    )


def _project(tmp_path: Path, mode: str, **kw: object):
    p = make_project(tmp_path, "pass\n", **kw)
    data = json.loads((p.root / "loop.yaml").read_text())
    data["sandbox"] = {"mode": mode, "writable": [str(p.scratch)]}
    (p.root / "loop.yaml").write_text(json.dumps(data))
    p.git("commit", "-qam", f"sandbox {mode}")
    script = p.scratch / "daemon.py"
    script.write_text(DAEMON)
    return p, script


@MODES
def test_a_double_forked_daemon_does_not_outlive_the_worker(tmp_path: Path, mode: str) -> None:
    p, script = _project(tmp_path, mode)
    beat = p.scratch / "beat"
    done = _lk(
        "lk-invoke",
        p.root,
        "--contract",
        "loop.yaml",
        "--command",
        f"{sys.executable} {script} {beat}",
    )
    assert done.returncode in (0, 1), done.stderr
    started(beat)
    assert not beating(beat), "the daemon outlived lk-invoke"
    assert json.loads(done.stdout)["sandbox"]["used"] is (mode == "auto")


def test_a_double_forked_daemon_does_not_outlive_a_check(tmp_path: Path) -> None:
    beat = tmp_path / "beat"
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    check = {"name": "spawns", "run": f"{sys.executable} {script} {beat}", "timeout": 30}
    p = make_project(tmp_path, "pass\n", checks=[check])
    done = _lk("lk-verify", p.root)
    assert done.returncode == 0, done.stderr
    started(beat)
    assert not beating(beat), "the daemon outlived lk-verify"


@MODES
def test_the_deadline_holds_when_a_child_keeps_the_output_open(tmp_path: Path, mode: str) -> None:
    p, _ = _project(tmp_path, mode)
    beat = p.scratch / "beat"
    # The leader exits once its child has beaten (a child ended before its first beat
    # would prove nothing); the child inherits stdout and beats on.
    cmd = (
        f"sh -c '(while :; do date > {beat}; sleep 0.1; done) & "
        f"until [ -e {beat} ]; do sleep 0.01; done; exit 0'"
    )
    start = time.monotonic()
    done = _lk("lk-invoke", p.root, "--contract", "loop.yaml", "--command", cmd, "--timeout", "3")
    took = time.monotonic() - start
    assert done.returncode in (0, 1), done.stderr
    assert took < 10, f"lk-invoke took {took:.1f}s with a 3s timeout"
    assert not beating(beat)


@MODES
def test_the_deadline_holds_for_a_worker_that_never_exits(tmp_path: Path, mode: str) -> None:
    p, _ = _project(tmp_path, mode)
    beat = p.scratch / "beat"
    cmd = (
        f"sh -c '(while :; do date > {beat}; sleep 0.1; done) & "
        f"until [ -e {beat} ]; do sleep 0.01; done; sleep 300'"
    )
    start = time.monotonic()
    done = _lk("lk-invoke", p.root, "--contract", "loop.yaml", "--command", cmd, "--timeout", "2")
    assert time.monotonic() - start < 200  # the 300 s sleep was not waited out
    assert json.loads(done.stdout)["stop_reason"] == "timeout"
    assert not beating(beat)


@MODES
def test_kill_9_of_the_loop_ends_the_worker(tmp_path: Path, mode: str) -> None:
    p, _ = _project(tmp_path, mode)
    beat = p.scratch / "beat"
    data = json.loads((p.root / "loop.yaml").read_text())
    data["worker"]["command"] = f"sh -c 'while :; do date > {beat}; sleep 0.1; done'"
    (p.root / "loop.yaml").write_text(json.dumps(data))
    p.git("commit", "-qam", "a worker that never ends")
    loop = subprocess.Popen(
        [
            str(Path(__file__).resolve().parents[2] / "recipes" / "loop.sh"),
            "--contract",
            "loop.yaml",
            "--task-id",
            "t",
            "--task",
            "T",
        ],
        cwd=p.root,
        env=recipe_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started(beat, timeout=30)
        assert beating(beat, within=2)
        os.kill(loop.pid, signal.SIGKILL)  # the loop's shell only, as an OOM killer would
        loop.wait()
        assert not beating(beat), "the worker outlived its killed loop"
    finally:
        try:
            os.killpg(loop.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- no sandbox


def test_required_refuses_clearly_where_no_sandbox_can_start(tmp_path: Path) -> None:
    p, _ = _project(tmp_path, "required")
    env = recipe_env({"LOOPKIT_BWRAP": str(tmp_path / "no-such-bwrap")})
    done = subprocess.run(
        [str(BIN / "lk-invoke"), "--contract", "loop.yaml"],
        cwd=p.root,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 4, done.stderr
    assert "sandbox required" in done.stderr and done.stderr.count("\n") == 1
    assert p.worker_calls() == 0  # the worker never ran


def test_auto_records_that_no_sandbox_was_used_and_why(tmp_path: Path) -> None:
    p, _ = _project(tmp_path, "auto")
    env = recipe_env({"LOOPKIT_BWRAP": str(tmp_path / "no-such-bwrap")})
    done = subprocess.run(
        [str(BIN / "lk-invoke"), "--contract", "loop.yaml"],
        cwd=p.root,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    sandbox = json.loads(done.stdout)["sandbox"]
    assert sandbox["used"] is False and "no-such-bwrap" in sandbox["reason"]
