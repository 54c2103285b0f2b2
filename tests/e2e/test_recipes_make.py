"""recipes/loop.mk: the same ratchet as make targets (GNU make)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_recipes_loop import BAD_THEN_GOOD, CRASH_WITH_DEBRIS
from tests.e2e.test_recipes_phased import CHECK, WORKER, plan
from tests.helpers.recipes import RECIPES, Project, fail_message, make_project

pytestmark = pytest.mark.slow


def make(
    p: Project, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    return p.execute(
        ["make", "--no-print-directory", "-f", str(RECIPES / "loop.mk"), *args],
        env=env,
        timeout=180,
    )


def test_make_loop_retries_in_place_then_commits(tmp_path: Path) -> None:
    p = make_project(tmp_path, BAD_THEN_GOOD)
    status = tmp_path / "status"
    proc = make(
        p,
        "loop",
        "CONTRACT=loop.yaml",
        "TASK_ID=fix-value",
        "TASK=Make 'value' \"good\"",
        f"STATUS={status}",
    )
    assert proc.returncode == 0, fail_message(proc)
    assert status.read_text().strip() == "0"
    assert p.worker_calls() == 2
    assert p.git("log", "-1", "--pretty=%s").strip() == "loopkit: fix-value: Make 'value' \"good\""
    # Every stage's document is a file made from the one before.
    (run,) = p.run_dirs("fix-value")
    for stage in ("admit", "invoke", "diff", "verify", "judged", "decide"):
        assert (run / f"1-{stage}.json").is_file(), stage
    assert (run / "2-decide.rc").read_text().strip() == "0"
    assert p.git("status", "--porcelain") == ""


@pytest.mark.longest
def test_make_loop_parks_with_the_same_guarantees(tmp_path: Path) -> None:
    p = make_project(tmp_path, CRASH_WITH_DEBRIS, gitignore="data/\ncache.db\n")
    (p.root / "data").mkdir()
    status = tmp_path / "status"
    proc = make(
        p,
        "loop",
        "CONTRACT=loop.yaml",
        "TASK_ID=fix-value",
        f"STATUS={status}",
        env={"RESET_PATHS": "data/ cache.db"},
    )
    assert proc.returncode != 0  # make reports any failing recipe as 2 ...
    assert status.read_text().strip() == "21", fail_message(proc)  # ... the loop's own code is here
    assert not (p.root / "tests" / "test_stray.py").exists()
    assert (p.root / "README.md").read_text() == "# project\n"
    assert (p.root / "data").is_dir() and not list((p.root / "data").iterdir())
    assert not (p.root / "cache.db").exists()
    ref = p.loopkit_refs()[-1]  # every attempt is saved; the last one is the park's
    assert "tests/test_stray.py" in p.files(ref)
    assert "parked: fix-value" in (p.root / "MEMORY.md").read_text()
    assert p.git("status", "--porcelain") == ""


@pytest.mark.longest
def test_make_phased_goes_through_tasks_md(tmp_path: Path) -> None:
    tasks = (
        plan("alpha", "First")
        + plan("broken", "Will crash")
        + plan("beta", "Second", depends="alpha")
    )
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    proc = make(p, "phased", "TASKS=TASKS.md", "CONTRACT=loop.yaml")
    assert proc.returncode != 0, fail_message(proc)  # one task parked
    assert p.task_line("alpha").startswith("- [x]")
    assert p.task_line("broken").startswith("- [!]")
    assert p.task_line("beta").startswith("- [x]")
    assert "loop health" in proc.stdout
    assert p.git("status", "--porcelain") == ""


def test_make_loop_is_refused_while_another_loop_runs_here(tmp_path: Path) -> None:
    import os

    p = make_project(tmp_path, BAD_THEN_GOOD)
    lock = p.lock()
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")  # this test's own process: alive
    status = tmp_path / "status"
    proc = make(p, "loop", "CONTRACT=loop.yaml", "TASK_ID=fix-value", f"STATUS={status}")
    assert status.read_text().strip() == "4", fail_message(proc)
    assert "another loop" in proc.stderr
    assert p.worker_calls() == 0
    assert lock.exists()  # not ours to release
