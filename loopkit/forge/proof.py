"""A commit's exact tree verified: lk-verify runs the contract's checks in a detached
worktree at that commit (nothing else on disk), and its evidence must name that tree."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from loopkit import git, proc
from loopkit.errors import EnvironmentProblem

if TYPE_CHECKING:
    from loopkit.sections import Verify, VerifySummary


def console(name: str) -> list[str]:
    """The argv of loopkit's console script ``name`` (``lk``, ``lk-verify``): the one
    beside this Python, else on PATH, else its door through this Python."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return [str(beside)]
    found = shutil.which(name)
    if found:
        return [found]
    door = "main" if name == "lk" else name.removeprefix("lk-")
    return [sys.executable, "-c", f"from loopkit.cli.door import {door}; {door}()"]


def verify(root: Path, commit: str, *, contract: Path, timeout_s: float = 3600) -> Verify:
    """lk-verify's section for ``commit``'s tree: ``passed``, ``tree``, ``checks``."""
    if not contract.is_file():
        raise EnvironmentProblem(f"{contract}: no loop contract to verify a slice with")
    want = git.out(["rev-parse", f"{commit}^{{tree}}"], cwd=root)
    holder = Path(tempfile.mkdtemp(prefix="lk-stack-"))
    room = holder / "tree"
    try:
        git.out(["worktree", "add", "-q", "--detach", str(room), commit], cwd=root)
        done = proc.capture(
            [*console("lk-verify"), "--contract", str(contract), "--in-place"],
            cwd=room,
            env={**os.environ, "LOOPKIT_STATE_DIR": str(holder / "state")},
            timeout=timeout_s,
        )
        text = done.stdout.decode("utf-8", "replace")
        section: Verify | None = None
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                try:
                    got = json.loads(line)
                except ValueError:
                    continue
                section = got.get("verify", got) if isinstance(got, dict) else None
                break
        if section is None or done.exit_code not in (0, 1):
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            tail = said[-1:] or [f"exit {done.exit_code}"]
            raise EnvironmentProblem(f"lk-verify on {commit[:12]} gave no verdict: {tail[0]}")
        if section.get("tree") != want:
            section["passed"] = False
            section["problems"] = [*section.get("problems", []), "evidence for another tree"]
        return section
    finally:
        git.git(["worktree", "remove", "--force", str(room)], cwd=root, check=False)
        git.git(["worktree", "prune"], cwd=root, check=False)
        shutil.rmtree(holder, ignore_errors=True)


def summary(section: Verify) -> VerifySummary:
    """What a pull request's body shows of a verification."""
    return {
        "tree": section.get("tree"),
        "passed": bool(section.get("passed")),
        "checks": [
            {
                "name": c.get("name"),
                "passed": bool(c.get("passed")),
                "duration_s": c.get("duration_s"),
            }
            for c in section.get("checks") or []
        ],
    }
