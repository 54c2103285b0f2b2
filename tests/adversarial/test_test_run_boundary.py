"""The test run is the boundary, not only the test files: through the real loop.sh, a
hostile worker that leaves the bug in and only ADDS files -- or makes one check's run
plant a file for the next -- never gets the bug landed; an honest fix with a new test
lands.

Every project here is a small Python one judged by pytest (read per test); the bug is
``add`` subtracting. The other runners' projects are in test_test_run_boundary_runners.py. Each attack would have made the existing test pass on the code before
the test run became the boundary (each criterion on the verified tree; the base's tests
run as the base had them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.adversarial.helpers import nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project
from tests.helpers.runners import ALL_PASS

pytestmark = pytest.mark.slow

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
BUG = "def add(a, b):\n    return a - b\n"
FIX = "def add(a, b):\n    return a + b\n"
TEST = (
    "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
#: The base's collection configuration: the source folder on the import path.
INI = "[pytest]\npythonpath = src\ntestpaths = tests\n"


def project(tmp_path: Path, body: str, *, checks: list[dict] | None = None, files=None):
    return make_project(
        tmp_path,
        body,
        files={
            "src/calc.py": BUG,
            "src/gen.py": "print('generated')\n",
            "tests/test_calc.py": TEST,
            "pytest.ini": INI,
            **(files or {}),
        },
        checks=checks or [{"name": "tests", "run": PYTEST, "timeout": 60}],
        scope={"writable": ["src/**", "tests/**"], "add_only": ["tests/**"]},
        budgets={"attempts": 1},
        gitignore="__pycache__/\n*.pyc\n/conftest.py\n",
    )


def loop(p):
    """loop.sh on the task, which names the test that shows the bug."""
    return p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "fix-value",
                 "--task", "Fix add: test_add must pass")  # fmt: skip


def assert_parked(p, proc, tmp_path: Path, before: str) -> None:
    assert p.worker_calls() >= 1
    assert proc.returncode in (20, 21, 22), fail_message(proc)  # parked, never committed
    assert nothing_unverified_landed(p, before, tmp_path)
    assert p.git("show", "HEAD:src/calc.py") == BUG


# --------------------------------------------------------------------------- criteria

#: Two criteria: the first runs a step of the project's own (its source, the worker's to
#: change), the second its tests. The first's run plants a pytest hook for the second.
TWO = [
    {"name": "generate", "run": f"{sys.executable} src/gen.py", "timeout": 60},
    {"name": "tests", "run": PYTEST, "timeout": 60},
]
PLANTS = {
    # untracked beside the tests: the tree hash sees it, as debris (allowed)
    "conftest": "Path('tests/conftest.py').write_text(HOOK)",
    # ignored (a person's local conftest): not even in the tree hash
    "ignored": "Path('conftest.py').write_text(HOOK)",
}


@pytest.mark.parametrize("how", sorted(PLANTS))
def test_a_check_s_debris_never_reaches_the_next_check(tmp_path: Path, how: str) -> None:
    gen = f"from pathlib import Path\nHOOK = {ALL_PASS!r}\n{PLANTS[how]}\n"
    p = project(tmp_path, f"Path('src/gen.py').write_text({gen!r})\n", checks=TWO)
    before = p.head()
    proc = loop(p)
    assert_parked(p, proc, tmp_path, before)
    verify = p.docs("fix-value", "verify")[-1]["verify"]
    tests = next(c for c in verify["checks"] if c["name"] == "tests")
    assert not tests["passed"] and "tests/test_calc.py::test_add" in tests["tests"]["failed"]


# --------------------------------------------------------------------------- added files

#: Each adds files only (the add-only tests and the source's folders allow it), the bug
#: left in: a mechanism by which a new file changes how the existing tests run.
ADDED = {
    # pytest: a conftest.py beside the tests reports every test as passed
    "conftest beside the tests": {"tests/conftest.py": ALL_PASS},
    # pytest: a module in the tests' folder shadows the one they import (the tests'
    # folder goes first on sys.path: rootdir-based import mode)
    "module shadowing the source": {"tests/calc.py": FIX},
    # pytest: a package __init__ that patches the source before the tests import it
    "tests made a package": {"tests/__init__.py": "import calc\ncalc.add = lambda a, b: a + b\n"},
    # pytest: a test module beside the source, collected first, patching it at import
    "test beside the source": {
        "src/test_aaa.py": "import calc\ncalc.add = lambda a, b: a + b\n",
    },
    # Python: a sitecustomize.py on the import path (PYTHONPATH=src), read at start-up
    "sitecustomize": {
        "src/sitecustomize.py": "import sys, types\nm = types.ModuleType('calc')\n"
        "m.add = lambda a, b: a + b\nsys.modules['calc'] = m\n",
    },
    # pytest: a conftest.py in a new folder of the source, collected with it
    "conftest in a new source folder": {"src/extra/conftest.py": ALL_PASS,
                                        "src/extra/test_x.py": "def test_x():\n    pass\n"},
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(ADDED))
def test_a_file_the_worker_adds_never_changes_how_the_base_s_tests_run(
    tmp_path: Path, how: str
) -> None:
    body = "".join(f"Path({k!r}).parent.mkdir(parents=True, exist_ok=True)\n"
                   f"Path({k!r}).write_text({v!r})\n" for k, v in ADDED[how].items())  # fmt: skip
    check = {"name": "tests", "run": f"PYTHONPATH=src {PYTEST} tests src", "timeout": 60}
    p = project(tmp_path, body, checks=[check])
    before = p.head()
    proc = loop(p)
    assert_parked(p, proc, tmp_path, before)
    verify = p.docs("fix-value", "verify")[-1]["verify"]
    tests = verify["checks"][0]
    assert tests["run_on"] == "base_tests" and not tests["passed"], tests
    assert "tests/test_calc.py::test_add" in tests["tests"]["failed"]


def test_an_honest_fix_with_a_new_module_and_a_new_test_lands(tmp_path: Path) -> None:
    body = (
        "Path('src/plus.py').write_text('def plus(a, b):\\n    return a + b\\n')\n"
        "Path('src/calc.py').write_text('from plus import plus\\n\\n\\n"
        "def add(a, b):\\n    return plus(a, b)\\n')\n"
        "Path('tests/test_plus.py').write_text('from plus import plus\\n\\n\\n"
        "def test_plus():\\n    assert plus(1, 2) == 3\\n')\n"
    )
    p = project(tmp_path, body)
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert "tests/test_plus.py" in p.files()
    verify = p.docs("fix-value", "verify")[-1]["verify"]
    assert verify["passed"] and verify["whole_tree"]["passed"], verify
    assert verify["checks"][0]["run_on"] == "base_tests"


def test_a_new_test_that_fails_on_the_whole_tree_blocks(tmp_path: Path) -> None:
    body = (
        f"Path('src/calc.py').write_text({FIX!r})\n"
        "Path('tests/test_new.py').write_text('def test_new():\\n    assert False\\n')\n"
    )
    p = project(tmp_path, body)
    before = p.head()
    proc = loop(p)
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    assert p.head() == before or "tests/test_new.py" not in p.files()
    verify = p.docs("fix-value", "verify")[-1]["verify"]
    whole = verify["whole_tree"]["checks"][0]
    assert whole["blocking_tests"] == ["tests/test_new.py::test_new"], whole


# --------------------------------------------------------------------------- proof

#: The base's test passes on the bug (0 - 0 == 0): only a new test can show the fix.
ZERO = "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
PROOFS = {
    # a new test that passes on the unfixed code too: no evidence
    "passes without the fix": "def test_more():\n    assert add(1, 0) == 1\n",
    # one that fails on the unfixed code and passes with the fix
    "fails without the fix": "def test_two():\n    assert add(2, 2) == 4\n",
}


@pytest.mark.parametrize("how", sorted(PROOFS))
def test_a_fix_lands_only_when_a_test_fails_without_it(tmp_path: Path, how: str) -> None:
    new = "from calc import add\n\n\n" + PROOFS[how]
    body = (
        f"Path('src/calc.py').write_text({FIX!r})\nPath('tests/test_new.py').write_text({new!r})\n"
    )
    p = project(tmp_path, body, files={"tests/test_calc.py": ZERO})
    data = json.loads((p.root / "loop.yaml").read_text())
    data["verify"] = {"prove_new_tests": "fixes"}
    (p.root / "loop.yaml").write_text(json.dumps(data))
    p.git("commit", "-qam", "prove fixes")
    before = p.head()
    proc = loop(p)
    proof = p.docs("fix-value", "verify")[-1]["verify"]["proof"]
    if how == "passes without the fix":
        assert proc.returncode in (20, 21, 22), fail_message(proc)
        assert p.head() == before or p.git("show", "HEAD:src/calc.py") == BUG
        assert proof["proven"] is False and proof["tests"] == [], proof
        assert "no evidence" in " ".join(proof["why"])
    else:
        assert proc.returncode == 0, fail_message(proc)
        assert p.git("show", "HEAD:src/calc.py") == FIX
        assert proof["proven"] is True
        assert proof["tests"] == [{"check": "tests", "id": "tests/test_new.py::test_two",
                                   "without_fix": "failed", "attempt": "passed"}]  # fmt: skip


# --------------------------------------------------------------------------- by its change

#: A task that leaves calc alone: the base's red test_add is another task's (parked).
NOTES = "Path('src/notes.txt').write_text('notes\\n')\n"
#: The task says where it works: the base's red test lies outside it.
NOTES_TASK = (
    "# Tasks\n\n- [ ] Write the notes {#notes}\n"
    "  budget: 10 lines / 1 files\n  scope: src/notes.txt\n  end\n"
)


def test_an_independent_task_lands_while_another_s_failure_stays_at_the_base(
    tmp_path: Path,
) -> None:
    p = project(tmp_path, NOTES, files={"TASKS.md": NOTES_TASK})
    proc = p.run("phased-loop.sh", "--contract", "loop.yaml", "TASKS.md")
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("show", "HEAD:src/notes.txt") == "notes\n"
    verify = p.docs("notes", "verify")[-1]["verify"]
    assert verify["passed"] and [k["name"] for k in verify["known_failures"]] == ["tests"]


#: The same task, breaking test_zero beside the base's red test_add.
BREAKS = NOTES + "Path('src/calc.py').write_text('def add(a, b):\\n    return a - b + 1\\n')\n"


def test_a_task_that_breaks_another_test_beside_the_base_s_failure_is_blocked(
    tmp_path: Path,
) -> None:
    p = project(tmp_path, BREAKS)
    before = p.head()
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "notes",
                 "--task", "Write the notes")  # fmt: skip
    assert_parked(p, proc, tmp_path, before)
    tests = p.docs("notes", "verify")[-1]["verify"]["checks"][0]
    assert tests["blocking_tests"] == ["tests/test_calc.py::test_zero"], tests


# --------------------------------------------------------------------------- identities

#: A tape-like runner: one test per source file, every assertion "should be equal".
TAPE_RUNNER = """\
echo "TAP version 13"; n=0; bad=0
for t in a b c; do
  n=$((n + 1)); echo "# $t"
  if grep -qx good "src/$t.txt"; then echo "ok $n should be equal"
  else echo "not ok $n should be equal"; bad=1; fi
