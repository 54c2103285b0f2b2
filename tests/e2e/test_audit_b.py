"""Audit regressions: workers, judge and recipes, checked against the published promises."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from loopkit import proc
from tests.agents_helpers import claude_bin, claude_env_for, model_server
from tests.invoke_helpers import lk_invoke, pids_with, write_contract

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


@pytest.mark.agents
def test_cost_is_untrusted_when_the_base_url_comes_from_claude_settings(
    git_repo: Path, tmp_path: Path
) -> None:
    # A proxy or another model's endpoint is often set in ~/.claude/settings.json, not in
    # the environment: Claude Code then prices a model it never talked to.
    claude_bin()
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "claude"})
    with model_server(["Done."]) as server:
        env = claude_env_for(server, tmp_path / "home", retries=0)
        url = env.pop("ANTHROPIC_BASE_URL")
        settings = tmp_path / "home" / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": url}}))
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
        assert server.model_requests("anthropic")  # it did talk to the scripted server
    assert r.returncode == 0, r.stderr
    assert r.run["cost"]["usd"] is not None
    assert r.run["cost"]["trusted"] is False
