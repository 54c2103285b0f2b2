"""lk-verify as a pre-commit hook, driven by the real pre-commit tool, offline."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import git
from tests.helpers.evidence import BIN, write_contract

HOOKS_FILE = Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml"


def _manifest() -> list[dict[str, Any]]:
    data = yaml.safe_load(HOOKS_FILE.read_text())
    assert isinstance(data, list)
    return data


def test_hooks_file_is_a_valid_pre_commit_manifest() -> None:
    from pre_commit.clientlib import load_manifest

    hooks = {h["id"]: h for h in load_manifest(str(HOOKS_FILE))}
    verify = hooks["lk-verify"]
    assert verify["entry"] == "lk-verify --summary"  # a person reads it: a summary
    assert verify["language"] == "python"
    assert verify["pass_filenames"] is False and verify["always_run"] is True


def _precommit(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "pre-commit"), *args],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def hooked(git_repo: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose commits go through lk-verify via pre-commit (no network)."""
    if not (BIN / "pre-commit").exists():
        pytest.fail("pre-commit is not installed in the venv (make install)")
    hook = dict(next(h for h in _manifest() if h["id"] == "lk-verify"))
    # Offline: `repo: local` with the published hook's fields; `system` uses lk-verify from
    # PATH instead of building a fresh virtualenv from the network.
    hook["language"] = "system"
    config = {"repos": [{"repo": "local", "hooks": [hook]}]}
    (git_repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    write_contract(
        git_repo,
        criteria=[{"name": "value is good", "run": "grep -qx good value.txt", "timeout": 30}],
    )
    (git_repo / "value.txt").write_text("good\n")
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env.pop("LOOPKIT_VALIDATE_OUTPUT", None)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "contract and hook config")
    installed = _precommit(git_repo, "install", env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return git_repo, env


def _commit(repo: Path, env: dict[str, str], message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "commit", "-m", message],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_failing_check_blocks_the_commit_and_a_fix_goes_through(
    hooked: tuple[Path, dict[str, str]],
) -> None:
    repo, env = hooked
    head = git(repo, "rev-parse", "HEAD")
    (repo / "value.txt").write_text("bad\n")
    git(repo, "add", "value.txt")
    blocked = _commit(repo, env, "break it")
    assert blocked.returncode != 0
    out = blocked.stdout + blocked.stderr
    assert "loopkit acceptance checks" in out and "Failed" in out
    assert "value is good failed (exit 1)" in out
    # A person's summary, not a JSON line: the failing check with its tail; the document
    # is kept in the state folder.
    assert "FAILED  value is good" in out and "a check failed: the commit is blocked" in out
    assert '{"kind"' not in out
    assert (repo / ".loopkit" / "verify-last.json").is_file()
    assert git(repo, "rev-parse", "HEAD") == head  # nothing was committed

    (repo / "value.txt").write_text("good\n")
    (repo / "other.txt").write_text("a real change\n")
    git(repo, "add", "value.txt", "other.txt")
    passed = _commit(repo, env, "fixed")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout + passed.stderr
    assert git(repo, "rev-parse", "HEAD") != head
    assert git(repo, "log", "-1", "--format=%s").strip() == "fixed"
    # The hook's logs stay out of git.
    assert git(repo, "status", "--porcelain") == ""


def test_pre_commit_run_of_the_hook(hooked: tuple[Path, dict[str, str]]) -> None:
    repo, env = hooked
    done = _precommit(repo, "run", "lk-verify", env=env)
    assert done.returncode == 0, done.stdout
    (repo / "value.txt").write_text("bad\n")
    # Unstaged edits are set aside by pre-commit: the hook checks what would be committed.
    done = _precommit(repo, "run", "lk-verify", env=env)
    assert done.returncode == 0, done.stdout
    assert (repo / "value.txt").read_text() == "bad\n"  # and put back afterwards
    git(repo, "add", "value.txt")
    done = _precommit(repo, "run", "lk-verify", env=env)
    assert done.returncode == 1 and "Failed" in done.stdout


CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_TESTS = (
    "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)


def test_the_ratchet_hook_blocks_only_what_a_commit_makes_worse(
    git_repo: Path, tmp_path: Path
) -> None:
    # The suite is red at HEAD (test_add). The plain hook would block every commit; the
    # ratchet blocks only a commit that breaks a test passing at HEAD.
    import sys

    hook = dict(next(h for h in _manifest() if h["id"] == "lk-verify-ratchet"))
    hook["language"] = "system"
    config = {"repos": [{"repo": "local", "hooks": [hook]}]}
    (git_repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    suite = {
        "name": "suite",
        "run": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
        "timeout": 120,
        "env": {"PYTHONPATH": "src", "PYTHONDONTWRITEBYTECODE": "1"},
    }
    write_contract(git_repo, criteria=[suite])
    (git_repo / "src").mkdir()
    (git_repo / "src/calc.py").write_text(CALC)
    (git_repo / "tests").mkdir()
    (git_repo / "tests/test_calc.py").write_text(CALC_TESTS)
    (git_repo / ".gitignore").write_text(".loopkit/\n")
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "a red suite", "--no-verify")
    assert _precommit(git_repo, "install", env=env).returncode == 0

    (git_repo / "README.md").write_text("docs\n")
    git(git_repo, "add", "README.md")
    harmless = _commit(git_repo, env, "docs")
    assert harmless.returncode == 0, harmless.stdout + harmless.stderr

    (git_repo / "src/calc.py").write_text(CALC.replace("a * b", "a + b"))
    git(git_repo, "add", "src/calc.py")
    worse = _commit(git_repo, env, "breaks mul")
    assert worse.returncode != 0, worse.stdout + worse.stderr
    assert "tests/test_calc.py::test_mul" in worse.stdout + worse.stderr
    assert git(git_repo, "log", "-1", "--pretty=%s").strip() == "docs"