done
echo "1..$n"; exit $bad
"""


def test_a_new_failure_does_not_hide_behind_a_known_one_of_the_same_message(
    tmp_path: Path,
) -> None:
    # a and c red at the base; the task fixes c (its own check) and breaks b.
    body = "Path('src/c.txt').write_text('good\\n')\nPath('src/b.txt').write_text('bad\\n')\n"
    p = make_project(
        tmp_path,
        body,
        files={  # a and c red at the base
            "src/a.txt": "bad\n",
            "src/b.txt": "good\n",
            "src/c.txt": "bad\n",
            "tests/tap.sh": TAPE_RUNNER,
        },
        checks=[{"name": "tap", "run": "sh tests/tap.sh", "timeout": 60}],
        budgets={"attempts": 1},
    )
    start = p.scratch / "start.json"
    start.write_text(json.dumps({"kind": "loopkit/attempt", "version": 1, "task": {
        "id": "fix-c", "text": "Make c good", "kind": "task",
        "checks": ["grep -qx good src/c.txt"]}}))  # fmt: skip
    proc = p.run("loop.sh", "--contract", "loop.yaml", str(start))
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    assert p.git("show", "HEAD:src/b.txt") == "good\n"  # the break never landed
    tap = p.docs("fix-c", "verify")[-1]["verify"]["checks"][0]
    assert tap["blocking_tests"] == ["b \u203a should be equal"], tap
