"""recipes/loop.sh with the real Gemini CLI and Qwen Code against the scripted model
server: a write that passes its checks is committed; a write the approval mode refused,
followed by "Done.", is never taken for done."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import agent_bin, env_for, model_server
from tests.helpers.recipes import Project, fail_message, make_project

pytestmark = [pytest.mark.agents, pytest.mark.slow]

WRITE = {"name": "write_file", "input": {"file_path": "{{cwd}}/src/value.txt", "content": "good\n"}}
READ = {"name": "read_file", "input": {"file_path": "{{cwd}}/src/value.txt"}}
API = {"gemini": "gemini", "qwen": "chat"}


def _loop(tmp_path: Path, provider: str, worker: dict[str, Any]) -> tuple[Project, Any]:
    agent_bin(provider)
    p = make_project(tmp_path, "pass\n", files={"src/value.txt": "bad\n"}, budgets={"attempts": 1})
    data = json.loads((p.root / "loop.yaml").read_text())
    data["worker"] = {"provider": provider, "max_turns": 6, "timeout": 120, **worker}
    (p.root / "loop.yaml").write_text(json.dumps(data, indent=2))
    p.git("commit", "-qam", f"{provider} worker")
    # Qwen Code writes over a file only after reading it in the same conversation.
    turns = [{"tools": [READ]}, {"tools": [WRITE]}, {"text": "Done."}]
    with model_server({API[provider]: turns}) as server:
        env = env_for(provider, server, tmp_path / "home")
        proc = p.run(
            "loop.sh",
            "--contract",
            "loop.yaml",
            "--task-id",
            "fix",
            "--task",
            "Make value good",
            env=env,
            timeout=240,
        )
    return p, proc


@pytest.mark.parametrize("provider", ["gemini", "qwen"])
def test_loop_sh_commits_the_workers_verified_write(tmp_path: Path, provider: str) -> None:
    p, proc = _loop(tmp_path, provider, {})
    assert proc.returncode == 0, fail_message(proc)
    assert p.decisions("fix")[-1]["outcome"] == "complete"
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    (run,) = p.docs("fix", "invoke")
    assert run["run"]["provider"] == provider and run["run"]["files_written"] == ["src/value.txt"]


@pytest.mark.parametrize(("provider", "mode"), [("gemini", "default"), ("qwen", "default")])
def test_loop_sh_never_takes_a_refused_write_for_done(
    tmp_path: Path, provider: str, mode: str
) -> None:
    p, proc = _loop(tmp_path, provider, {"permission_mode": mode})
    assert proc.returncode != 0
    (first,) = p.decisions("fix")[:1]
    assert first["outcome"] != "complete", first
    (run,) = p.docs("fix", "invoke")[:1]
    assert run["run"]["final_message"] == "Done." and run["run"]["claimed_complete"] is False
    assert run["run"]["stop_reason"] == "permission_denied"
    assert p.git("show", "HEAD:src/value.txt") == "bad\n"
