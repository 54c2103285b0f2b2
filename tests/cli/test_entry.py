"""The one error handler: exit codes and one-line messages for every kind of failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from loopkit.cli._entry import command
from loopkit.cli.lk import COMMANDS
from loopkit.cli.lk import main as lk
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.exitcodes import ExitCode
from loopkit.git import GitError


def _cmd(exc: BaseException | None, code: int = 0) -> click.Command:
    @command()
    def cli() -> int:
        if exc is not None:
            raise exc
        return code

    return cli


@pytest.mark.parametrize(
    ("exc", "code", "needle"),
    [
        (
            BadInput("loop.yaml", "expected a list", path="$.criteria"),
            3,
            "loop.yaml: $.criteria: expected a list",
        ),
        (EnvironmentProblem("/tmp/x: not a git repository"), 4, "not a git repository"),
        (GitError("git write-tree failed: fatal: bad object"), 4, "git write-tree failed"),
        (KeyboardInterrupt(), 130, "interrupted"),
        (ZeroDivisionError("boom"), 70, "internal error: ZeroDivisionError: boom"),
    ],
)
def test_failures_map_to_their_code_with_one_line(
    exc: BaseException, code: int, needle: str
) -> None:
    result = CliRunner().invoke(_cmd(exc), [])
    assert result.exit_code == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_internal_error_names_a_log_with_the_traceback() -> None:
    result = CliRunner().invoke(_cmd(RuntimeError("kaput")), [])
    assert result.exit_code == ExitCode.INTERNAL
    log = result.stderr.split("traceback in ")[1].rstrip(")\n")
    text = Path(log).read_text()
    assert "Traceback" in text and "kaput" in text
    Path(log).unlink()


def test_returned_code_is_the_exit_code() -> None:
    assert CliRunner().invoke(_cmd(None, 22), []).exit_code == 22


def test_usage_error_is_2() -> None:
    result = CliRunner().invoke(_cmd(None), ["--no-such-flag"])
    assert result.exit_code == ExitCode.USAGE
    assert "No such option" in result.stderr


def test_lk_lists_and_reaches_every_built_command() -> None:
    result = CliRunner().invoke(lk, ["--help"])
    assert result.exit_code == 0
    assert "schema" in result.stdout
    assert "Exit codes shared by every command" in result.stdout
    for name in ("plan", "schema"):
        sub = CliRunner().invoke(lk, [name, "--help"])
        assert sub.exit_code == 0, (name, sub.output)


def test_lk_schema_prints_each_schema() -> None:
    listed = CliRunner().invoke(lk, ["schema", "--list"]).stdout.split()
    assert {"attempt", "contract", "task", "run", "diff", "verify", "judge", "decision"} <= set(
        listed
    )
    for name in listed:
        result = CliRunner().invoke(lk, ["schema", name])
        assert result.exit_code == 0
        assert json.loads(result.stdout)["$id"].endswith(f"/{name}.json")


def test_lk_schema_unknown_name_is_bad_input() -> None:
    result = CliRunner().invoke(lk, ["schema", "nope"])
    assert result.exit_code == 3
    assert "no schema 'nope'" in result.stderr


def test_every_mapped_module_is_a_click_command() -> None:
    # The table in lk.py must point at real click commands (every one of them is built).
    import importlib

    for name, (module, attr, _help) in COMMANDS.items():
        mod = importlib.import_module(module)
        assert isinstance(getattr(mod, attr), click.Command), name


def test_console_script_help_starts_without_heavy_imports() -> None:
    # `lk --help` must import click only: jsonschema, yaml and git stay out of start-up.
    code = (
        "import sys; from loopkit.cli.lk import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('jsonschema', 'yaml', 'git', 'loopkit.git', 'referencing')"
        " if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "HEAVY="
