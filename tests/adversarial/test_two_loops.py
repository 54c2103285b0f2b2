"""Two loops on one checkout (reproduction 9, second half): each would save, revert and
park the other's work. The second must be refused at once, before its worker runs, with a
message that says why; the first must finish as if alone."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.recipes import RECIPES, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

# The first task's worker waits (for the test's go) before writing anything, so the tree
# is clean while the second loop starts.
WORKER = """
if task == "first":
    (STATE / "first-started").write_text("yes")
    deadline = time.time() + 60
    while not (STATE / "go").exists() and time.time() < deadline:
        time.sleep(0.05)
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


def _loop(task: str) -> list[str]:
    return [
        str(RECIPES / "loop.sh"),
        "--contract",
        "loop.yaml",
        "--task-id",
        task,
        "--task",
        "Make value good",
    ]


def test_a_second_loop_on_the_same_checkout_is_refused_at_once(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER)
    before = p.head()
    first = subprocess.Popen(
        _loop("first"),
        cwd=p.root,
        env=recipe_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while not (p.scratch / "first-started").exists():
            assert time.time() < deadline and first.poll() is None, "the first loop never started"
            time.sleep(0.05)
        second = p.execute(_loop("second"))
        assert second.returncode == 4, fail_message(second)
        assert "another loop" in second.stderr and str(first.pid) in second.stderr
        assert "second" not in (p.scratch / "log").read_text()  # its worker never ran
        assert p.run_dirs("second") == []
    finally:
        (p.scratch / "go").write_text("go")
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, f"exit {first.returncode}\n{err[-4000:]}"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.git("log", "-1", "--pretty=%s").startswith("loopkit: first:")
    assert not p.lock().exists()  # released on exit
