"""What every adversarial test asks after a hostile worker ran through a recipe: whatever
landed on the branch passes its own checks in a fresh clone (verified = committed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.recipes import Project, recipe_env


def clone_passes_its_checks(p: Project, tmp: Path) -> bool:
    """Clone the branch and run every criterion of the committed loop.yaml there."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(p.root), str(clone)], check=True)
    contract = json.loads((clone / "loop.yaml").read_text())
    for check in contract["criteria"]:
        done = subprocess.run(
            check["run"], shell=True, cwd=clone, env=recipe_env(), capture_output=True, timeout=60
        )
        if done.returncode != 0:
            return False
    return True


#: Files a recipe commits for its own records (a park's retrospective, the checklist).
BOOKKEEPING = {"MEMORY.md", "TASKS.md"}


def nothing_unverified_landed(p: Project, before: str, tmp: Path) -> bool:
    """True when the branch holds no code change since ``before``, or when what it holds
    passes its own checks in a fresh clone."""
    changed = set(p.git("diff", "--name-only", before, "HEAD").split())
    return not (changed - BOOKKEEPING) or clone_passes_its_checks(p, tmp)


def loop(p: Project, *args: str, task: str = "fix-value"):
    return p.run("loop.sh", "--contract", "loop.yaml", "--task-id", task, "--task", "Fix", *args)
