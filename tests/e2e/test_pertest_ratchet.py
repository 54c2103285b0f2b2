"""A real pytest suite red at the base, through recipes/phased-loop.sh: the ratchet per
test, exact fingerprints, a check that cannot run, the handoff's order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.recipes import Project, fail_message, make_project

pytestmark = pytest.mark.slow

CALC = """\
def add(a, b):
    return a - b  # the task's bug


def mul(a, b):
    return a * b


def div(a, b):
    return a * b  # another task's bug
"""

TESTS = """\
from calc import add, div, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_div():
    assert div(6, 3) == 2
"""

SUITE = {
    "name": "suite",
    "run": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
    "timeout": 120,
    "env": {"PYTHONPATH": "src", "PYTHONDONTWRITEBYTECODE": "1"},
}


def plan(id_: str, text: str, *extra: str) -> str:
    lines = "".join(f"  {e}\n" for e in extra)
    return f"- [ ] {text} {{#{id_}}}\n  budget: 20 lines / 2 files\n  scope: src/calc.py\n{lines}  end\n"


def project(tmp_path: Path, worker: str, tasks: str, **kw) -> Project:
    kw.setdefault("checks", [SUITE])
    kw.setdefault("writable", ["src/**"])
    return make_project(
        tmp_path,
        worker,
        tasks=tasks,
        files={"src/calc.py": CALC, "tests/test_calc.py": TESTS},
        **kw,
    )


def calc_with(add: str = "a - b", mul: str = "a * b") -> str:
    return (
        "Path('src/calc.py').write_text("
        + repr(
            CALC.replace("return a - b", f"return {add}")
            .replace("return a * b  # another", "return a * b  # another")
            .replace("def mul(a, b):\n    return a * b", f"def mul(a, b):\n    return {mul}")
        )
        + ")\n"
    )


def test_a_drive_by_that_breaks_a_test_passing_at_the_base_is_not_done(tmp_path: Path) -> None:
    # The task's own check passes; the suite was red at the base (test_div, another
    # task's): as a whole it was a known failure, so breaking test_mul went through.
    worker = calc_with(add="a + b", mul="a + b")
    tasks = plan("add", "Fix add", "check: grep -q 'return a + b' src/calc.py")
    p = project(tmp_path, worker, tasks, budgets={"attempts": 2, "same_failure": 1})
    before = p.head()
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 21, fail_message(proc)
    assert p.task_line("add").startswith("- [!]")
    assert p.git("diff", "--name-only", before, "HEAD", "--", "src").strip() == ""
    verify = p.docs("add", "verify")[-1]["verify"]
    suite = next(c for c in verify["checks"] if c["name"] == "suite")
    assert suite["judged"] == "per_test"
    assert suite["blocking_tests"] == ["tests/test_calc.py::test_mul"]
    assert "suite" in verify["required"]
    assert "test_mul" in proc.stderr  # lk-verify names what blocks


def test_a_fix_named_by_the_task_lands_though_another_tasks_test_still_fails(
    tmp_path: Path,
) -> None:
    p = project(tmp_path, calc_with(add="a + b"), plan("add", "Fix add so test_add passes"))
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    assert p.task_line("add").startswith("- [x]")
    verify = p.docs("add", "verify")[-1]["verify"]
    assert verify["known_failures"] == [
        {
            "name": "suite",
            "fingerprint": verify["checks"][0]["fingerprint"],
            "tests": ["tests/test_calc.py::test_div"],
        }
    ]


MOVES = """
bodies = {1: "a * b", 2: "a - b - 0", 3: "a + b"}
src = Path("src/calc.py").read_text()
lines = src.splitlines(keepends=True)
lines[1] = f"    return {bodies.get(n, 'a + b')}\\n"
if n == 3:
    lines[5] = "    return a + b\\n"  # fixes add, breaks mul: the failure moved
if n >= 4:
    lines[5] = "    return a * b\\n"
