"""The tests' helpers: one package, a module per subject (agents, decide, evidence,
invoke, judge, plan, recipes), and here what every test shares: git with a fixed
identity, the outside tools `make test` promised."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def require_tool(name: str) -> str:
    """The path of an outside tool; a failure (not a skip) when `make test` promised it."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("LOOPKIT_REQUIRE_AGENTS") == "1":
        pytest.fail(f"{name} is not installed; `make test` installs it (make agents, make tools)")
    pytest.skip(f"{name} not installed (run `make agents` or `make tools`)")
