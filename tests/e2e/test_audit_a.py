"""Audit of the published surface through the installed commands, as a user drives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopkit import schema

BIN = Path(sys.executable).parent


def _run(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / cmd[0]), *cmd[1:]], cwd=cwd, input=stdin, capture_output=True, text=True,
        env={**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}, check=False,
    )  # fmt: skip


def test_lk_cancel_prints_only_schema_valid_json(git_repo: Path) -> None:
    """stdout carries only schema-valid JSON: lk cancel's lines have a published schema."""
    seen = []
    for args, code in (
        (["--reason", "stop the night run"], 0),
        (["--status"], 0),
        (["--clear"], 0),
        (["--clear"], 1),
        (["--status"], 1),
    ):
        r = _run(["lk", "cancel", *args], git_repo)
        assert r.returncode == code, (args, r.stderr)
        doc = json.loads(r.stdout)
        schema.validate(doc, "cancel")
        seen.append(doc["requested"])
    assert seen == [True, True, False, False, False]
    assert "cancel" in _run(["lk", "schema", "--list"], git_repo).stdout.split()
