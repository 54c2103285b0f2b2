"""Secrets stay where they are: a check or a worker that prints the user's secrets leaves
no copy in what loopkit writes, and the checks never get them in the first place."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.recipes import BIN, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-value-that-must-not-leak-4242"

# The check prints every variable it got; the worker echoes the secret it was not given
# but was told about in its handoff... it can only echo what reaches it: print a guess.
LEAKY_CHECK = {
    "name": "leaky",
    "run": 'env | sort; echo "key=${AWS_SECRET_ACCESS_KEY:-unset}"; exit 1',
    "timeout": 30,
}


def test_a_check_never_gets_the_users_secrets(tmp_path: Path) -> None:
    p = make_project(tmp_path, "pass\n", checks=[LEAKY_CHECK])
    done = subprocess.run(
        [str(BIN / "lk-verify")],
        cwd=p.root,
        capture_output=True,
        text=True,
        env=recipe_env({"AWS_SECRET_ACCESS_KEY": SECRET}),
    )
    assert done.returncode == 1
    body = json.loads(done.stdout)
    assert "key=unset" in body["checks"][0]["output_tail"]
    log = (p.root / body["checks"][0]["log"]).read_text()
    assert SECRET not in log and "AWS_SECRET_ACCESS_KEY" not in log


ECHO_SECRET = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
print("the token is", (STATE / "secret.txt").read_text().strip())
"""


def test_a_secret_in_the_output_is_redacted_everywhere_loopkit_writes(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    check = {
        "name": "value",
        "run": f"cat {tmp_path}/secret.txt; grep -qx good src/value.txt",
        "timeout": 30,
    }
    p = make_project(tmp_path, ECHO_SECRET, checks=[check], budgets={"attempts": 2})
    (p.scratch / "secret.txt").write_text(SECRET + "\n")
    proc = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Fix",
        env={"DEPLOY_TOKEN": SECRET},
    )
    assert proc.returncode in (21, 22), fail_message(proc)
    state = p.root / ".loopkit"
    written = [state / "ledger.jsonl", p.root / "MEMORY.md"]
    written += list(state.glob("runs/**/*.json"))
    written += list(state.glob("artifacts/*/handoff.md"))
    assert len(written) > 4
    for path in written:
        assert SECRET not in path.read_text(), path
    assert "[redacted]" in (state / "ledger.jsonl").read_text()
    log = p.git("log", "--all", "-p")
    assert SECRET not in log
