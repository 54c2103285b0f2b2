"""lk-judge end to end: the real claude and codex CLIs as read-only judges, scripted.

Each test starts the scripted model server, runs the installed ``lk-judge`` in a real
git repository and checks the verdict, its grounding, the read-only proof and the exit
status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from loopkit import schema
from tests.helpers import git
from tests.helpers.agents import claude_bin, codex_bin, model_server
from tests.helpers.judge import (
    API_DOC,
    GOAL,
    attempt_with_goal,
    docs_repo,
    judge_env,
    judge_turns,
    lk_judge,
    lk_judge_bin,
    tree_files,
)

pytestmark = pytest.mark.agents

PROVIDERS = ["claude", "codex"]


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    (claude_bin if request.param == "claude" else codex_bin)()
    return str(request.param)


def judged(provider: str, repo: Path, tmp: Path, turns: list[dict], *args: str, stdin=None):
    with model_server(turns, log=tmp / "requests.jsonl") as server:
        done = lk_judge(
            repo, judge_env(provider, server, tmp), "--provider", provider, *args, stdin=stdin
        )
        requests = server.model_requests()
    assert done.stdout, done.stderr
    schema.validate(done.doc, str(done.doc["kind"]).removeprefix("loopkit/"))
    return done, requests


def test_a_judge_that_reads_the_file_and_says_met(provider, git_repo, tmp_path):
    repo = docs_repo(git_repo)
    before = tree_files(repo)
    turns = judge_turns(
        provider, read="docs/api.md", reply="GET /health is documented.\nVERDICT: MET"
    )
    done, requests = judged(provider, repo, tmp_path, turns, "--goal", GOAL)
    j = done.section
    assert done.code == 0, done.stderr
    assert (j["verdict"], j["grounded"], j["trusted"], j["reason"]) == ("MET", True, True, None)
    assert j["files_read"] == ["docs/api.md"]
    assert j["provider"] == provider
    assert j["read_only"]["checked"] and not j["read_only"]["changed"]
    assert j["read_only"]["tree_before"] == j["read_only"]["tree_after"]
    assert tree_files(repo) == before
    # What the judge spent is on record; a price from a scripted server is never trusted.
    assert j["usage"]["tool_calls"] == 1 and j["usage"]["output_tokens"] > 0
    assert j["cost"]["trusted"] is False
    # The judge's own stream is kept for a later --transcript.
    assert (repo / j["transcript"]).is_file()
    # The prompt carried the goal and the demand for a verdict line.
    first = json.dumps(requests[0])
    assert GOAL in first and "VERDICT: NOT MET" in first


def test_a_met_without_reading_is_ungrounded(provider, git_repo, tmp_path):
    repo = docs_repo(git_repo)
    turns = judge_turns(provider, reply="Looks documented to me.\nVERDICT: MET")
    done, _ = judged(provider, repo, tmp_path, turns, "--goal", GOAL)
    j = done.section
    assert done.code == 1
    assert j["verdict"] == "NOT_MET"
    assert j["said"] == "MET"
    assert (j["grounded"], j["trusted"], j["reason"]) == (False, False, "ungrounded")
    assert j["files_read"] == []
    assert "without opening a single file" in j["feedback"]


def test_not_met_carries_its_reasons_into_the_attempt(provider, git_repo, tmp_path):
    repo = docs_repo(git_repo)
    reply = (
        "docs/api.md documents GET /health but says nothing about the 503 answer when "
        "the database is down.\nVERDICT: NOT MET"
    )
    turns = judge_turns(provider, read="docs/api.md", reply=reply)
    doc = attempt_with_goal()
    done, requests = judged(provider, repo, tmp_path, turns, stdin=json.dumps(doc))
    assert done.code == 1
    out = done.doc
    assert out["kind"] == "loopkit/attempt" and out["task"] == doc["task"]
    assert out["attempt_id"]
    j = out["judge"]
    assert (j["verdict"], j["said"], j["reason"]) == ("NOT_MET", "NOT_MET", "not_met")
    assert j["grounded"] is True and j["trusted"] is True
    assert j["goal"] == GOAL and j["goal_source"] == "task"
    assert "503 answer when the database is down" in j["feedback"]
    assert "VERDICT" not in j["feedback"]
    # What changed (the piped diff) went into the judge's prompt.
    first = json.dumps(requests[0])
    assert "WHAT CHANGED" in first and "A docs/api.md (+5 -0)" in first


def test_no_verdict_line_is_not_met(provider, git_repo, tmp_path):
    repo = docs_repo(git_repo)
    turns = judge_turns(provider, read="docs/api.md", reply="The route seems documented.")
    done, _ = judged(provider, repo, tmp_path, turns, "--goal", GOAL)
    j = done.section
    assert done.code == 1
    assert (j["verdict"], j["reason"], j["said"]) == ("NOT_MET", "no_verdict", None)
    assert j["grounded"] is True  # it read, but never said
    assert "no VERDICT line" in j["feedback"]


def test_a_judge_that_tries_to_write_is_denied_and_the_tree_is_unchanged(
    provider, git_repo, tmp_path
):
    repo = docs_repo(git_repo)
    before = tree_files(repo)
    turns = judge_turns(
        provider,
        write="docs/api.md",
        read="docs/api.md",
        reply="The route is documented.\nVERDICT: MET",
    )
    done, _ = judged(provider, repo, tmp_path, turns, "--goal", GOAL)
    j = done.section
    # The write never got through: the file is as it was, the tree hash unchanged.
    assert tree_files(repo) == before
    assert (repo / "docs" / "api.md").read_text() == API_DOC
    assert j["read_only"]["changed"] is False and j["read_only"]["changes"] == []
    assert j["files_written"] == []
    if provider == "claude":
        # claude lists the refused call among its permission denials.
        assert any(d.startswith("Write") for d in j["denied"]), j
    # codex's sandbox answers "Read-only file system" but its --json stream does not show
    # the refused command at all: the tree hash is the proof that holds for both.
    # Denied, so the verdict stands: it read the file and said MET.
    assert done.code == 0, j
    assert (j["verdict"], j["grounded"]) == ("MET", True)


def test_a_judge_that_runs_out_of_time_is_not_met(git_repo, tmp_path):
    # claude only: the timeout is loopkit's (a process-group kill), the same for any CLI.
    claude_bin()
    provider = "claude"
    repo = docs_repo(git_repo)
    (repo / "loop.yaml").write_text(
        "version: 1\nobjective: document the routes\nscope: {writable: ['docs/**']}\n"
        "criteria: [{name: t, run: 'true'}]\n"
        f"judge: {{provider: {provider}, timeout: 2}}\n"
    )
    turns = [{"delay": 20, "text": "VERDICT: MET"}]
    done, _ = judged(provider, repo, tmp_path, turns, "--goal", GOAL)
    j = done.section
    assert done.code == 1
    assert (j["verdict"], j["reason"], j["stop_reason"]) == ("NOT_MET", "run_failed", "timeout")


def test_the_judge_uses_its_own_provider_and_model_from_the_contract(git_repo, tmp_path):
    claude_bin()
    repo = docs_repo(git_repo)
    (repo / "loop.yaml").write_text(
        "version: 1\nobjective: document the routes\nscope: {writable: ['docs/**']}\n"
        "criteria: [{name: t, run: 'true'}]\n"
        "worker: {provider: codex, model: gpt-5.5}\n"
        "judge: {provider: claude, model: judge-model-7}\n"
    )
    turns = judge_turns("claude", read="docs/api.md", reply="Documented.\nVERDICT: MET")
    with model_server(turns, log=tmp_path / "requests.jsonl") as server:
        done = lk_judge(repo, judge_env("claude", server, tmp_path), "--goal", GOAL)
        requests = server.model_requests("anthropic")
    assert done.code == 0, done.stderr
    j = done.section
    assert j["provider"] == "claude"
    assert "judge-model-7" in j["command"]
    assert requests and all(r["body"]["model"] == "judge-model-7" for r in requests)
    # The prompt is kept beside the judge's stream.
    prompt = (repo / j["transcript"]).parent / "handoff.md"
    assert GOAL in prompt.read_text()


@pytest.mark.parametrize(("read", "outcome", "code"), [(True, "complete", 0), (False, "retry", 10)])
def test_in_the_pipe_only_a_grounded_met_completes_a_goal(read, outcome, code, git_repo, tmp_path):
    """lk-diff | lk-verify | lk-judge | lk-decide on a GOAL task, claude as the judge."""
    import sys

    claude_bin()
    repo = docs_repo(git_repo)
    (repo / "loop.yaml").write_text(
        "version: 1\nobjective: document the routes\nscope: {writable: ['docs/**']}\n"
        "criteria: [{name: documented, run: 'grep -q health docs/api.md'}]\n"
        "judge: {provider: claude}\n"
    )
    git(repo, "add", "loop.yaml")
    git(repo, "commit", "-q", "-m", "contract")
    with (repo / "docs" / "api.md").open("a") as f:  # the worker's change
        f.write("\n## Errors\n\n503 when the database is down.\n")
    task = {"id": "health-docs", "text": f"GOAL: {GOAL}", "kind": "goal"}
    doc = {"kind": "loopkit/attempt", "version": 1, "task": task}
    turns = judge_turns(
        "claude", read="docs/api.md" if read else None, reply="Documented.\nVERDICT: MET"
    )
    with model_server(turns, log=tmp_path / "requests.jsonl") as server:
        env = judge_env("claude", server, tmp_path)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
        pipe = 'lk-diff | lk-verify | lk-judge | lk-decide; echo "${PIPESTATUS[*]}" >&2'
        done = subprocess.run(
            ["bash", "-c", pipe],
            cwd=repo,
            env=env,
            input=json.dumps(doc),
            capture_output=True,
            text=True,
            timeout=120,
        )
        prompt = json.dumps(server.model_requests("anthropic")[0])
    statuses = done.stderr.strip().splitlines()[-1].split()
    assert statuses[:2] == ["0", "0"], done.stderr
    assert statuses[2] == ("0" if read else "1")
    assert statuses[3] == str(code), done.stderr
    final = json.loads(done.stdout)
    assert final["judge"]["grounded"] is read
    assert final["decision"]["outcome"] == outcome
    # The judge saw what changed and the check that ran on this tree.
    assert "modified docs/api.md" in prompt and "PASS documented" in prompt


def _processes_in(directory: Path) -> list[int]:
    """Pids of live processes whose working directory is ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == directory:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_an_interrupted_judge_leaves_no_process_behind(git_repo, tmp_path):
    claude_bin()
    repo = docs_repo(git_repo)
    turns = [{"delay": 30, "text": "VERDICT: MET"}]
    with model_server(turns) as server:
        env = judge_env("claude", server, tmp_path)
        child = subprocess.Popen(
            [lk_judge_bin(), "--provider", "claude", "--goal", GOAL],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not _processes_in(repo.resolve()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_in(repo.resolve()), "the judge's CLI never started"
        time.sleep(2)  # mid-request: the scripted model takes 30 s to answer
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=20)
    assert child.returncode == 130, err
    assert "SIGTERM" in err and out == ""
    time.sleep(0.3)
    assert _processes_in(repo.resolve()) == []
