"""Audit regressions: workers, judge and recipes, checked against the published promises."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from loopkit import proc
from tests.invoke_helpers import pids_with

# A grandchild that leaves the worker's process group (a session of its own), as Claude
# Code's Bash tool does; optionally deaf to SIGTERM.
_DETACHED = (
    "import os, signal, sys, time\n"
    "os.setsid()\n"
    "if sys.argv[2] == \"deaf\":\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "time.sleep(300)\n"
)


def _worker(marker: str, mode: str) -> list[str]:
    inner = f"{sys.executable} -c '{_DETACHED}' {marker} {mode} >/dev/null 2>&1 </dev/null"
    return ["/bin/sh", "-c", f"{inner} & {inner} & sleep 300"]


@pytest.mark.parametrize("mode", ["polite", "deaf"])
def test_a_stopped_worker_leaves_no_process_in_another_session(mode: str) -> None:
    marker = f"loopkit-audit-{mode}-{time.time_ns()}"
    running = proc.spawn(_worker(marker, mode), timeout=1.5)
    time.sleep(0.5)
    assert len(pids_with(marker)) >= 3  # the shell and both escaped children
    list(running.lines())
    finished = running.wait()
    assert finished.stopped == "timeout"
    time.sleep(0.2)
    assert pids_with(marker) == []


def test_a_timed_out_check_leaves_no_process_in_another_session(tmp_path: Path) -> None:
    marker = f"loopkit-audit-run-{time.time_ns()}"
    done = proc.run(_worker(marker, "polite"), timeout=1.5, output=tmp_path / "out.log")
    assert done.timed_out
    time.sleep(0.2)
    assert pids_with(marker) == []
