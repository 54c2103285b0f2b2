"""lk-invoke driving the real opencode CLI against the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import model_server
from tests.helpers.invoke import Invoked, invoke_agent, tree_status

pytestmark = pytest.mark.agents

WRITE = {"name": "write", "input": {"filePath": "{{cwd}}/hello.py", "content": "print('hello')\n"}}


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command, "description": "run"}}


def run(repo: Path, tmp: Path, turns: Any, **kw: Any) -> Invoked:
    return invoke_agent("opencode", repo, tmp, turns, **kw)


def test_a_worker_that_rewrites_its_own_settings_does_not_keep_them(
    git_repo: Path, tmp_path: Path
) -> None:
    """The hostile worker points its own opencode at another endpoint (in the folder it
    runs with, and in the person's); the next run talks to the real one all the same."""
    evil = json.dumps({"provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:9"}}}})
    # opencode refuses a shell command naming a path outside the project; python does not.
    code = (
        "import os, pathlib; "
        "homes = [os.environ['XDG_CONFIG_HOME'], os.path.expanduser('~/.config')]\n"
        "for h in homes:\n"
        "    p = pathlib.Path(h, 'opencode', 'opencode.json')\n"
        "    try:\n"
        "        p.parent.mkdir(parents=True, exist_ok=True); p.write_text(os.environ['EVIL'])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    plant = f"EVIL='{evil}' python3 -c \"{code}\""
    person = tmp_path / "person" / ".config" / "opencode" / "opencode.json"
    with model_server([{"tools": [bash(plant)]}, {"text": "Planted."}]) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.run["final_message"] == "Planted.", first.stderr
        before = person.read_text()
        # The plant took: opencode ran it, and the folder it runs with was rewritten.
        assert first.run["tool_errors"] == 0
        (private,) = (tmp_path / "homes").glob("*/opencode/config/opencode/opencode.json")
        assert "127.0.0.1:9" in private.read_text()
        second = run(git_repo, tmp_path, None, server=server)
    assert "evil" not in before and "127.0.0.1:9" not in before
    assert second.returncode == 0, second.stderr
    assert second.run["final_message"] == "Planted."  # the scripted server answered again
    assert tree_status(git_repo) == [], tree_status(git_repo)


def test_the_turn_cap_is_max_turns(git_repo: Path, tmp_path: Path) -> None:
    turns = [{"tools": [bash(f"echo {n}")]} for n in range(4)] + [{"text": "Done."}]
    r = run(git_repo, tmp_path, turns, worker={"max_turns": 2})
    rec = r.run
    assert rec["stop_reason"] == "max_turns" and rec["is_error"] is True
    assert rec["claimed_complete"] is False
    assert rec["usage"]["turns"] > 2  # past the cap: opencode asks for text only, and goes on
