"""Worker code planted where git runs it (reproduction 3, the recipe's side): a pre-commit
hook that rewrites the green commit, hooks on every ref update and checkout, an fsmonitor
command, and a filter driver (`[filter "x"] clean = ...` in .git/config with `* filter=x`
in .git/info/attributes) that `git add -A` -- the recipe's save of an attempt -- would run.
None of them may run inside the recipe's own git calls, and what lands must be what was
verified. (loopkit's own commands neutralise their git calls separately; the planted
programs log who ran them, so this test tells the two apart.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: Without a sandbox (in one, .git is read-only to the worker and nothing it starts
#: outlives it): what the recipe does must hold on its own.
OFF = {"mode": "off"}

# Each planted program logs its name and who ran it: the first of its ancestors that is
# the recipe (loop.sh) or one of loopkit's commands (lk-*, lk workspace).
WHO = r"""
who=other p=$PPID
while [ "${p:-1}" -gt 1 ]; do
    case $(ps -o args= -p "$p") in
    */bin/lk-* | */bin/lk\ *) who=loopkit; break ;;
    *loop.sh*) who=recipe; break ;;
    esac
    p=$(ps -o ppid= -p "$p" | tr -d ' ')
done
"""

PLANT = """
import os, stat, subprocess
log = STATE / "planted.log"
def plant(path, body):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\\n" + WHO + f'echo "{path.name} $who" >> {log}\\n' + body)
    path.chmod(0o755)
    return str(path.resolve())
for hook in ("post-commit", "reference-transaction", "post-checkout", "post-index-change"):
    plant(f".git/hooks/{hook}", "exit 0\\n")
plant(".git/hooks/pre-commit", "echo bad > src/value.txt\\ngit add src/value.txt\\n")
monitor = plant(str(STATE / "fsmonitor"), "exit 1\\n")
flt = plant(str(STATE / "filter"), "cat\\n")
subprocess.run(["git", "config", "core.fsmonitor", monitor], check=True)
subprocess.run(["git", "config", "filter.x.clean", flt], check=True)
subprocess.run(["git", "config", "filter.x.smudge", flt], check=True)
Path(".git/info").mkdir(exist_ok=True)
Path(".git/info/attributes").write_text("* filter=x\\n")
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text(VALUE)
sys.exit(CODE)
"""


def _ran_in_the_recipe(p) -> list[str]:
    log = p.scratch / "planted.log"
    lines = log.read_text().splitlines() if log.exists() else []
    assert not [line for line in lines if line.endswith(" other")], lines  # all accounted for
    return [line for line in lines if line.endswith(" recipe")]


@pytest.mark.parametrize(("value", "code"), [("good\n", 0), ("bad\n", 3)], ids=["green", "red"])
def test_nothing_planted_runs_in_the_recipes_git(tmp_path: Path, value: str, code: int) -> None:
    p = make_project(
        tmp_path,
        "WHO = "
        + repr(WHO)
        + "\n"
        + PLANT.replace("VALUE", repr(value)).replace("CODE", str(code)),
        budgets={"attempts": 1},
        sandbox=OFF,
    )
    before = p.head()
    proc = loop(p)
    assert p.worker_calls() >= 1, fail_message(proc)
    assert proc.returncode in (0, 21, 22), fail_message(proc)
    assert _ran_in_the_recipe(p) == [], fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    if proc.returncode == 0:
        assert p.git("show", "HEAD:src/value.txt") == "good\n"
