"""The worker writes into .git what would run its code inside loopkit's own git calls --
hooks, core.fsmonitor, filter drivers (directly, through include.path, named so that
``-c`` cannot reach them), an external diff, a textconv -- or what would steer the
verdict: info/exclude hiding a file, a contract cache entry. None of the planted commands
may run while loopkit's commands run, and every change is a violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.adversarial.stages import attempt, marker, rules, section
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only): what loopkit detects must hold on its own.
OFF = {"mode": "off"}

GOOD = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""

# Every planted command leaves its name in MARK. A filter passes its input through, so
# a run of it changes nothing but the mark; a hook does nothing else.
PLANT = (
    GOOD
    + """
MARK = STATE / "planted-code-ran"
def script(name, body):
    path = STATE / name
    path.write_text("#!/bin/sh\\necho " + name + ' "$@" >> ' + str(MARK) + "\\n" + body)
    path.chmod(0o755)
    return str(path)
hook = script("hook", "exit 0\\n")
filt = script("filter", "exec cat\\n")
textconv = script("textconv", 'exec cat "$1"\\n')
for name in ("pre-commit", "post-commit", "post-index-change", "post-checkout",
             "reference-transaction", "pre-auto-gc", "post-rewrite"):
    Path(".git/hooks", name).write_text(Path(hook).read_text())
    Path(".git/hooks", name).chmod(0o755)
(STATE / "included.cfg").write_text(f'[filter "inc"]\\n\\tclean = {filt}\\n\\tsmudge = {filt}\\n')
with open(".git/config", "a") as f:
    f.write(f'''[core]
\\tfsmonitor = {hook}
[filter "x"]
\\tclean = {filt}
\\tsmudge = {filt}
[filter "a=b"]
\\tclean = {filt}
\\tsmudge = {filt}
[filter "proc"]
\\tprocess = {filt}
\\trequired = true
[diff "t"]
\\ttextconv = {textconv}
[diff]
\\texternal = {hook}
[include]
\\tpath = {STATE / "included.cfg"}
''')
Path(".git/info").mkdir(exist_ok=True)
Path(".git/info/attributes").write_text(
    "*.txt filter=x diff=t\\n*.md filter=inc\\n*.yaml filter=proc\\n*.py filter=a=b\\n"
)
Path("src/extra.py").write_text("X = 1\\n")
"""
)


def test_planted_hooks_filters_and_fsmonitor_never_run_in_loopkit(tmp_path: Path) -> None:
    p = make_project(tmp_path, PLANT, sandbox=OFF)
    done = attempt(p)
    assert p.worker_calls() == 1
    ran = marker(p).read_text() if marker(p).exists() else ""
    assert ran == "", f"planted code ran inside loopkit's git calls:\n{ran}"
    assert done["lk-invoke"].returncode == 0, done["lk-invoke"].stderr
    assert done["lk-diff"].returncode == 1, done["lk-diff"].stderr
    diff = section(done["lk-diff"], "diff")
    changed = rules(diff).get("git_control_changed", set())
    assert {".git/config", ".git/info/attributes", ".git/hooks/pre-commit"} <= changed, diff
    assert ".git/hooks/post-index-change" in changed
    # The checks themselves pass (the value is good): the verdict comes from the diff.
    assert done["lk-verify"].returncode == 0, done["lk-verify"].stderr
    assert done["lk-decide"].returncode != 0
    assert section(done["lk-decide"], "decision")["outcome"] != "complete"


# A pre-commit hook that rewrites the green commit: the value turns bad on its way in.
REWRITING_HOOK = (
    GOOD
    + """
hook = Path(".git/hooks/pre-commit")
hook.write_text("#!/bin/sh\\necho hook >> " + str(STATE / "planted-code-ran") +
                "\\necho bad > src/value.txt && git add src/value.txt\\n")
hook.chmod(0o755)
"""
)


def test_a_planted_pre_commit_hook_never_gets_a_green_attempt_committed(tmp_path: Path) -> None:
    p = make_project(tmp_path, REWRITING_HOOK, sandbox=OFF, budgets={"attempts": 2})
    before = p.head()
    proc = loop(p)
    assert p.worker_calls() >= 1
    assert proc.returncode != 0, fail_message(proc)
    assert not marker(p).exists(), marker(p).read_text()
    assert nothing_unverified_landed(p, before, tmp_path)
    assert p.git("show", "HEAD:src/value.txt", check=False).strip() != "bad"
    # A retry does not take the first attempt's hook for the new normal.
    for doc in p.docs("fix-value", "diff"):
        assert ".git/hooks/pre-commit" in rules(doc["diff"]).get("git_control_changed", set())
    assert "complete" not in [d["outcome"] for d in p.decisions("fix-value")]


# The conftest.py of reproduction 1, hidden from git through .git/info/exclude.
HIDE_CONFTEST = (
    GOOD
    + """
Path("conftest.py").write_text("import pytest\\n")
with open(".git/info/exclude", "a") as f:
    f.write("conftest.py\\n")
"""
)


def test_a_worker_line_in_info_exclude_is_a_violation(tmp_path: Path) -> None:
    p = make_project(tmp_path, HIDE_CONFTEST, sandbox=OFF)
    done = attempt(p)
    diff = section(done["lk-diff"], "diff")
    assert rules(diff).get("git_control_changed") == {".git/info/exclude"}, diff["violations"]
    assert done["lk-decide"].returncode != 0


def test_loopkits_own_exclude_line_is_not_the_workers(tmp_path: Path) -> None:
    # loopkit adds the state folder's line to info/exclude before it records .git: an
    # honest attempt stays within policy and is complete.
    p = make_project(tmp_path, GOOD)
    assert not (p.root / ".loopkit").exists()
    done = attempt(p)
    assert "/.loopkit/" in (p.root / ".git/info/exclude").read_text().splitlines()
    run = section(done["lk-invoke"], "run")
    assert run["git_control"]["changed"] == []
    assert ".git/info/exclude" in run["git_control"]["paths"]
    diff = section(done["lk-diff"], "diff")
    assert diff["violations"] == [] and diff["within_policy"] is True
    assert done["lk-decide"].returncode == 0, done["lk-decide"].stdout


# A checked contract planted in loopkit's cache under .git, whatever its name.
PLANT_CACHE = (
    GOOD
    + """
import json
Path(".git/loopkit/cache").mkdir(parents=True, exist_ok=True)
data = json.loads(Path("loop.yaml").read_text())
data["criteria"] = [{"name": "value", "run": "true"}]
Path(".git/loopkit/cache/contract-planted.json").write_text(json.dumps(data))
"""
)


def test_a_planted_contract_cache_entry_is_a_violation(tmp_path: Path) -> None:
    p = make_project(tmp_path, PLANT_CACHE, sandbox=OFF)
    done = attempt(p)
    # lk-invoke empties the cache after the worker: what was planted is still reported.
    assert not (p.root / ".git/loopkit/cache/contract-planted.json").exists()
    run = section(done["lk-invoke"], "run")
    assert ".git/loopkit/cache/contract-planted.json" in run["git_control"]["changed"]
    diff = section(done["lk-diff"], "diff")
    assert rules(diff).get("git_control_changed") == {".git/loopkit/cache/contract-planted.json"}
    assert done["lk-decide"].returncode != 0
    assert json.loads(done["lk-decide"].stdout)["decision"]["outcome"] != "complete"
