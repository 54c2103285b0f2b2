"""Helpers for the merge queue's tests: attempts run for real (``lk attempt``) in worktrees
of a project made by ``tests.helpers.recipes.make_project``, queued with ``lk queue add``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers.recipes import Project, recipe_env


def lk(
    p: Project, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["lk", *args],
        cwd=cwd or p.root,
        env=recipe_env(env, validate=True),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def attempt(
    p: Project, task: str, *, base: str | None = None, previous: Path | None = None, n: int = 1
) -> Path:
    """One whole attempt at ``task`` in a fresh worktree from ``base`` (default: HEAD); its
    decided document. ``previous``: the document the attempt reads as its previous one."""
    base = base or p.head()
    wt = p.root.parent / f"wt-{task}-{n}"
    p.git("worktree", "add", "-q", "--detach", str(wt), base)
    start = p.scratch / f"start-{task}-{n}.json"
    if previous is None:
        start.write_text(
            json.dumps(
                {
                    "kind": "loopkit/attempt",
                    "version": 1,
                    "task": {"id": task, "text": f"do {task}", "kind": "task"},
                }
            )
        )
    else:
        start = previous
    keep = p.scratch / f"p-{task}-{n}"
    done = subprocess.run(
        [
            "lk",
            "attempt",
            "--keep",
            str(keep),
            "--contract",
            str(p.root / "loop.yaml"),
            "--base",
            base,
        ],
        cwd=wt,
        env=recipe_env({"LOOPKIT_STATE_DIR": str(p.root / ".loopkit")}),
        stdin=start.open("rb"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    decided = Path(f"{keep}-decide.json")
    assert decided.is_file(), done.stderr
    return decided


def doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text().strip().splitlines()[-1])


def out(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
