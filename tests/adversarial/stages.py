"""One attempt through the real commands, stage by stage, as a loop pipes them:
lk-invoke (the command provider) | lk-diff | lk-verify | lk-decide."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.recipes import BIN, Project, recipe_env

STAGES = ("lk-invoke", "lk-diff", "lk-verify", "lk-decide")


def attempt(
    p: Project, *, task: str = "fix-value", start: str | None = None
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each stage's finished process, by command; a stage gets the last document printed."""
    doc = start or json.dumps(
        {
            "kind": "loopkit/attempt",
            "version": 1,
            "task": {"id": task, "text": "Fix", "kind": "task"},
        }
    )
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    for cmd in STAGES:
        done[cmd] = subprocess.run(
            [str(BIN / cmd), "--contract", "loop.yaml"],
            cwd=p.root,
            input=doc,
            capture_output=True,
            text=True,
            env=recipe_env(validate=True),
            timeout=120,
        )
        if done[cmd].stdout.strip():
            doc = done[cmd].stdout
    return done


def section(done: subprocess.CompletedProcess[str], name: str) -> dict:
    return json.loads(done.stdout)[name]


def rules(diff: dict) -> dict[str, set[str]]:
    """The diff's violations as {rule: {path, ...}}."""
    out: dict[str, set[str]] = {}
    for v in diff["violations"]:
        out.setdefault(v["rule"], set()).add(v["path"])
    return out


def marker(p: Project) -> Path:
    """Where a planted command leaves its trace (outside the repository)."""
    return p.scratch / "planted-code-ran"
