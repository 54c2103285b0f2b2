"""`make demo` / `make demo-claude`: the parser story through recipes/loop.sh, checked from
the outside (exit code, ledger, commits, checklist)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.recipes import RECIPES, recipe_env

pytestmark = pytest.mark.slow


def _demo(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopkit.testing.demo", "--dir", str(tmp_path / "demo"), *args],
        capture_output=True,
        text=True,
        env=recipe_env(env),
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


def _check_story(tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "The story held" in proc.stdout
    repo = tmp_path / "demo" / "parser-project"
    records = [
        json.loads(line)
        for line in (repo / ".loopkit" / "ledger.jsonl").read_text().splitlines()
        if line.strip()
    ]
    decided = [r for r in records if r["type"] == "attempt"]
    assert [r["decision"]["outcome"] for r in decided] == ["retry", "replan", "complete"]
    assert decided[1]["decision"]["failure_class"] == "no_progress"
    assert decided[0]["evidence"]["fingerprint"] == decided[1]["evidence"]["fingerprint"]
    log = subprocess.run(
        ["git", "log", "--pretty=%s"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert log[0] == "loopkit: mark blank-line done"
    assert log[1].startswith("loopkit: blank-line:")
    assert len(log) == 3
    assert "- [x] Stop parse_headers failing on a blank line" in (repo / "TASKS.md").read_text()
    assert "if not line.strip()" in (repo / "src/parser/headers.py").read_text()
    # The ledger and lk report are printed.
    assert "The ledger" in proc.stdout and "loop health" in proc.stdout


def test_demo_tells_the_parser_story_with_the_command_worker(tmp_path: Path) -> None:
    _check_story(tmp_path, _demo(tmp_path))


@pytest.mark.agents
def test_demo_claude_tells_the_same_story_through_the_real_cli(tmp_path: Path) -> None:
    from tests.helpers.agents import AGENTS_BIN, claude_bin

    claude = claude_bin()
    path = f"{Path(claude).parent}:{AGENTS_BIN}:{recipe_env()['PATH']}"
    proc = _demo(tmp_path, "--provider", "claude", env={"PATH": path})
    _check_story(tmp_path, proc)
    requests = (tmp_path / "demo" / "model-requests.jsonl").read_text()
    assert "/v1/messages" in requests


@pytest.mark.parametrize("module", ["loopkit.testing.demo"])
def test_demo_names_the_recipes_folder(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--recipes"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out) == RECIPES
    assert (Path(out) / "loop.sh").is_file()
