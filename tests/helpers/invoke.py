"""Helpers for lk-invoke tests: a contract, the installed console script, its JSON output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from loopkit import schema
from tests.helpers.agents import agent_bin, env_for, model_server

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def lk_invoke_bin() -> str:
    found = shutil.which("lk-invoke") or str(Path(sys.executable).parent / "lk-invoke")
    return found


def write_contract(path: Path, *, worker: Mapping[str, Any], **extra: Any) -> Path:
    data: dict[str, Any] = {
        "version": 1,
        "objective": "Create hello.py that prints hello.",
        "scope": {"writable": ["hello.py", "src/**"]},
        "criteria": [{"name": "runs", "run": "python3 hello.py", "timeout": 30}],
        "worker": dict(worker),
    }
    data.update(extra)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Invoked:
    returncode: int
    stdout: str
    stderr: str
    doc: dict[str, Any]

    @property
    def run(self) -> dict[str, Any]:
        return self.doc["run"] if self.doc.get("kind") == "loopkit/attempt" else self.doc


def lk_invoke(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> Invoked:
    """Run the installed lk-invoke; parse and schema-check its one JSON line."""
    full = dict(env if env is not None else os.environ)
    full["LOOPKIT_VALIDATE_OUTPUT"] = "1"
    done = subprocess.run(
        [lk_invoke_bin(), *args],
        cwd=cwd,
        env=full,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    doc: dict[str, Any] = {}
    if done.stdout.strip():
        lines = done.stdout.strip().splitlines()
        assert len(lines) == 1, done.stdout
        doc = json.loads(lines[0])
        name = "attempt" if doc.get("kind") == "loopkit/attempt" else "run"
        if "argv" not in doc:
            schema.validate(doc, name)
    return Invoked(done.returncode, done.stdout, done.stderr, doc)


def pids_with(marker: str) -> list[int]:
    """Live processes whose command line or environment mentions ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.split(")")[-1].split()[0] != "Z":
                found.append(int(entry.name))
    return found


def invoke_agent(
    name: str,
    repo: Path,
    tmp: Path,
    turns: Any,
    *,
    worker: Mapping[str, Any] | None = None,
    args: Sequence[str] = (),
    retries: int | None = 0,
    server: Any = None,
    home: str = "person",
    timeout: int | None = None,
) -> Invoked:
    """``lk-invoke`` with the real CLI of the provider ``name`` against ``server`` (or a
    scripted server for ``turns``): the person's home at ``tmp/home``
    (its rehearsal written there), loopkit's private homes under ``tmp/homes`` (codex's
    beside loopkit's own: it lays out its helpers only outside the temporary folder), the
    run's own ``--timeout`` when given."""
    agent_bin(name)
    contract = write_contract(tmp / "loop.yaml", worker={"provider": name, **(worker or {})})
    argv = ["--contract", str(contract), *(["--timeout", str(timeout)] if timeout else []), *args]

    def go(s: Any) -> Invoked:
        env = env_for(name, s, tmp / home, retries=retries)
        if name not in ("claude", "codex"):
            env["LOOPKIT_HOMES"] = str(tmp / "homes")
        return lk_invoke(argv, cwd=repo, env=env, timeout=180)

    if server is not None:
        return go(server)
    with model_server(turns) as s:
        return go(s)


def tree_status(repo: Path) -> list[str]:
    """Every changed or new file of the work tree, ignored ones included, but loopkit's
    own state folder."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(
        p for p in (line[3:] for line in out.splitlines()) if not p.startswith(".loopkit/")
    )
