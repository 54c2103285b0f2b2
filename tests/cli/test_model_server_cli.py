"""lk-model-server through click's CliRunner: --check, bad scripts, option errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from loopkit.testing.cli import main


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin, prog_name="lk-model-server")
    return result.exit_code, result.stdout, result.stderr


def test_check_counts_turns_per_api(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("claude: [a, b, c]\ncodex: [d]\n")
    code, out, err = invoke(str(script), "--check")
    assert code == 0 and err == ""
    assert json.loads(out) == {
        "ok": True,
        "turns": {"anthropic": 3, "openai": 1, "chat": 0, "gemini": 0},
    }


def test_check_reads_stdin() -> None:
    code, out, _ = invoke("-", "--check", stdin='[{"text": "a"}]')
    assert code == 0 and json.loads(out)["turns"] == {
        "anthropic": 1,
        "openai": 1,
        "chat": 1,
        "gemini": 1,
    }


def test_bad_script_is_one_line_exit_3(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("- error: {status: 200}\n")
    code, out, err = invoke(str(script), "--check")
    assert code == 3 and out == ""
    assert err.splitlines() == [
        f"lk-model-server: error: {script}: $[0].error.status: expected an integer 400..599, got 200"
    ]


def test_missing_script_exit_3(tmp_path: Path) -> None:
    code, _, err = invoke(str(tmp_path / "nope.yaml"))
    assert code == 3 and "cannot read the script" in err


def test_env_needs_home(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("- a\n")
    code, out, err = invoke(str(script), "--env", "codex")
    assert code == 3 and out == "" and "--env needs --home" in err


def test_unknown_client_is_a_usage_error(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("- a\n")
    code, _, _ = invoke(str(script), "--env", "aider", "--home", str(tmp_path))
    assert code == 2
