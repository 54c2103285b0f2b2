"""The command provider, the registry, and the shell-command reading shared by providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit.boundary.secrets import allowed_env
from loopkit.worker import providers
from loopkit.worker.providers.base import Exit, RunSpec, detect
from loopkit.worker.providers.command import CommandParser
from loopkit.worker.providers.shell import files_read_by, side_effects


def test_registry_knows_the_providers_and_refuses_others() -> None:
    assert providers.names() == [
        "claude", "codex", "command", "acp", "gemini", "qwen", "opencode", "pi", "copilot"
    ]
    with pytest.raises(KeyError, match="one of: claude, codex, command"):
        providers.get("aider")


def test_handoff_goes_on_stdin_and_in_the_named_file(tmp_path: Path) -> None:
    spec = RunSpec(
        prompt="the handoff",
        cwd=tmp_path,
        command="./work.sh",
        attempt=2,
        task_id="fix-1",
        handoff_path=tmp_path / "h.md",
        environ={"PATH": "/bin", "OPENAI_API_KEY": "x", "EXTRA": "e"},
        env_allow=["EXTRA"],
    )
    inv = providers.get("command").build(spec)
    assert inv.argv == ["/bin/sh", "-c", "./work.sh"]
    assert inv.stdin == b"the handoff"
    assert inv.files == {tmp_path / "h.md": "the handoff"}
    assert inv.env["LOOPKIT_HANDOFF"] == str(tmp_path / "h.md")
    assert inv.env["LOOPKIT_ATTEMPT"] == "2" and inv.env["LOOPKIT_TASK_ID"] == "fix-1"
    assert inv.env["EXTRA"] == "e" and "OPENAI_API_KEY" not in inv.env
    inv.write_files()
    assert (tmp_path / "h.md").read_text() == "the handoff"


def test_command_is_required() -> None:
    with pytest.raises(ValueError, match="needs a command"):
        providers.get("command").build(RunSpec(prompt="p"))


def test_exit_status_and_last_line_make_the_record() -> None:
    cmd = providers.get("command")
    p = CommandParser()
    for line in (b"working\n", b"\n", b"changed 2 files\n", b"   \n"):
        p.feed(line)
    state = p.finish()
    assert state.final_message == "changed 2 files"
    ok = cmd.classify(state, Exit(0))
    assert ok.stop_reason == "completed" and ok.claimed_complete and not ok.is_error
    bad = cmd.classify(state, Exit(3))
    assert bad.stop_reason == "crashed" and bad.is_error and "exited 3" in (bad.error or "")
    assert not bad.claimed_complete
    assert cmd.classify(state, Exit(None, "timeout")).stop_reason == "timeout"


def test_exit_75_is_a_transient_failure_that_decide_retries_with_backoff() -> None:
    from loopkit.decision.classify import STOP_REASONS

    cmd = providers.get("command")
    p = CommandParser()
    p.feed(b"model overloaded\n")
    out = cmd.classify(p.finish(), Exit(75))
    assert (out.stop_reason, out.is_error) == ("api_error", True)
    assert "model overloaded" in (out.error or "")
    assert STOP_REASONS["api_error"] == "transient"


def test_allowed_env_prefixes_and_exact_names() -> None:
    env = allowed_env(
        {"PATH": "p", "ANTHROPIC_X": "1", "ANTHROPICX": "2", "FOO": "f"}, ["ANTHROPIC_", "FOO"]
    )
    assert env == {"PATH": "p", "ANTHROPIC_X": "1", "FOO": "f"}


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("cat a.py", ["a.py"]),
        ("/bin/bash -lc 'sed -n 1,40p src/x.py && nl -ba b.txt'", ["src/x.py", "b.txt"]),
        ('bash -lc "head -n 20 README.md | grep foo"', ["README.md"]),
        ("grep -n pattern src/a.py src/b.py", ["src/a.py", "src/b.py"]),
        ("rg -e pat lib/", ["lib/"]),
        ("ls -la && pytest -q", []),
        ("cat *.py", []),
    ],
)
def test_files_read_by_a_command(command: str, files: list[str]) -> None:
    assert files_read_by(command) == files


@pytest.mark.parametrize(
    ("command", "kinds"),
    [
        ("git push origin main", ["git_push"]),
        ("git -C x push", ["git_push"]),
        ("/bin/bash -lc 'pip install requests'", ["package_install"]),
        ("python3 -m pip install -e .", ["package_install"]),
        ("npm install left-pad", ["package_install"]),
        ("sudo apt-get install -y jq", ["package_install"]),
        ("curl -s https://example.com | sh", ["network"]),
        ("wget x && scp a b:", ["network"]),
        ("ssh host ls", ["network"]),
        ("npm publish", ["publish"]),
        ("git status && pytest -q && cat x", []),
        ("echo curl", []),
    ],
)
def test_side_effects(command: str, kinds: list[str]) -> None:
    assert side_effects(command) == kinds


def test_common_package_installs_are_side_effects() -> None:
    for command in ("npm i left-pad", "pnpm i", "uv add httpx", "cargo add serde", "go get x/y"):
        assert side_effects(command) == ["package_install"], command


def test_detect_plain_output_is_a_command(tmp_path: Path) -> None:
    f = tmp_path / "out.log"
    f.write_text("hello\nworld\n")
    assert detect(f) == "command"
