"""Shared fixtures: real git repositories with a fixed identity and a private HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import GIT_ENV, git, require_tool  # noqa: F401 -- shared with the tests


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME in tmp, a fixed git identity, no signing, validated output."""
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n[tag]\n\tgpgsign = false\n"
        "[user]\n\tname = Loop Tester\n\temail = loop@example.invalid\n"
    )
    monkeypatch.setenv("HOME", str(home))
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LOOPKIT_VALIDATE_OUTPUT", "1")
    monkeypatch.delenv("LOOPKIT_STATE_DIR", raising=False)


@pytest.fixture
def git_repo(tmp_path: Path) -> Iterator[Path]:
    """A fresh repository on branch main with one commit (README.md)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("# test repo\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    yield repo
