"""Failure fingerprints with pytest as the real check, across clones in different places."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import git
from tests.helpers.evidence import one_json, run, write_contract

CALC = "def add(a, b):\n    return a - b\n"
TEST = """\
import os, time

from calc import add


def test_add():
    # noise that differs per run and per place: paths, times, addresses, pids
    print("tmp", os.getcwd(), time.time(), hex(id(object())), os.getpid())
    assert add(2, 2) == 4
"""


@pytest.fixture(params=["per-test", "output"])
def origin(git_repo: Path, request: pytest.FixtureRequest) -> Path:
    # pytest's short summary names each failing test: per-test results, and the
    # fingerprint is the set of failing test ids. With -rN it names none: the output's.
    summary = " -rN" if request.param == "output" else ""
    (git_repo / "calc.py").write_text(CALC)
    (git_repo / "test_calc.py").write_text(TEST)
    (git_repo / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    write_contract(
        git_repo,
        criteria=[
            {
                "name": "pytest",
                "run": f"{sys.executable} -m pytest -q -p no:randomly{summary} test_calc.py",
                "timeout": 120,
                "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            }
        ],
    )
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "calc with a bug")
    return git_repo


def _fingerprint(repo: Path) -> tuple[str, str]:
    done = run("lk-verify", cwd=repo, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    v = one_json(done.stdout)
    (check,) = v["checks"]
    assert "assert" in check["output_tail"]
    return check["fingerprint"], v["fingerprint"]


def test_same_failure_same_fingerprint_in_two_clones_and_runs(origin: Path, tmp_path: Path) -> None:
    one = tmp_path / "a" / "first-clone"
    two = tmp_path / "somewhere" / "else" / "entirely" / "second"
    git(tmp_path, "clone", "-q", str(origin), str(one))
    git(tmp_path, "clone", "-q", str(origin), str(two))
    fp_one = _fingerprint(one)
    assert _fingerprint(two) == fp_one
    assert _fingerprint(one) == fp_one  # another run, another pid, another time

    # Another wrong result: per test the same test fails, the same failure; read from
    # the output, a different one ...
    (two / "calc.py").write_text("def add(a, b):\n    return a * b + 1\n")
    fp_other = _fingerprint(two)
    per_test = "-rN" not in (origin / "loop.yaml").read_text()
    assert (fp_other == fp_one) is per_test
    # The same bug surfacing in another test is another failure (per test: another id;
    # -rN leaves no line naming the test among the lines the output's fingerprint reads).
    (one / "test_calc.py").write_text(TEST.replace("def test_add", "def test_sum"))
    assert (_fingerprint(one)[0] != fp_one[0]) is per_test
