"""The state folder is created at the repository root and excluded from git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit import control
from loopkit import git as gits
from loopkit.errors import EnvironmentProblem
from loopkit.workspace import STATE_ENV, Workspace, state_folder
from tests.helpers import git
from tests.helpers.evidence import lk_run as _run
from tests.helpers.evidence import notes_project as _project


def test_state_folder_is_excluded_so_add_all_never_sweeps_it(git_repo: Path) -> None:
    sub = git_repo / "src"
    sub.mkdir()
    path = Workspace.open(cwd=sub).state
    assert path == git_repo / ".loopkit"
    (path / "ledger.jsonl").write_text("{}\n")
    git(git_repo, "add", "-A")
    assert ".loopkit" not in git(git_repo, "diff", "--cached", "--name-only")
    # Idempotent: the exclude line is written once.
    state_folder(git_repo, gits.index_path(git_repo))
    state_folder(git_repo)
    exclude = (git_repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.loopkit/") == 1


def test_state_folder_survives_reset_and_clean(git_repo: Path) -> None:
    path = state_folder(git_repo)
    (path / "keep.txt").write_text("x")
    git(git_repo, "reset", "-q", "--hard")
    git(git_repo, "clean", "-fdq")
    assert (path / "keep.txt").read_text() == "x"


def test_a_workspace_outside_a_repository_is_an_environment_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="not a git repository"):
        Workspace.open(cwd=tmp_path)


def test_env_override(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_ENV, "var/lk")
    assert Workspace.open(cwd=git_repo).state == git_repo / "var" / "lk"
    assert "/var/lk/" in (git_repo / ".git" / "info" / "exclude").read_text()


def test_contract_state_dir_is_the_state_folder_of_every_command(git_repo: Path) -> None:
    (git_repo / "loop.yaml").write_text(
        "version: 1\nobjective: x\nstate_dir: var/lk\nscope: {writable: ['**']}\n"
        "criteria: [{name: t, run: 'true'}]\n"
    )
    ws = Workspace.open(cwd=git_repo)
    assert ws.state == git_repo / "var" / "lk"
    exclude = (git_repo / ".git" / "info" / "exclude").read_text()
    assert "/var/lk/" in exclude and "/.loopkit/" not in exclude


def test_cancel_and_report_find_the_state_folder_the_contract_names(git_repo: Path) -> None:
    """A contract with `state_dir`: lk-decide keeps its ledger and looks for the
    cancellation there, so lk cancel must write it there and lk report read it there."""
    _project(git_repo, "true", wall_seconds=600, check_timeout=5)
    with (git_repo / "loop.yaml").open("a") as f:
        f.write("state_dir: var/lk\n")
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo).stdout
    assert _run(["lk-decide"], git_repo, task).returncode == 10
    assert (git_repo / "var/lk/ledger.jsonl").is_file()
    report = _run(["lk", "report", "--json"], git_repo)
    assert [t["task_id"] for t in json.loads(report.stdout)["tasks"]] == ["notes"]
    assert _run(["lk", "cancel", "--reason", "stop"], git_repo).returncode == 0
    assert (git_repo / "var/lk/cancel.json").is_file()
    assert _run(["lk-decide", "--admit"], git_repo, task).returncode == 30
    assert _run(["lk-decide"], git_repo, task).returncode == 30
    assert _run(["lk", "cancel", "--clear"], git_repo).returncode == 0
    assert _run(["lk-decide", "--admit"], git_repo, task).returncode == 0
    # A contract that cannot be read does not stop anyone from asking to stop.
    (git_repo / "loop.yaml").write_text("version: [\n")
    assert _run(["lk", "cancel"], git_repo).returncode == 0


def test_git_s_own_info_refs_is_not_control_state(git_repo: Path) -> None:
    """A background `git gc` (after any commit) rewrites .git/info/refs: that is git
    talking to itself, never a worker moving what judges it."""
    before = control.control_state(git_repo)
    git(git_repo, "update-server-info")
    assert (git_repo / ".git" / "info" / "refs").exists()
    assert control.control_state(git_repo) == before
    (git_repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    assert control.control_state(git_repo) != before
