"""File names that are not UTF-8. Git takes any bytes but a newline-free NUL-free name;
JSON text and macOS or Windows checkouts do not. A worker that adds such a name (attempt
1) must get a scope violation it can act on, never an internal error (exit 70) in lk-diff,
lk-verify, lk-decide, the ledger, the save of the attempt's tree or the park; a
repository that already holds one (a person's old file) must still loop, check and
commit. The checks list the names, so their output and logs carry the bytes too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
bad = os.fsencode("src/") + b"caf\\xe9.txt"
if n == 1 or FOREVER:
    open(bad, "wb").write(b"x\\n")
else:  # told why, it takes the file away and does the work
    os.remove(bad)
    Path("src/value.txt").write_text("good\\n")
"""

CHECKS = [{"name": "value", "run": "ls src; grep -qx good src/value.txt", "timeout": 30}]


def _project(tmp_path: Path, forever: bool):
    p = make_project(
        tmp_path,
        WORKER.replace("FOREVER", str(forever)),
        files={"src/value.txt": "bad\n"},
        checks=CHECKS,
        budgets={"attempts": 3, "same_failure": 1},
    )
    old = os.fsencode(p.root / "src") + b"/ol\xe9.txt"  # the person's own, committed
    with open(old, "wb") as f:
        f.write(b"old\n")
    p.git("add", "-A")
    p.git("commit", "-q", "-m", "a name in latin-1")
    return p


def test_a_name_that_is_not_utf8_is_a_violation_then_the_fix_lands(tmp_path: Path) -> None:
    p = _project(tmp_path, forever=False)
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert "internal error" not in proc.stderr, proc.stderr
    first = p.docs("fix-value", "diff")[0]["diff"]
    assert [v["rule"] for v in first["violations"]] == ["path_not_utf8"], first["violations"]
    assert first["violations"][0]["path"] == "src/caf\\xe9.txt"
    assert [f["path"] for f in first["files"]] == ["src/caf\\xe9.txt"]
    assert "path_not_utf8" in p.handoff(2)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    names = p.git("ls-tree", "-r", "--name-only", "HEAD")  # git quotes the odd bytes
    assert "caf" not in names and '"src/ol\\351.txt"' in names
    assert p.ledger(), "no ledger"


def test_a_worker_that_keeps_the_name_is_parked_without_a_crash(tmp_path: Path) -> None:
    p = _project(tmp_path, forever=True)
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 21, fail_message(proc)
    assert "internal error" not in proc.stderr, proc.stderr
    assert p.git("diff", "--name-only", before, "HEAD").split() in ([], ["MEMORY.md"])
    saved = p.loopkit_refs()
    assert saved, "the attempt's tree was not saved"
    held = p.git("ls-tree", "-r", "--name-only", saved[-1])
    assert "caf" in held  # the saved tree holds the file, byte for byte (quoted by git)
    assert not [f for f in os.listdir(os.fsencode(p.root / "src")) if b"caf" in f]


def test_a_check_that_leaves_such_a_name_is_no_internal_error(tmp_path: Path) -> None:
    """The check writes debris named in latin-1 where it runs: lk-verify lists it."""
    debris = "touch \"src/d$(printf '\\351')bris\"; grep -qx good src/value.txt"
    p = make_project(
        tmp_path,
        'Path("src/value.txt").write_text("good\\n")\n',
        files={"src/value.txt": "bad\n"},
        checks=[{"name": "value", "run": debris, "timeout": 30}],
    )
    proc = loop(p)
    assert "internal error" not in proc.stderr, fail_message(proc)
    assert proc.returncode == 0, fail_message(proc)
    verified = p.docs("fix-value", "verify")[0]["verify"]
    assert verified.get("debris") == ["src/d\\xe9bris"], verified.get("debris")
