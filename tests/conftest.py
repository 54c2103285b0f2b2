"""Shared fixtures: real git repositories with a fixed identity and a private HOME."""

from __future__ import annotations

import compileall
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.helpers import GIT_ENV, git, require_tool  # noqa: F401 -- shared with the tests

LOOPKIT_SRC = Path(__file__).resolve().parents[1] / "loopkit"


def pytest_configure(config: pytest.Config) -> None:
    """loopkit's bytecode, compiled once before the tests start (in the main process, before
    any xdist worker): with PYTHONDONTWRITEBYTECODE set, every lk-* command the tests run
    would otherwise compile loopkit from source again. A .pyc older than its source is
    ignored by Python, so one left from another checkout state is harmless."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(str(LOOPKIT_SRC), quiet=1)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, None, None]:
    """pytest caches the test modules it rewrote for assertions in __pycache__ unless
    bytecode writing is off; allowed while collecting, each xdist worker (and the next run)
    imports the cached rewrite instead of redoing it. The tests themselves run as before."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's worksteal, each worker first gets a contiguous part of the
    collection (part k: what is left // the workers left, from the front), runs it front to
    back, and idle workers steal from the others' ends. The tests marked ``longest`` are
    dealt out to the fronts of those parts, so that none of them is left to run alone at
    the end while the other workers idle. The order of every other test is kept."""
    import os

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    longest = [i for i in items if i.get_closest_marker("longest") is not None]
    if workers < 2 or not longest:
        return
    rest = [i for i in items if i.get_closest_marker("longest") is None]
    dealt = [longest[k::workers] for k in range(workers)]
    ordered: list[pytest.Item] = []
    left = len(items)
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        take = max(0, size - len(dealt[k]))
        ordered += dealt[k] + rest[:take]
        del rest[:take]
    items[:] = ordered + rest


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
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
