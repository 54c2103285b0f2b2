"""Helpers for the recipe tests: a small project in a real git repository, a worker that is
a Python script (the ``command`` provider), and the recipes run as subprocesses.

The worker script is written outside the repository (so it is never part of a diff). It
counts its own calls, keeps every handoff it was given, and then runs the test's body
with ``n`` (this call's number), ``task`` (LOOPKIT_TASK_ID), ``handoff`` (the text on
stdin) and ``Path`` in scope, in the repository as its working directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES = REPO_ROOT / "recipes"
BIN = Path(sys.executable).parent

_PREAMBLE = """\
import json, os, sys, time
from pathlib import Path
STATE = Path({state!r})
STATE.mkdir(parents=True, exist_ok=True)
_calls = STATE / "calls"
n = int(_calls.read_text()) + 1 if _calls.exists() else 1
_calls.write_text(str(n))
handoff = sys.stdin.read()
(STATE / f"handoff-{{n}}.md").write_text(handoff)
task = os.environ.get("LOOPKIT_TASK_ID", "")
with open(STATE / "log", "a") as _f:
    _f.write(f"{{n}} {{task}} attempt={{os.environ.get('LOOPKIT_ATTEMPT', '')}} resume={{os.environ.get('LOOPKIT_RESUME', '')}}\\n")
"""


def recipe_env(extra: dict[str, str] | None = None, *, validate: bool = False) -> dict[str, str]:
    """The test's environment with the venv's console scripts first on PATH.

    Output validation (LOOPKIT_VALIDATE_OUTPUT) costs about a second per command; each
    command's own tests validate its output, so the recipe tests switch it off except
    where a test asks for it (``validate=True``): inputs are validated by every command
    on every run anyway.
    """
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["LOOPKIT_VALIDATE_OUTPUT"] = "1" if validate else "0"
    env.pop("LOOPKIT_STATE_DIR", None)
    env.pop("RESET_PATHS", None)
    env.update(extra or {})
    if str(BIN) not in env["PATH"].split(os.pathsep):
        env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return env


def git(repo: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=check, capture_output=True, text=True
    ).stdout


@dataclass
class Project:
    root: Path  # the repository
    scratch: Path  # the worker's own state, outside the repository

    def run(
        self,
        recipe: str,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
        validate: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        return self.execute(
            [str(RECIPES / recipe), *args], env=env, timeout=timeout, cwd=cwd, validate=validate
        )

    def execute(
        self,
        cmd: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
        validate: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run CMD in the project (stdin closed, output captured, the recipe environment)."""
        return subprocess.run(
            cmd,
            cwd=cwd or self.root,
            env=recipe_env(env, validate=validate),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.root, *args, check=check)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def files(self, ref: str = "HEAD") -> set[str]:
        return set(self.git("ls-tree", "-r", "--name-only", ref).split())

    def all_committed_paths(self) -> set[str]:
        """Every path any commit on any ref ever held."""
        out = self.git("log", "--all", "--name-only", "--pretty=format:")
        return {line for line in out.splitlines() if line.strip()}

    def loopkit_refs(self) -> list[str]:
        out = self.git("for-each-ref", "--format=%(refname)", "refs/loopkit/")
        return out.split()

    def state(self) -> Path:
        return self.root / ".loopkit"

    def lock(self) -> Path:
        """The work tree's one-loop lock (lk task begin): in its git folder, whatever the
        state folder."""
        return self.root / ".git" / "loopkit" / "loop.lock"

    def run_dirs(self, task: str) -> list[Path]:
        base = self.state() / "runs" / task
        return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def docs(self, task: str, stage: str) -> list[dict[str, Any]]:
        """Every document of one stage (admit, invoke, diff, verify, judge, decide) of the
        task's runs, in round order."""
        out = []
        for run in self.run_dirs(task):
            rounds = sorted(run.glob(f"*-{stage}.json"), key=lambda p: int(p.name.split("-")[0]))
            for p in rounds:
                text = p.read_text().strip()
                if text:
                    out.append(json.loads(text.splitlines()[-1]))
        return out

    def decisions(self, task: str) -> list[dict[str, Any]]:
        return [d["decision"] for d in self.docs(task, "decide")]

    def worker_calls(self) -> int:
        p = self.scratch / "calls"
        return int(p.read_text()) if p.exists() else 0

    def handoff(self, n: int) -> str:
        return (self.scratch / f"handoff-{n}.md").read_text()

    def ledger(self) -> list[dict[str, Any]]:
        p = self.state() / "ledger.jsonl"
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    def task_line(self, task_id: str, tasks: str = "TASKS.md") -> str:
        for line in (self.root / tasks).read_text().splitlines():
            if f"{{#{task_id}}}" in line:
                return line
        raise AssertionError(f"no line for {task_id} in {tasks}")


