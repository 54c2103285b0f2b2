"""recipes/other-languages/loop.py: the ratchet in Python, on the published surface only
(the commands, their exit codes, their documents) -- no loopkit import, no git call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_recipes_loop import BAD_THEN_GOOD, CRASH_WITH_DEBRIS, GOOD
from tests.helpers.recipes import RECIPES, Project, fail_message, make_project, user_commits_during

pytestmark = pytest.mark.slow
LOOP_PY = RECIPES / "other-languages" / "loop.py"


def py(
    p: Project, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return p.execute([sys.executable, str(LOOP_PY), *args], env=env, timeout=180)


def test_the_python_loop_imports_nothing_of_loopkit_and_calls_no_git() -> None:
    text = LOOP_PY.read_text()
    assert "import loopkit" not in text and "from loopkit" not in text
    assert '"git"' not in text and "'git'" not in text
    assert len(text.splitlines()) <= 150


def test_python_loop_retries_then_commits_exactly_and_marks(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD_THEN_GOOD, tasks="- [ ] Make value good {#fix-value}\n")
    proc = py(p, "--contract", "loop.yaml", "--tasks", "TASKS.md", "--task-id", "fix-value",
              "--task", "Make value good")  # fmt: skip
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 2 and "value" in p.handoff(2)
    subjects = p.git("log", "--pretty=%s").splitlines()
    assert subjects[:2] == ["loopkit: mark fix-value done", "loopkit: fix-value: Make value good"]
    assert p.task_line("fix-value").startswith("- [x]")
    assert p.git("status", "--porcelain") == "" and not p.lock().exists()
    (red,) = [r for r in p.loopkit_refs() if r.startswith("refs/loopkit/fix-value/")]
    assert p.git("show", f"{red}:src/value.txt") != "good\n"  # the red attempt, kept


def test_python_loop_parks_saves_and_resets(tmp_path: Path) -> None:
    p = make_project(tmp_path, CRASH_WITH_DEBRIS, gitignore="data/\ncache.db\n")
    (p.root / "data").mkdir()
    proc = py(p, "--contract", "loop.yaml", "--task-id", "fix-value", "--reset-path", "data",
              "--reset-path", "cache.db")  # fmt: skip
    assert proc.returncode == 21, fail_message(proc)
    assert not (p.root / "tests" / "test_stray.py").exists()
    assert (p.root / "data").is_dir() and not list((p.root / "data").iterdir())
    assert {"tests/test_stray.py", "README.md"} <= p.files(p.loopkit_refs()[-1])
    assert "parked: fix-value" in (p.root / "MEMORY.md").read_text()
    assert p.git("status", "--porcelain") == ""


def test_python_loop_stops_when_the_branch_moved_and_loses_nothing(tmp_path: Path) -> None:
    p = make_project(tmp_path, GOOD)
    before = p.head()
    user = user_commits_during(p)
    try:
        proc = py(p, "--contract", "loop.yaml", "--task-id", "fix-value")
        user.wait(timeout=60)
    finally:
        user.kill()
    assert proc.returncode == 40, fail_message(proc)
    assert "the commit of fix-value refused: the branch moved" in proc.stderr
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert (p.root / "src/value.txt").read_text() == "good\n"
    assert "src/value.txt" in p.files(p.loopkit_refs()[-1])