Path("src/calc.py").write_text("".join(lines))
"""


def test_the_same_failing_tests_are_no_progress_and_a_moved_failure_is_progress(
    tmp_path: Path,
) -> None:
    p = project(
        tmp_path, MOVES, plan("add", "Fix test_add"), budgets={"attempts": 6, "same_failure": 3}
    )
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    classes = [d["failure_class"] for d in p.decisions("add")]
    # 1: test_add fails; 2: other wrong values, the same failing test: no progress;
    # 3: test_add passes, test_mul broke: the failure moved (progress); 4: done.
    assert classes[1:] == ["no_progress", classes[0], None], classes
    assert classes[0] in ("verification_failure", "unsupported_completion")
    fps = [d["verify"]["fingerprint"] for d in p.docs("add", "verify")]
    assert fps[0] == fps[1] != fps[2] and fps[3] is None


def test_a_missing_tool_blocks_with_no_attempt_spent(tmp_path: Path) -> None:
    worker = calc_with(add="a + b")
    checks = [{"name": "suite", "run": "loopkit-no-such-runner -q", "timeout": 30}]
    p = project(tmp_path, worker, plan("add", "Fix add"), checks=checks, budgets={"attempts": 3})
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 21, fail_message(proc)
    assert p.worker_calls() == 1  # blocked at once: not retried into a park
    decision = p.decisions("add")[-1]
    assert (decision["outcome"], decision["failure_class"]) == ("blocked", "environment")
    assert "loopkit-no-such-runner" in decision["reason"]
    assert "is not installed" in decision["reason"]
    from loopkit.decision import budget

    h = budget.empty_history()
    for r in p.ledger():  # one task: its history is the whole ledger
        h = budget.fold(h, r)
    assert h["spent_attempts"] == 0


def test_the_handoff_puts_the_tasks_own_failure_first_and_marks_the_bases(
    tmp_path: Path,
) -> None:
    worker = "\nif n >= 2:\n    " + calc_with(add="a + b").strip() + "\n"
    p = project(tmp_path, worker, plan("add", "Fix test_add"))
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    text = p.handoff(2)
    mine = text.index("### Check `suite` failed")
    base = text.index("### Already failing before this task started")
    assert mine < base
    assert "- `tests/test_calc.py::test_add` (named by the task)" in text[mine:base]
    assert "`tests/test_calc.py::test_div`" in text[base:]
    assert "Done means these checks pass" not in text


def test_reproduce_fingerprints_as_later_rounds_and_costs_no_attempt(tmp_path: Path) -> None:
    # Round 0 fails on test_add (and test_div, another task's). The first attempt
    # fails on test_add alone among what it must fix: the same failure, no progress.
    worker = calc_with(add="a * b")
    p = project(
        tmp_path, worker, plan("add", "Fix test_add"), budgets={"attempts": 2, "same_failure": 5}
    )
    proc = p.run("phased-loop.sh", "--reproduce")
    decisions = p.decisions("add")
    assert [d["failure_class"] for d in decisions] == [
        "verification_failure",
        "no_progress",
        "budget",
    ], fail_message(proc)
    # budgets.attempts 2: the reproduction spent none of it, the worker ran twice.
    assert p.worker_calls() == 2
    # The reproduction's results are the base's: the attempt reused them, ran no base.
    logs = p.state() / "artifacts"
    assert not list(logs.glob("*/baseline/*.log"))


SLOW_FIX = """
(STATE / "worker-start").write_text(str(time.time()))
time.sleep(6)
src = Path("src/calc.py").read_text()
Path("src/calc.py").write_text(src.replace("return a - b  # the task's bug", "return a + b"))
(STATE / "worker-end").write_text(str(time.time()))
"""


def test_the_base_runs_beside_the_worker_once_and_is_not_run_again(tmp_path: Path) -> None:
    p = project(tmp_path, SLOW_FIX, plan("add", "Fix test_add"))
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    # The base's run leaves its log under the attempt's artifacts (baseline/): once for
    # the task, ended while the worker still worked; lk-verify used the sealed result.
    logs = list((p.state() / "artifacts").glob("*/baseline/*.log"))
    assert len(logs) == 1, logs
    start = float((p.scratch / "worker-start").read_text())
    end = float((p.scratch / "worker-end").read_text())
    assert start < logs[0].stat().st_mtime < end, (start, logs[0].stat().st_mtime, end)
    assert "the base's checks: 0 of 1 pass; ran beside the worker" in proc.stderr
    verify = p.docs("add", "verify")[-1]["verify"]
    assert verify["passed"] is True and verify["baseline"]["checks"][0]["passed"] is False


FORGER = """
import glob
# Waits for the base's results written beside it, then says every test failed there,
# so that breaking test_mul would read as a failure the base already had.
deadline = time.time() + 30
while time.time() < deadline and not glob.glob(".loopkit/baseline/*.json"):
    time.sleep(0.05)
time.sleep(0.3)
for f in glob.glob(".loopkit/baseline/*.json"):
    data = json.loads(Path(f).read_text())
    for c in data["checks"]:
        c["passed"] = False
        c["tests"] = {"source": "pytest", "failed_count": 3, "failed": [
            "tests/test_calc.py::test_add", "tests/test_calc.py::test_div",
            "tests/test_calc.py::test_mul"]}
    Path(f).write_text(json.dumps(data))
src = Path("src/calc.py").read_text()
src = src.replace("return a - b  # the task's bug", "return a + b")
Path("src/calc.py").write_text(src.replace("def mul(a, b):\\n    return a * b", "def mul(a, b):\\n    return a + b"))
"""


def test_a_worker_that_forges_the_base_results_written_beside_it_lands_nothing(
    tmp_path: Path,
) -> None:
    from tests.adversarial.helpers import nothing_unverified_landed

    p = project(
        tmp_path,
        FORGER,
        plan("add", "Fix test_add"),
        sandbox={"mode": "off"},
        budgets={"attempts": 1},
    )
    before = p.head()
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 21, fail_message(proc)
    assert p.git("diff", "--name-only", before, "HEAD", "--", "src").strip() == ""
    assert nothing_unverified_landed(p, before, tmp_path)
    decision = p.decisions("add")[-1]
    assert decision["failure_class"] in ("tampered", "verification_failure", "budget")
