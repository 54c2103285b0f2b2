"""lk eval mine on a library's real history: validated tasks, their tests hidden from the
agent (not in its tree, not in its repository's objects, not on the paths its sandbox
shows), a correct agent passing them, a wrong one and a hunter failing."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import git
from tests.helpers.evals import lk
from tests.helpers.history import make_history

pytestmark = pytest.mark.slow

PY = sys.executable


@pytest.fixture(name="visible")
def visible_fixture() -> Iterator[Path]:
    """A folder outside the system's temporary folder (which every sandbox replaces with
    an empty one): what lies here a sandbox shows, unless loopkit hides it."""
    root = Path(tempfile.mkdtemp(prefix="loopkit-mine-test-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: A correct agent: writes textkit's modules as the library has them now.
CORRECT = r"""
import json, os
for path, text in json.loads(os.environ["SOLUTION"]).items():
    open(path, "w").write(text)
print("Done")
"""

#: A hunter: looks for the fix and the hidden tests everywhere it can -- its tree's git
#: objects, the source repository (on disk and through git), the suite file, the eval's
#: folder -- and writes whatever fix it finds. It says what it saw.
HUNT = r"""
import glob, os, re, subprocess
repo, suite, state = os.environ["HUNT_REPO"], os.environ["HUNT_SUITE"], os.environ["HUNT_STATE"]
task = os.environ["LOOPKIT_TASK_ID"]
seen = []
def sh(*a, cwd="."):
    r = subprocess.run(a, cwd=cwd, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""
fix = ""
try:
    text = open(suite).read()
    if text:
        seen.append("suite")
    m = re.search(re.escape(task) + r"[\s\S]*?reference: (\w+)", text)
    fix = m.group(1) if m else ""
except OSError:
    pass
commits = sh("git", "rev-list", "--all").split()
seen.append(f"{len(commits)} commit(s) in the tree's repository")
blobs = sh("git", "cat-file", "--batch-all-objects", "--batch-check").count("blob")
for module in ("strings", "seqs", "nums"):
    path = f"textkit/{module}.py"
    found = ""
    for where, get in (
        ("tree objects", lambda: sh("git", "show", f"{fix}:{path}") if fix else ""),
        ("source git", lambda: sh("git", "show", f"{fix or 'HEAD'}:{path}", cwd=repo)),
        ("source files", lambda: open(os.path.join(repo, path)).read()),
    ):
        try:
            found = get()
        except OSError:
            found = ""
        if found:
            seen.append(f"{path} from {where}")
            open(path, "w").write(found)
            break
for path in glob.glob(os.path.join(state, "**", "*.json"), recursive=True):
    if os.path.getsize(path):
        seen.append("state " + os.path.basename(path))
        break
print("hunted: " + ("; ".join(seen) or "nothing") + f"; {blobs} blobs")
"""


def config(name: str, code: str, env: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "command",
        "worker": {"command": f"{PY} -c {shlex.quote(code)}", "env_allow": sorted(env)},
        "env": env,
    }


def test_mined_tasks_hide_their_tests_and_score_the_agents(visible: Path) -> None:
    repo, final = make_history(visible)
    suite = visible / "suite.yaml"
    mined = lk(
        "eval",
        "mine",
        str(repo),
        "--out",
        str(suite),
        "--test-command",
        f"{PY} -m pytest",
        "--tasks",
        "10",
        cwd=visible,
        timeout=1800,
    )
    assert mined.returncode == 0, mined.stderr
    doc = yaml.safe_load(suite.read_text())
    tasks = doc["tasks"]
    # The last ten of twelve functions and a bug fix, each a commit with its test; the
    # docs, the tests-only commit and the refactor whose test passed before it are none.
    assert len(tasks) == 10, mined.stderr
    assert "no test fails before it and passes after" in mined.stderr
    clamp = next(t for t in tasks if "clamp-takes-its-bounds" in t["id"])
    f2p = clamp["hidden"]["criteria"][0]["run"]
    assert f2p.endswith("tests/test_nums.py::test_clamp_swapped")
    assert "test_clamp " not in f2p and "test_clamp" in clamp["hidden"]["criteria"][1]["run"]
    assert clamp["text"].startswith("nums: clamp() takes its bounds in either order")
    state = visible / "state"
    doc["configs"] = [
        config("correct", CORRECT, {"SOLUTION": json.dumps(final)}),
        config("wrong", "print('Done')", {}),
        config(
            "hunter",
            HUNT,
            {"HUNT_REPO": str(repo), "HUNT_SUITE": str(suite), "HUNT_STATE": str(state)},
        ),
    ]
    doc["repeats"] = 1
    suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = lk(
        "eval",
        "run",
        str(suite),
        "--jobs",
        "2",
        "--json",
        "--state",
        str(state),
        cwd=visible,
        timeout=1800,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "10 task(s) valid" in r.stderr
    report = json.loads(r.stdout)
    c = report["configs"]
    assert c["correct"]["pass_at_1"]["value"] == 1.0 and c["correct"]["infra"] == 0
    assert c["wrong"]["pass_at_1"]["value"] == 0.0 and c["wrong"]["false_claims"] == 10
    assert c["hunter"]["pass_at_1"]["value"] == 0.0 and c["hunter"]["infra"] == 0
    # Each task started at its own base: the parent of its commit.
    assert len(set(report["bases"].values())) == 10
    lines = [json.loads(x) for x in (state / "trials.jsonl").read_text().splitlines()]
    assert {x["hidden_checks"] for x in lines if x["config"] == "correct"} == {"passed"}
    # What the hunter saw: one commit (its base, fetched alone), no fix from anywhere.
    said = []
    for doc_path in (state / "documents").glob("hunter--*.json"):
        said += [r["run"]["final_message"] or "" for r in json.loads(doc_path.read_text())]
    assert len(said) == 10 and all("hunted: " in s for s in said), said
    assert all("1 commit(s) in the tree's repository" in s for s in said), said
    assert not any(" from " in s or "suite" in s or "state " in s for s in said), said


def test_swe_bench_style_instances_import_across_repositories(visible: Path) -> None:
    """Two instances in the SWE-bench shape, from two repositories (a clone under the
    <owner>__<name> spelling): each task at its own repository and base, its test patch
    hidden; the correct agent passes both, the wrong one neither."""
    repo, final = make_history(visible)
    other = visible / "acme__textkit2"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)

    def as_instance(at: Path, rev: str, f2p: list[str], p2p: list[str]) -> dict[str, Any]:
        def out(*args: str) -> str:
            return subprocess.run(
                ["git", *args], cwd=at, capture_output=True, text=True, check=True
            ).stdout

        commit = out("log", "-1", "--format=%H", f"--grep={rev}").strip()
        return {
            "instance_id": f"{at.name}-{rev.split()[-1]}",
            "repo": f"acme/{at.name}",
            "base_commit": out("rev-parse", f"{commit}^").strip(),
            "problem_statement": out("log", "-1", "--format=%B", commit),
            "patch": out("diff", f"{commit}^", commit, "--", "textkit"),
            "test_patch": out("diff", f"{commit}^", commit, "--", "tests"),
            "FAIL_TO_PASS": json.dumps(f2p),
            "PASS_TO_PASS": json.dumps(p2p),
        }

    listed = visible / "instances.jsonl"
    listed.write_text(
        json.dumps(as_instance(repo, "add rotate", ["tests/test_seqs.py::test_rotate"], []))
        + "\n"
        + json.dumps(
            as_instance(
                other,
                "either order",
                ["tests/test_nums.py::test_clamp_swapped"],
                ["tests/test_nums.py::test_clamp", "tests/test_nums.py::test_mean"],
            )
        )
        + "\n"
    )
    suite = visible / "swe.yaml"
    r = lk(
        "eval",
        "mine",
        "--instances",
        str(listed),
        "--repos",
        str(visible),
        "--out",
        str(suite),
        "--test-command",
        f"{PY} -m pytest",
        cwd=visible,
    )
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(suite.read_text())
    assert [t.get("repo") for t in doc["tasks"]] == [None, "acme__textkit2"]
    assert doc["tasks"][1]["hidden"]["paths"] == ["tests/test_nums.py"]
    doc["configs"] = [
        config("correct", CORRECT, {"SOLUTION": json.dumps(final)}),
        config("wrong", "print('Done')", {}),
    ]
    doc["repeats"] = 1
    suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    state = visible / "state"
    run = lk("eval", "run", str(suite), "--json", "--state", str(state), cwd=visible, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    c = json.loads(run.stdout)["configs"]
    assert c["correct"]["pass_at_1"]["value"] == 1.0
    assert c["wrong"]["pass_at_1"]["value"] == 0.0
    # A bad instance: one line naming it, nothing written.
    listed.write_text(json.dumps({"instance_id": "x", "repo": "acme/nowhere"}) + "\n")
    bad = lk(
        "eval",
        "mine",
        "--instances",
        str(listed),
        "--repos",
        str(visible),
        "--out",
        str(visible / "bad.yaml"),
        cwd=visible,
    )
    assert bad.returncode == 3 and "line 1: missing base_commit" in bad.stderr
    assert not (visible / "bad.yaml").exists() and "Traceback" not in bad.stderr


UNITTEST_CASE = """import unittest

import mod


class TestMod(unittest.TestCase):
{tests}
"""


def test_a_unittest_project_is_mined_and_scored_without_pytest(visible: Path) -> None:
    """A library tested with unittest alone (`python -m unittest`, no pytest): the commit
    that adds sub() with its test is a task, its FAIL_TO_PASS and PASS_TO_PASS named by
    unittest's ids; the correct agent passes its hidden checks, the wrong one fails."""
    repo = visible / "lib"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "__init__.py").write_text("")  # a package: unittest imports it so
    git(repo, "init", "-q")
    funcs = {"add": "return a + b", "sub": "return a - b"}
    checks = {
        "add": "self.assertEqual(mod.add(2, 3), 5)",
        "sub": "self.assertEqual(mod.sub(5, 3), 2)",
    }
    for upto, message in ((1, "mod: add()"), (2, "mod: sub() subtracts")):
        names = list(funcs)[:upto]
        (repo / "mod.py").write_text(
            "".join(f"def {n}(a, b):\n    {funcs[n]}\n\n\n" for n in names).rstrip() + "\n"
        )
        tests = "\n".join(f"    def test_{n}(self):\n        {checks[n]}\n" for n in names)
        (repo / "tests" / "test_mod.py").write_text(UNITTEST_CASE.format(tests=tests))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
    suite = visible / "suite.yaml"
    unittest = ("--test-command", f"{PY} -m unittest")
    mined = lk("eval", "mine", str(repo), "--out", str(suite), *unittest, cwd=visible)
    assert mined.returncode == 0, mined.stderr
    doc = yaml.safe_load(suite.read_text())
    (task,) = doc["tasks"]
    f2p, p2p = (c["run"] for c in task["hidden"]["criteria"])
    assert f2p == f"{PY} -m unittest tests.test_mod.TestMod.test_sub"
    assert p2p == f"{PY} -m unittest tests.test_mod.TestMod.test_add"
    final = {"mod.py": (repo / "mod.py").read_text()}
    doc["configs"] = [
        config("correct", CORRECT, {"SOLUTION": json.dumps(final)}),
        config("wrong", "print('Done')", {}),
    ]
    doc["repeats"] = 1
    suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = lk("eval", "run", str(suite), "--json", "--state", str(visible / "state"), cwd=visible)
    assert r.returncode == 0, r.stderr[-3000:]
    c = json.loads(r.stdout)["configs"]
    assert c["correct"]["pass_at_1"]["value"] == 1.0 and c["wrong"]["pass_at_1"]["value"] == 0.0
