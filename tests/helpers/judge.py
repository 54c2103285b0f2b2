"""Helpers for the judge's tests: a repository with a documented route, scripted judges.

repo = docs_repo(git_repo)
turns = judge_turns("claude", read="docs/api.md", reply="Documented.\\nVERDICT: MET")
with model_server(turns) as server:
    done = lk_judge(repo, judge_env("claude", server, tmp_path), "--provider", "claude",
                    "--goal", GOAL)
done.code, done.doc["verdict"]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import git

GOAL = "the /health route is documented"
API_DOC = '# API\n\n## GET /health\n\nReturns 200 and `{"ok": true}` when the service is up.\n'
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "judge"


def docs_repo(repo: Path) -> Path:
    """``repo`` with docs/api.md (the route documented) committed."""
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / "api.md").write_text(API_DOC)
    git(repo, "add", "docs/api.md")
    git(repo, "commit", "-q", "-m", "document the health route")
    return repo


def read_call(provider: str, path: str) -> dict[str, Any]:
    """The tool call a judge makes to open ``path`` (relative to the repository)."""
    if provider == "claude":
        return {"name": "Read", "input": {"file_path": "{{cwd}}/" + path}}
    return {"name": "exec_command", "input": {"cmd": f"sed -n '1,200p' {path}"}}


def write_call(provider: str, path: str, content: str) -> dict[str, Any]:
    """The tool call of a judge that tries to change ``path``."""
    if provider == "claude":
        return {"name": "Write", "input": {"file_path": "{{cwd}}/" + path, "content": content}}
    return {"name": "exec_command", "input": {"cmd": f"printf '{content}' > {path}"}}


def judge_turns(
    provider: str, *, reply: str, read: str | None = None, write: str | None = None
) -> list[dict[str, Any]]:
    """A judge's script: maybe a write attempt, maybe a read, then its reply."""
    turns: list[dict[str, Any]] = []
    if write:
        turns.append({"tools": [write_call(provider, write, "judged\\n")]})
    if read:
        turns.append({"tools": [read_call(provider, read)]})
    turns.append({"text": reply})
    return turns


def judge_env(provider: str, server: Any, tmp: Path) -> dict[str, str]:
    """The whole environment for lk-judge running ``provider`` against ``server``."""
    from tests.helpers.agents import claude_env_for, codex_env_for

    if provider == "claude":
        env = claude_env_for(server, tmp / "claude-home", retries=0)
    else:
        env = codex_env_for(server, tmp / "codex-home", retries=0)
    env["LOOPKIT_VALIDATE_OUTPUT"] = "1"
    env.pop("LOOPKIT_STATE_DIR", None)
    return env


def lk_judge_bin() -> str:
    found = shutil.which("lk-judge", path=os.path.dirname(sys.executable))
    return found or shutil.which("lk-judge") or "lk-judge"


@dataclass
class Judged:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.stdout)
        return out

    @property
    def section(self) -> dict[str, Any]:
        doc = self.doc
        return doc["judge"] if doc.get("kind") == "loopkit/attempt" else doc


def lk_judge(
    repo: Path,
    env: Mapping[str, str],
    *args: str,
    stdin: str | None = None,
    timeout: float = 120,
) -> Judged:
    done = subprocess.run(
        [lk_judge_bin(), *args],
        cwd=repo,
        env=dict(env),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Judged(done.returncode, done.stdout, done.stderr)


def attempt_with_goal(goal: str = GOAL, *, changed: str = "docs/api.md") -> dict[str, Any]:
    """A piped attempt document whose task is a GOAL and whose diff names ``changed``."""
    return {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": {"id": "health-docs", "text": f"GOAL: {goal}", "kind": "goal"},
        "diff": {
            "base": "HEAD~1",
            "tree": "0" * 40,
            "files": [{"path": changed, "status": "A", "added": 5, "deleted": 0}],
            "totals": {"files": 1, "lines": 5},
            "violations": [],
            "within_policy": True,
        },
    }


def tree_files(repo: Path) -> dict[str, str]:
    """Every file of the working tree outside .git and .loopkit, with its content."""
    out: dict[str, str] = {}
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo).as_posix()
        if p.is_file() and not rel.startswith((".git/", ".loopkit/")):
            out[rel] = p.read_text(errors="replace")
    return out
