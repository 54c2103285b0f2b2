"""The tree that lands is the next task's base: lk-verify's results on it, kept by
lk-decide, are that base's results -- the next task's base run finds them and runs nothing
(no clean-room sync, no check). Kept only as the next lk-invoke seals them: a worker that
rewrites them is caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# Slower than lk-invoke's half second, so the base's checks start beside the worker.
WORKER = """
time.sleep(1.0)
Path("src").mkdir(exist_ok=True)
Path(f"src/{task}.txt").write_text("done\\n")
"""

CHECK = {"name": "notes", "run": "test ! -e src/bad.txt", "timeout": 30}

# Without a sandbox, task one's worker plants a base result for the very tree it leaves
# (the one that lands, so task two's base): its check "failed at the base", with the
# fingerprint its failure has (no output, exit 1), for task two's failing check to look
# like a known failure. lk-decide's own results on that tree replace it.
PLANT = """
import hashlib, subprocess
FP = "0c6868c2c44f0536"
time.sleep(1.0)
Path("src").mkdir(exist_ok=True)
if task == "one":
    Path("src/one.txt").write_text("done\\n")
    env = dict(os.environ, GIT_INDEX_FILE=str(STATE / "index"))
    subprocess.run(["git", "add", "-A"], env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    named = [["notes", "test ! -e src/bad.txt", None]]
    key = hashlib.sha256(json.dumps([tree, named]).encode()).hexdigest()[:32]
    forged = {"tree": tree, "checks": [{"name": "notes", "passed": False, "fingerprint": FP}]}
    Path(".loopkit/baseline").mkdir(parents=True, exist_ok=True)
    Path(f".loopkit/baseline/{key}.json").write_text(json.dumps(forged))
else:
    Path("src/bad.txt").write_text("a failing tree\\n")
"""


def _loop(project, task: str):  # type: ignore[no-untyped-def]
    return project.run(
        "loop.sh", "--contract", "loop.yaml", "--task-id", task, "--task", task, "--max-rounds", "1"
    )


def test_the_landed_trees_checks_are_the_next_tasks_base(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER, checks=[CHECK], gitignore=".loopkit/\n")
    first = _loop(p, "one")
    assert first.returncode == 0, fail_message(first)
    assert "the base's checks: 1 of 1 pass; ran beside the worker" in first.stderr
    landed = p.git("rev-parse", "HEAD^{tree}").strip()
    kept = [json.loads(f.read_text()) for f in (p.root / ".loopkit" / "baseline").glob("*.json")]
    assert landed in [k["tree"] for k in kept]

    second = _loop(p, "two")
    assert second.returncode == 0, fail_message(second)
    assert "the base's checks: 1 of 1 pass; known already" in second.stderr, second.stderr
    assert "ran beside the worker" not in second.stderr


def test_a_base_result_a_worker_planted_for_its_own_tree_is_replaced(tmp_path: Path) -> None:
    p = make_project(
        tmp_path, PLANT, checks=[CHECK], gitignore=".loopkit/\n", sandbox={"mode": "off"}
    )
    assert _loop(p, "one").returncode == 0
    landed = p.git("rev-parse", "HEAD").strip()
    second = _loop(p, "two")
    assert second.returncode != 0, fail_message(second)  # its check failed: not landed
    assert p.git("rev-parse", "HEAD").strip() == landed
    # The base results task two is given are loopkit's own: the check passed there.
    assert "the base's checks: 1 of 1 pass; known already" in second.stderr, second.stderr