def write_worker(scratch: Path, body: str, *, name: str = "worker.py") -> str:
    """A worker script; returns the shell command that runs it."""
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / name
    path.write_text(_PREAMBLE.format(state=str(scratch)) + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def contract(
    worker_command: str,
    *,
    checks: list[dict[str, Any]] | None = None,
    writable: list[str] | None = None,
    budgets: dict[str, Any] | None = None,
    memory: str | None = "MEMORY.md",
    **extra: Any,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "objective": "Make src/value.txt say good.",
        "scope": {"writable": writable or ["src/**", "data/**", "tests/**"]},
        "criteria": checks
        or [{"name": "value", "run": "grep -qx good src/value.txt", "timeout": 30}],
        "budgets": {"attempts": 4, "same_failure": 2, **(budgets or {})},
        "worker": {"provider": "command", "command": worker_command, "timeout": 60},
    }
    if memory:
        data["memory"] = memory
    data.update(extra)
    return data


def make_project(
    tmp_path: Path,
    worker_body: str,
    *,
    tasks: str | None = None,
    files: dict[str, str] | None = None,
    gitignore: str = "",
    **contract_kw: Any,
) -> Project:
    """A repository on main holding loop.yaml, MEMORY.md, optionally TASKS.md and files,
    all committed; the worker script lives in ``tmp_path/worker``."""
    root = tmp_path / "repo"
    root.mkdir()
    scratch = tmp_path / "worker"
    command = write_worker(scratch, worker_body)
    # The worker keeps its own notes outside the repository: writable in its sandbox.
    contract_kw.setdefault("sandbox", {"writable": [str(scratch)]})
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# project\n")
    (root / "loop.yaml").write_text(json.dumps(contract(command, **contract_kw), indent=2) + "\n")
    if contract_kw.get("memory", "MEMORY.md"):
        (root / str(contract_kw.get("memory", "MEMORY.md"))).write_text("# Memory\n")
    if tasks is not None:
        (root / "TASKS.md").write_text(textwrap.dedent(tasks))
    if gitignore:
        (root / ".gitignore").write_text(gitignore)
    for rel, text in (files or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return Project(root=root, scratch=scratch)


def start_doc(project: Project, task_id: str, text: str, *, kind: str = "task") -> Path:
    """An attempt document holding one task, outside the repository."""
    path = project.scratch / f"start-{task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "kind": "loopkit/attempt",
                "version": 1,
                "task": {"id": task_id, "text": text, "kind": kind},
            }
        )
    )
    return path


def fail_message(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"


_USER_COMMITS = """
import glob, os, subprocess, sys, time
root, pattern, message = sys.argv[1:4]
deadline = time.time() + 120
while time.time() < deadline:
    if any(os.path.getsize(f) for f in glob.glob(os.path.join(root, pattern))):
        subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
                        "--allow-empty", "-m", message], cwd=root, check=True)
        break
    time.sleep(0.005)
"""


def user_commits_during(
    p: Project, *, task: str = "*", stage: str = "diff", message: str = "the user's commit"
) -> subprocess.Popen[bytes]:
    """A person committing on the branch while the loop runs: as soon as the first ``stage``
    document of ``task`` is written (by default lk-diff's, so the checks are still to run),
    an empty commit lands on the branch -- the tree on disk stays what the checks see. Wait
    on (or kill) the returned process."""
    pattern = os.path.join(".loopkit", "runs", task, "*", f"*-{stage}.json")
    return subprocess.Popen([sys.executable, "-c", _USER_COMMITS, str(p.root), pattern, message])
