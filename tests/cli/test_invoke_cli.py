"""lk-invoke through click's CliRunner: transcripts, dry runs, the command worker, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.invoke import main

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def invoke(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def contract(path: Path, **worker: object) -> Path:
    data = {
        "version": 1,
        "objective": "Write hello.txt.",
        "scope": {"writable": ["hello.txt"]},
        "criteria": [{"name": "hello", "run": "grep -q hello hello.txt"}],
        "worker": worker or {"provider": "command", "command": "echo hello > hello.txt; echo ok"},
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("case", "code"),
    [("claude_write_edit", 0), ("claude_429", 1), ("codex_patch_exec", 0), ("codex_stuck", 1)],
)
def test_transcript_prints_a_valid_run_section(case: str, code: int) -> None:
    rc, out, _ = invoke(["--transcript", str(GOLDEN / f"{case}.jsonl")])
    assert rc == code
    doc = json.loads(out)
    assert doc["kind"] == "loopkit/run"
    schema.validate(doc, "run")
    assert doc["provider"] == case.split("_")[0]


def test_transcript_provider_can_be_forced(tmp_path: Path) -> None:
    f = tmp_path / "out.log"
    f.write_text("line one\nfinal words\n")
    rc, out, _ = invoke(["--transcript", str(f), "--provider", "command"])
    assert rc == 0 and json.loads(out)["final_message"] == "final words"


def test_the_final_message_carries_no_terminal_control_sequences(tmp_path: Path) -> None:
    f = tmp_path / "out.log"
    f.write_bytes(b"\x1b]0;owned\x07\x1b]52;c;cm0=\x1b\\\xc2\x9b2Jdone \x1b[1mnow\x1b[0m\r\n")
    rc, out, _ = invoke(["--transcript", str(f), "--provider", "command"])
    assert rc == 0 and json.loads(out)["final_message"] == "done now"
    line = {"type": "result", "subtype": "success", "is_error": False, "result": "\x1b]0;t\x07ok"}
    stream = tmp_path / "claude.jsonl"
    stream.write_text(json.dumps(line) + "\n")
    rc, out, _ = invoke(["--transcript", str(stream), "--provider", "claude"])
    assert json.loads(out)["final_message"] == "ok"


def test_missing_transcript_is_bad_input(tmp_path: Path) -> None:
    rc, out, err = invoke(["--transcript", str(tmp_path / "nope.jsonl")])
    assert rc == 3 and out == "" and "nope.jsonl" in err
    (tmp_path / "empty.jsonl").write_text("\n\n")
    rc, out, err = invoke(["--transcript", str(tmp_path / "empty.jsonl")])
    assert rc == 3 and out == "" and "empty" in err


def test_dry_run_prints_argv_and_handoff_and_runs_nothing(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    c = contract(git_repo.parent / "loop.yaml", provider="claude", max_turns=4, model="sonnet")
    rc, out, _ = invoke(["--contract", str(c), "--dry-run", "--resume", "S1"])
    assert rc == 0
    plan = json.loads(out)
    assert plan["argv"][:2] == ["claude", "-p"] and plan["argv"][2] == plan["handoff"]
    assert "--resume" in plan["argv"] and "4" in plan["argv"]
    assert "Write hello.txt." in plan["handoff"]
    assert plan["stdin"] == "/dev/null"
    assert not (git_repo / ".loopkit").exists()


def test_command_worker_with_a_piped_attempt(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    c = contract(git_repo.parent / "loop.yaml")
    attempt = {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": {"id": "hello", "text": "Say hello.", "kind": "task"},
    }
    rc, out, _ = invoke(["--contract", str(c)], stdin=json.dumps(attempt))
    assert rc == 0
    doc = json.loads(out)
    schema.validate(doc, "attempt")
    run = doc["run"]
    assert run["provider"] == "command" and run["stop_reason"] == "completed"
    assert run["claimed_complete"] is True and run["final_message"] == "ok"
    assert doc["task"]["id"] == "hello" and doc["attempt_id"]
    # --contract with a document that had none: the contract travels on down the pipe.
    assert doc["contract"]["objective"] == "Write hello.txt."
    assert (git_repo / "hello.txt").read_text() == "hello\n"
    saved = git_repo / run["handoff"]
    assert "Say hello." in saved.read_text()
    assert (git_repo / run["transcript"]).read_text() == "ok\n"


def test_a_failing_command_prints_its_record_and_exits_1(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    rc, out, _ = invoke(["--command", "echo trying; echo 'no luck' >&2; exit 7"])
    assert rc == 1
    run = json.loads(out)
    schema.validate(run, "run")
    assert run["kind"] == "loopkit/run"
    assert (run["stop_reason"], run["exit_code"], run["is_error"]) == ("crashed", 7, True)
    assert "exited 7" in run["error"] and run["claimed_complete"] is False


def test_missing_provider_cli_exits_4_with_install_hint(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = "/usr/bin:/bin"
    if shutil.which("claude", path=path):
        pytest.skip("claude is installed system-wide")
    monkeypatch.chdir(git_repo)
    monkeypatch.setenv("PATH", path)
    c = contract(git_repo.parent / "loop.yaml", provider="claude")
    rc, out, err = invoke(["--contract", str(c)])
    assert rc == 4 and out == ""
    assert "npm install -g @anthropic-ai/claude-code" in err and "make agents" in err


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["--command", "true"], "not json", "not JSON"),
        (["--provider", "claude"], None, "nothing to hand off"),
        (["--provider", "command"], None, "needs a command"),
    ],
)
def test_bad_input_exits_3(
    git_repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    stdin: str | None,
    needle: str,
) -> None:
    monkeypatch.chdir(git_repo)
    rc, out, err = invoke(args, stdin)
    assert rc == 3 and out == ""
    assert needle in err


def test_help_lists_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for text in ("--transcript", "--dry-run", "--resume", "provider CLI is not installed"):
        assert text in result.stdout
