"""`lk <stage>` through the lk console script runs that stage, as `lk-<stage>` does: a
plain `lk verify` once ran a whole attempt instead (and refused, nothing piped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import git


def test_lk_verify_is_lk_dash_verify(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "t.py").write_text("assert False\n")
    git(git_repo, "add", "t.py")
    git(git_repo, "commit", "-q", "-m", "a failing check")
    contract = tmp_path / "loop.json"
    contract.write_text(
        json.dumps(
            {
                "version": 1,
                "objective": "x",
                "scope": {"writable": ["**"]},
                "criteria": [{"name": "t", "run": f"{sys.executable} t.py", "timeout": 30}],
            }
        )
    )
    lk = Path(sys.executable).parent / "lk"
    done = subprocess.run(
        [str(lk), "verify", "--contract", str(contract)],
        cwd=git_repo,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"},
    )
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    assert body["kind"] == "loopkit/verify" and body["passed"] is False
    assert "lk attempt" not in done.stderr
