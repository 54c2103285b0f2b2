"""A carried path (an ignored dependency the checks see) that the worker can write -- no
sandbox, or one that makes it writable -- is fingerprinted before the worker runs; a
rewrite that keeps its size and sets its mtime back is still seen (its change time moved),
and the verification fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# The runner the check uses lives in the ignored tools/ folder; the worker makes it pass
# whatever it is given, keeping its size and mtime.
PATCH_RUNNER = """
import os
runner = Path("tools/runner.sh")
st = os.stat(runner)
old = runner.read_bytes()
new = b"exit 0 # " + b"x" * (len(old) - len(b"exit 0 # ") - 1) + b"\\n"
assert len(new) == len(old)
runner.write_bytes(new)
os.utime(runner, ns=(st.st_atime_ns, st.st_mtime_ns))
"""

RUNNER = "grep -qx good src/value.txt || exit 1 # a runner of some length, padded out\n"


@pytest.mark.parametrize(
    "sandbox",
    [{"mode": "off"}, {"writable": ["tools"]}],
    ids=["no-sandbox", "made-writable"],
)
def test_a_runner_rewritten_with_its_size_and_mtime_kept_is_caught(
    tmp_path: Path, sandbox: dict
) -> None:
    if "writable" in sandbox:
        sandbox = {"writable": [*sandbox["writable"], str(tmp_path / "worker")]}
    p = make_project(
        tmp_path,
        PATCH_RUNNER,
        files={"src/value.txt": "bad\n"},
        gitignore="tools/\n",
        checks=[{"name": "value", "run": "sh tools/runner.sh", "timeout": 30}],
        writable=["src/**"],
        budgets={"attempts": 2},
        verify={"carry": ["tools"]},
        sandbox=sandbox,
    )
    (p.root / "tools").mkdir()
    (p.root / "tools/runner.sh").write_text(RUNNER)
    before = p.head()
    proc = loop(p)
    assert (p.root / "tools/runner.sh").read_text().startswith("exit 0")  # the attack ran
    assert proc.returncode != 0, fail_message(proc)
    assert p.head() == before or nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["carry_changed"] == ["tools"] and verify["passed"] is False
