"""The state folder is created at the repository root and excluded from git."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit import state
from loopkit.errors import EnvironmentProblem
from tests.conftest import git


def test_state_dir_is_excluded_so_add_all_never_sweeps_it(git_repo: Path) -> None:
    sub = git_repo / "src"
    sub.mkdir()
    path = state.state_dir(sub)
    assert path == git_repo / ".loopkit"
    (path / "ledger.jsonl").write_text("{}\n")
    git(git_repo, "add", "-A")
    assert ".loopkit" not in git(git_repo, "diff", "--cached", "--name-only")
    # Idempotent: the exclude line is written once.
    state.state_dir(git_repo)
    exclude = (git_repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.loopkit/") == 1


def test_state_dir_survives_reset_and_clean(git_repo: Path) -> None:
    path = state.state_dir(git_repo)
    (path / "keep.txt").write_text("x")
    git(git_repo, "reset", "-q", "--hard")
    git(git_repo, "clean", "-fdq")
    assert (path / "keep.txt").read_text() == "x"


def test_state_dir_outside_a_repository_is_an_environment_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="not a git repository"):
        state.state_dir(tmp_path)


def test_env_override(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(state.STATE_ENV, "var/lk")
    assert state.state_dir(git_repo) == git_repo / "var" / "lk"
    assert "/var/lk/" in (git_repo / ".git" / "info" / "exclude").read_text()
