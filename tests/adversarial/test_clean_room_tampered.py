"""A worker that writes into the clean room between two verifications: the sync after a
settled verification reads only what differs between the two trees (cleanroom.settle),
so a file the trees share is not looked at -- the hash after the checks must still catch
it, and nothing unverified lands."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

CHECK_PY = "import sys\nsys.exit(0 if open('src/value.txt').read() == 'good\\n' else 1)\n"

# Attempt 1 fails honestly (the room is settled after it). Attempt 2 leaves the same wrong
# value -- the same tree, so the sync reads nothing at all -- and rewrites the check in
# the clean room itself to pass.
WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("bad\\n")
if n == 2:
    done = []
    for check in Path({rooms!r}).glob("*/check.py"):
        try:
            check.write_text("raise SystemExit(0)\\n")
            done.append(str(check))
        except OSError as e:
            done.append(f"refused: {{e}}")
    (STATE / "tampered").write_text("\\n".join(done))
"""


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_a_check_rewritten_in_the_clean_room_never_passes(tmp_path: Path, mode: str) -> None:
    rooms = tmp_path / "rooms"
    p = make_project(
        tmp_path,
        WORKER.format(rooms=str(rooms)),
        sandbox={"mode": mode, "writable": [str(tmp_path / "worker")]},
        files={"check.py": CHECK_PY},
        checks=[{"name": "value", "run": "python3 check.py", "timeout": 30}],
        writable=["src/**"],
        budgets={"attempts": 2},
    )
    before = p.head()
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "fix-value", "--task",
                 "Fix", env={"LOOPKIT_CLEANROOM": str(rooms)})  # fmt: skip
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    tampered = (p.scratch / "tampered").read_text()
    verifies = [d["verify"] for d in p.docs("fix-value", "verify")]
    assert len(verifies) == 2 and not any(v["passed"] for v in verifies)
    if mode == "off":  # the write went through: the checks' hash saw it
        assert tampered.endswith("check.py") and not tampered.startswith("refused")
        assert verifies[1]["changed_by_checks"] == ["check.py"], verifies[1]
    else:  # the sandbox keeps the clean room out of reach: unseen, or read-only
        assert all(line.startswith("refused") for line in tampered.splitlines()), tampered
