"""Shared fixtures: real git repositories with a fixed identity and a private HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Loop Tester",
    "GIT_AUTHOR_EMAIL": "loop@example.invalid",
    "GIT_COMMITTER_NAME": "Loop Tester",
    "GIT_COMMITTER_EMAIL": "loop@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


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


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


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


def require_tool(name: str) -> str:
    """The path of an outside tool; a failure (not a skip) when `make test` promised it."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("LOOPKIT_REQUIRE_AGENTS") == "1":
        pytest.fail(f"{name} is not installed; `make test` installs it (make agents)")
    pytest.skip(f"{name} not installed (run `make agents`)")
