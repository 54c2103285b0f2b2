"""Helpers for the evidence tests (lk-diff, lk-verify, pre-commit) and the pipes that carry the
evidence on (lk-plan | lk-decide | lk-invoke | ...): contracts, runs, parsing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from click.testing import CliRunner

from loopkit import schema
from tests.helpers import git

BIN = Path(sys.executable).parent


def script(name: str) -> str:
    """The installed console script ``name`` (lk-diff, lk-verify, ...)."""
    path = BIN / name
    assert path.exists(), f"{name} is not installed in {BIN} (make install)"
    return str(path)


def write_contract(
    repo: Path,
    *,
    criteria: list[dict[str, Any]] | None = None,
    writable: list[str] | None = None,
    protected: list[str] | None = None,
    always_allowed: list[str] | None = None,
    budgets: dict[str, Any] | None = None,
    name: str = "loop.yaml",
    where: Path | None = None,
) -> Path:
    """A valid loop contract; written outside the work tree when ``where`` is given."""
    doc: dict[str, Any] = {
        "version": 1,
        "objective": "keep the evidence honest",
        "scope": {"writable": writable or ["**"]},
        "criteria": criteria or [{"name": "ok", "run": "true"}],
    }
    if protected is not None:
        doc["scope"]["protected"] = protected
    if always_allowed is not None:
        doc["scope"]["always_allowed"] = always_allowed
    if budgets:
        doc["budgets"] = budgets
    path = (where or repo) / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(
    name: str,
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run an installed command; stdin is /dev/null unless text is given."""
    full_env = dict(os.environ)
    full_env["PATH"] = f"{BIN}{os.pathsep}{full_env.get('PATH', '')}"
    if env:
        full_env.update(env)
    return subprocess.run(
        [script(name), *args],
        cwd=cwd,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def lk_run(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run an installed command as a user drives it, every document it prints checked
    against its schema (LOOPKIT_VALIDATE_OUTPUT=1)."""
    return subprocess.run(
        [str(BIN / cmd[0]), *cmd[1:]], cwd=cwd, input=stdin, capture_output=True, text=True,
        env={**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}, check=False,
    )  # fmt: skip


def notes_project(repo: Path, worker: str, *, wall_seconds: int, check_timeout: int) -> None:
    """A committed loop.yaml (the command ``worker``, one check) and TASKS.md (one task,
    ``notes``): the worker is done when notes/a.txt exists."""
    (repo / "loop.yaml").write_text(
        'version: 1\nobjective: Write notes.\nscope: {writable: ["notes/**"]}\n'
        f'criteria: [{{name: notes, run: "test -f notes/a.txt", timeout: {check_timeout}}}]\n'
        f"budgets: {{attempts: 3, wall_seconds: {wall_seconds}}}\n"
        f'worker: {{provider: command, command: "{worker}", timeout: 60}}\n'
        f'sandbox: {{writable: ["{repo.parent}"]}}\n'
    )
    (repo / "TASKS.md").write_text(
        "- [ ] Write notes {#notes}\n  budget: 5 lines / 1 file\n  scope: notes/a.txt\n  end\n"
    )
    git(repo, "add", "loop.yaml", "TASKS.md")
    git(repo, "commit", "-qm", "contract and plan")


def one_json(stdout: str, schema_name: str | None = None) -> dict[str, Any]:
    """The single JSON line a command printed, validated against its schema."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one JSON line, got {len(lines)}: {stdout[:500]!r}"
    doc = json.loads(lines[0])
    assert isinstance(doc, dict)
    name = schema_name or str(doc.get("kind", "")).removeprefix("loopkit/")
    schema.validate(doc, name, source="<test>")
    return doc


def by_path(diff: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in diff["files"]}


def rules(diff: dict[str, Any]) -> set[tuple[str, str]]:
    return {(v["rule"], v["path"]) for v in diff["violations"]}


def attempt(**sections: Any) -> str:
    """A piped attempt document as text."""
    doc: dict[str, Any] = {"kind": "loopkit/attempt", "version": 1}
    doc.update(sections)
    return json.dumps(doc)


def cli(
    command: click.Command, *args: str, stdin: str | None = None
) -> tuple[int, dict[str, Any] | None, str]:
    """Run a command through CliRunner: exit code, the JSON it printed (or None), stderr."""
    result = CliRunner().invoke(command, list(args), input=stdin)
    doc = json.loads(result.stdout) if result.stdout.strip() else None
    return result.exit_code, doc, result.stderr


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except FileNotFoundError:
        return False
