"""Ignored files the checks would load: they are outside the evidence (the tree hash) but
inside an in-place test run. The checks run in a clean room holding exactly the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox: what loopkit detects must hold on its own.
OFF = {"mode": "off"}

TEST = "from src.calc import f\n\n\ndef test_f():\n    assert f() == 1\n"
FILES = {
    "src/__init__.py": "",
    "src/calc.py": "def f():\n    return 0\n",
    "tests/test_calc.py": TEST,
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
}
PYTEST = {"name": "tests", "run": "python -m pytest -q -p no:cacheprovider tests", "timeout": 60}

# Broken code, and a conftest.py that reports every failing test as passed, hidden from
# git through .git/info/exclude (so it is in no diff and no tree hash).
CONFTEST = '''
Path("src/calc.py").write_text("def f():\\n    return 2\\n")
Path("conftest.py").write_text("""
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
""")
with open(".git/info/exclude", "a") as f:
    f.write("conftest.py\\n")
'''


def test_an_ignored_conftest_cannot_turn_a_failure_into_a_pass(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        CONFTEST,
        sandbox=OFF,
        files=FILES,
        checks=[PYTEST],
        writable=["src/**"],
        budgets={"attempts": 2},
    )
    before = p.head()
    proc = loop(p)
    assert (p.root / "conftest.py").exists() or p.worker_calls() >= 1  # the attack ran
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["clean_room"] is True and verify["passed"] is False


# A correct module is imported (its .pyc cached), then broken with the same size and the
# old mtime: Python trusts the stale, correct bytecode in place. __pycache__ is ignored.
STALE_PYC = """
import os, py_compile
good = "def f():\\n    return 1\\n"
bad = "def f():\\n    return 7\\n"
Path("src/calc.py").write_text(good)
st = os.stat("src/calc.py")
py_compile.compile("src/calc.py", cfile=None, doraise=True)
Path("src/calc.py").write_text(bad)
os.utime("src/calc.py", ns=(st.st_atime_ns, st.st_mtime_ns))
"""


def test_a_stale_pyc_beside_broken_source_does_not_pass(tmp_path: Path) -> None:
    check = {
        "name": "calc",
        "run": "python -c 'from src.calc import f; assert f() == 1'",
        "timeout": 30,
    }
    p = make_project(
        tmp_path,
        STALE_PYC,
        sandbox=OFF,
        files=FILES,
        checks=[check],
        writable=["src/**"],
        budgets={"attempts": 2},
    )
    before = p.head()
    proc = loop(p)
    assert list((p.root / "src").glob("__pycache__/calc*.pyc")) or p.worker_calls() >= 1
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)


# The test the worker wrote passes, then rewrites in-scope code at exit: in place, the
# tree the checks leave is not the tree they ran on, and the recipe would commit it.
ATEXIT = '''
Path("src/calc.py").write_text("def f():\\n    return 1\\n")
Path("tests/test_late.py").write_text("""
import atexit
from pathlib import Path

def _sabotage():
    Path("src/calc.py").write_text("def f():\\\\n    return 9\\\\n")

atexit.register(_sabotage)

def test_nothing():
    pass
""")
'''


def test_a_check_that_rewrites_the_code_after_passing_blocks_completion(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        ATEXIT,
        sandbox=OFF,
        files=FILES,
        checks=[PYTEST],
        writable=["src/**", "tests/**"],
        budgets={"attempts": 2},
    )
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert "src/calc.py" in verify["changed_by_checks"] and verify["passed"] is False


# A carried, ignored folder (a vendored package the checks import) patched by the worker.
PATCH_VENDOR = """
Path("vendor/helper.py").write_text("def answer():\\n    return 1\\n")
"""


def test_a_carried_folder_patched_by_the_worker_fails_verification(tmp_path: Path) -> None:
    check = {
        "name": "calc",
        "run": "PYTHONPATH=vendor python -c 'import helper; assert helper.answer() == 1'",
        "timeout": 30,
    }
    files = {**FILES, ".gitignore": "vendor/\n__pycache__/\n"}
    p = make_project(
        tmp_path,
        PATCH_VENDOR,
        sandbox=OFF,
        files=files,
        checks=[check],
        writable=["src/**"],
        budgets={"attempts": 1},
        verify={"carry": ["vendor/"]},
    )
    (p.root / "vendor").mkdir()
    (p.root / "vendor/helper.py").write_text("def answer():\n    return 0\n")
    before = p.head()
    proc = loop(p)
    assert (p.root / "vendor/helper.py").read_text().endswith("return 0\n") or p.worker_calls()
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["carry_changed"] == ["vendor"] and verify["passed"] is False
    # the carried folder was there for the check: it failed on its content, not its absence
    assert "ModuleNotFoundError" not in verify["checks"][0]["output_tail"]
