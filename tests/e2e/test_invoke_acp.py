"""lk-invoke as an ACP client, driving the real Claude Code ACP adapter (npm
@zed-industries/claude-agent-acp) against the scripted model server: the contract's scope
answered at the protocol, before the write."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import git
from tests.helpers.agents import claude_env_for, model_server
from tests.helpers.invoke import Invoked, lk_invoke, write_contract
from tests.helpers.watch import Creations

pytestmark = pytest.mark.agents


def acp_bin() -> str:
    from tests.helpers.agents import _find

    return _find("claude-agent-acp")


def write(name: str, content: str = "print('hello')\n") -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": "{{cwd}}/" + name, "content": content}}


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command}}


def contract(tmp: Path, **worker: Any) -> Path:
    return write_contract(
        tmp / "loop.yaml", worker={"provider": "acp", "agent": "claude", **worker}
    )


def run(
    repo: Path,
    tmp: Path,
    turns: Any,
    *,
    args: tuple[str, ...] = (),
    server: Any = None,
    worker: dict[str, Any] | None = None,
    provider: str = "acp",
) -> Invoked:
    acp_bin()
    if provider == "acp":
        loop = contract(tmp, **(worker or {}))
    else:
        loop = write_contract(tmp / "loop.yaml", worker={"provider": provider, **(worker or {})})

    def go(s: Any) -> Invoked:
        env = claude_env_for(s, tmp / "home")
        env.pop("IS_SANDBOX", None)
        return lk_invoke(["--contract", str(loop), *args], cwd=repo, env=env)

    if server is not None:
        return go(server)
    with model_server(turns) as s:
        return go(s)


def stream(repo: Path, r: Invoked) -> list[dict[str, Any]]:
    text = (repo / r.run["transcript"]).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_write_and_a_command_are_parsed(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [write("hello.py")]},
        {"tools": [bash("cat hello.py"), bash("python3 hello.py")]},
        {"text": "Wrote hello.py."},
    ]
    r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert rec["provider"] == "acp"
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is True
    assert rec["final_message"] == "Wrote hello.py."
    assert rec["files_written"] == ["hello.py"] and rec["files_read"] == ["hello.py"]
    assert rec["usage"]["tool_calls"] == 3 and rec["usage"]["turns"] == 3
    assert rec["usage"]["input_tokens"] > 0 and rec["usage"]["output_tokens"] > 0
    assert rec["session_id"] and rec["refused"] == []
    assert rec["cost"]["trusted"] is False
    gates = [e for e in stream(git_repo, r) if e.get("acp") == "gate"]
    # The write and the command that is not a plain read were asked about, and allowed
    # from the scope (Claude Code runs `cat` without asking).
    assert [(g["kind"], g["allowed"]) for g in gates] == [("edit", True), ("execute", True)]
    assert gates[1]["title"] == "python3 hello.py"
    assert rec["sandbox"]["used"] is True


def test_a_write_outside_the_scope_is_refused_before_it_happens(
    git_repo: Path, tmp_path: Path
) -> None:
    turns = [
        {"tools": [write("secret.py", "import os\n")]},
        {"text": "Done: secret.py is written."},
    ]
    with Creations(git_repo) as seen:
        r = run(git_repo, tmp_path, turns)
    assert r.returncode == 0, r.stderr
    # Never created, not even for a moment (inotify saw every name made in the folder).
    assert "secret.py" not in seen.names
    assert not (git_repo / "secret.py").exists()
    rec = r.run
    assert rec["refused"] == [
        {
            "via": "permission",
            "tool": "Write secret.py",
            "path": "secret.py",
            "rule": "outside_writable",
        }
    ]
    assert rec["files_written"] == [] and rec["tool_errors"] == 1
    # The same worker through the plain claude provider writes it (found only afterwards).
    plain = tmp_path / "plain"
    plain.mkdir()
    r2 = run(git_repo, plain, turns, provider="claude")
    assert r2.returncode == 0, r2.stderr
    assert (git_repo / "secret.py").read_text() == "import os\n"


def test_a_claimed_completion_after_a_refused_write_is_not_done(
    git_repo: Path, tmp_path: Path
) -> None:
    acp_bin()
    (git_repo / "loop.yaml").write_text(
        'version: 1\nobjective: Write notes.\nscope: {writable: ["notes/**"]}\n'
        'criteria: [{name: notes, run: "test -f notes/a.txt", timeout: 10}]\n'
        "budgets: {attempts: 3, wall_seconds: 600}\n"
        "worker: {provider: acp, agent: claude, timeout: 120}\n"
    )
    (git_repo / "TASKS.md").write_text(
        "- [ ] Write notes {#notes}\n  budget: 5 lines / 1 file\n  scope: notes/a.txt\n  end\n"
    )
    git(git_repo, "add", "loop.yaml", "TASKS.md")
    git(git_repo, "commit", "-qm", "contract and plan")
    turns = [{"tools": [write("a.txt", "hi\n")]}, {"text": "All done: the notes are written."}]
    with model_server(turns) as s:
        env = claude_env_for(s, tmp_path / "home")
        env["LOOPKIT_VALIDATE_OUTPUT"] = "1"
        task = subprocess.run(
            ["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"],
            cwd=git_repo, env=env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        done = subprocess.run(
            ["lk", "attempt", "--contract", "loop.yaml"],
            cwd=git_repo, env=env, input=task, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["run"]["claimed_complete"] is True
    assert doc["run"]["refused"] == [
        {"via": "permission", "tool": "Write a.txt", "path": "a.txt", "rule": "outside_writable"}
    ]
    assert not (git_repo / "a.txt").exists()
    assert doc["verify"]["passed"] is False
    assert doc["decision"]["outcome"] != "complete"
    assert done.returncode == 10, done.stderr  # retry, with the failing check as feedback


def test_the_turn_cap_cancels_the_session(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"tools": [write("hello.py")]},
        {"tools": [bash("cat hello.py")]},
        {"tools": [bash("cat hello.py")]},
        {"text": "done"},
    ]
    r = run(git_repo, tmp_path, turns, worker={"max_turns": 2})
    assert r.returncode == 1
    assert r.run["stop_reason"] == "max_turns" and r.run["is_error"] is True
    lines = stream(git_repo, r)
    assert {"acp": "cancel", "reason": "max_turns"} in lines
    end = next(e for e in lines if e.get("acp") == "end")
    assert end["stopped"] == "max_turns"


def test_cancel_ends_the_agent_and_its_children(git_repo: Path, tmp_path: Path) -> None:
    acp_bin()
    loop = contract(tmp_path)
    marker = f"loopkit-acp-cancel-{os.getpid()}"
    turns = [{"tools": [bash(f"sleep 300 # {marker}")]}, {"text": "never"}]
    with model_server(turns) as s:
        env = claude_env_for(s, tmp_path / "home")
        env.pop("IS_SANDBOX", None)
        env["LOOPKIT_VALIDATE_OUTPUT"] = "1"
        proc = subprocess.Popen(
            ["lk-invoke", "--contract", str(loop)],
            cwd=git_repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        from tests.helpers.invoke import pids_with

        while not pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pids_with(marker), "the agent's command never started"
        subprocess.run(["lk", "cancel", "--reason", "test"], cwd=git_repo, check=True)
        out, err = proc.communicate(timeout=60)
    rec = json.loads(out.strip().splitlines()[-1])
    rec = rec.get("run", rec)
    assert rec["stop_reason"] == "cancelled", err
    assert pids_with(marker) == []


def test_resume_loads_the_session(git_repo: Path, tmp_path: Path) -> None:
    turns = [
        {"text": "Creating.", "tools": [write("hello.py")]},
        {"text": "First part done."},
        {"tools": [bash("cat hello.py")]},
        {"text": "Second part done."},
    ]
    with model_server(turns) as server:
        first = run(git_repo, tmp_path, None, server=server)
        assert first.returncode == 0, first.stderr
        sid = first.run["session_id"]
        second = run(git_repo, tmp_path, None, server=server, args=("--resume", sid))
        assert second.returncode == 0, second.stderr
        picked = [r["turn"] for r in server.model_requests("anthropic")]
    assert second.run["final_message"] == "Second part done."
    assert second.run["session_id"] == sid
    assert picked[-2:] == [2, 3]  # the loaded conversation carried the first two turns
    lines = stream(git_repo, second)
    assert any(e.get("acp") == "session" and e.get("resumed") for e in lines)
    # The replayed history is not counted as this run's work.
    assert second.run["usage"]["tool_calls"] == 1


def patch(name: str, body: str) -> dict[str, Any]:
    return {
        "name": "apply_patch",
        "input": f"*** Begin Patch\n*** Add File: {name}\n+{body}\n*** End Patch\n",
    }


def test_codex_through_its_acp_adapter_is_held_to_the_scope(git_repo: Path, tmp_path: Path) -> None:
    """codex-acp (npm @zed-industries/codex-acp) against the Responses dialect: it asks
    before each patch; the one out of scope is refused and never written, and codex ends
    its turn there (its only refusal aborts the turn): no claim, not an error."""
    from tests.helpers.agents import _find, codex_env_for

    _find("codex-acp")
    loop = write_contract(tmp_path / "loop.yaml", worker={"provider": "acp", "agent": "codex"})
    turns = [
        {"tools": [patch("hello.py", "print('hi')")]},
        {"tools": [patch("secret.py", "x = 1")]},
        {"text": "Both written."},
    ]
    with Creations(git_repo) as seen, model_server(turns) as s:
        env = codex_env_for(s, tmp_path / "codex-home")
        r = lk_invoke(["--contract", str(loop)], cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    rec = r.run
    assert (git_repo / "hello.py").read_text() == "print('hi')\n"
    assert "secret.py" not in seen.names and not (git_repo / "secret.py").exists()
    assert rec["files_written"] == ["hello.py"]
    assert [(x["rule"], x["path"]) for x in rec["refused"]] == [("outside_writable", "secret.py")]
    assert rec["stop_reason"] == "completed" and rec["claimed_complete"] is False
    assert "refused a write (outside_writable: secret.py)" in rec["error"]


def test_the_wall_clock_timeout_ends_the_agent(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.invoke import pids_with

    marker = f"loopkit-acp-timeout-{os.getpid()}"
    monkeypatch.setenv("LOOPKIT_TEST_MARK", marker)  # passed on to the agent: found by it
    start = time.monotonic()
    worker = {"timeout": 4, "env_allow": ["LOOPKIT_TEST_MARK"]}
    r = run(git_repo, tmp_path, [{"delay": 60, "text": "too late"}], worker=worker)
    assert time.monotonic() - start < 50  # the 60 s answer was not waited out
    assert r.returncode == 1
    assert r.run["stop_reason"] == "timeout" and r.run["is_error"] is True
    assert pids_with(marker) == []  # the client, the adapter and Claude Code all ended


def test_a_judge_over_acp_may_read_and_write_nothing(git_repo: Path, tmp_path: Path) -> None:
    """lk-judge --provider acp: Claude Code's adapter as a read-only judge. Its write is
    refused at the protocol (never happens); its read grounds the MET."""
    from tests.helpers.judge import API_DOC, GOAL, docs_repo, judge_env, judge_turns, lk_judge

    acp_bin()
    repo = docs_repo(git_repo)
    turns = judge_turns(
        "claude", write="docs/extra.md", read="docs/api.md", reply="Documented.\nVERDICT: MET"
    )
    with Creations(repo / "docs") as seen, model_server(turns) as s:
        done = lk_judge(repo, judge_env("claude", s, tmp_path), "--provider", "acp", "--goal", GOAL)
    assert done.stdout, done.stderr
    j = done.section
    assert (repo / "docs" / "api.md").read_text() == API_DOC
    assert seen.names == [] and not (repo / "docs" / "extra.md").exists()
    assert j["read_only"]["changed"] is False and j["files_written"] == []
    assert j["files_read"] == ["docs/api.md"]
    assert j["denied"] == ["Write docs/extra.md: refused (read_only: docs/extra.md)"]
    assert (j["verdict"], j["grounded"]) == ("MET", True) and done.code == 0


def test_the_contracts_model_is_asked_for(git_repo: Path, tmp_path: Path) -> None:
    with model_server([{"text": "Hi."}]) as s:
        r = run(git_repo, tmp_path, None, server=s, worker={"model": "haiku"})
        asked = [req["body"].get("model") for req in s.model_requests("anthropic")]
    assert r.returncode == 0, r.stderr
    assert r.run["effective_model"] == "haiku"
    assert asked and all("haiku" in str(m) for m in asked), asked
