"""lk attempt's own rules, with a stage played by a stand-in (the real commands never
break them, which is why a stand-in plays the broken one)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import attempt as attempts
from loopkit.cli import attempt

DOC = '{"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x", "kind": "task"}}'
ran: list[str] = []


def _silent(**options: Any) -> int:
    """A stage that exits 0 and prints nothing."""
    ran.append("silent")
    return 0


def _echo(*, within: Any, **options: Any) -> int:
    """A stage that passes its document on."""
    ran.append("echo")
    within.out = within.doc
    return 0


def _stages(monkeypatch: pytest.MonkeyPatch, **which: Any) -> None:
    for name, run in which.items():
        monkeypatch.setitem(attempts.STAGES, name, run)


def test_a_stage_that_exits_0_without_its_document_stops_the_attempt_with_70(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Naive variant caught: trusting a stage's exit status alone -- a verdict without its
    # document is a bug, never a result a recipe may act on (commit).
    ran.clear()
    _stages(monkeypatch, admit=_echo, invoke=_echo, diff=_echo, verify=_silent, decide=_echo)
    result = CliRunner().invoke(attempt.main, [], input=DOC)
    assert result.exit_code == 70, result.output
    assert "lk-verify exited 0 but printed no document" in result.stderr
    assert ran == ["echo", "echo", "echo", "silent"]  # lk-decide never ran


def test_round_0_stops_with_70_when_a_stage_prints_no_document(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # lk task begin --reproduce runs round 0's stages with the same rule: a verdict without
    # its document stops it (70), and lk-decide never sees it (nothing settled, nothing
    # committed).
    ran.clear()
    _stages(monkeypatch, diff=_echo, verify=_silent, decide=_echo)
    doc = json.loads(DOC)
    rc, out = attempts.run_reproduce(doc, contract_path=None, base="HEAD", keep=str(tmp_path / "0"))
    assert (rc, out) == (70, None)
    assert ran == ["echo", "silent"]
    assert (tmp_path / "0-verify.json").read_text() == ""


def test_without_keep_nothing_is_written_and_the_last_document_is_printed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran.clear()
    _stages(monkeypatch, admit=_echo, invoke=_echo, diff=_echo, verify=_echo, decide=_echo)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(attempt.main, [], input=DOC)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(DOC)
    assert ran == ["echo"] * 5
    assert list(tmp_path.iterdir()) == []


def test_a_stage_never_blocks_on_a_stderr_nobody_reads(tmp_path: Path) -> None:
    # Naive variant caught: the tee stops draining once the terminal is gone (`loop.sh |&
    # head`), the pipe fills at 64 KiB and the stage hangs writing its progress lines.
    import os
    import subprocess

    code = f"""
import os, sys
from pathlib import Path
from loopkit.attempt import _tee_stderr
with _tee_stderr(Path({str(tmp_path / "stage.err")!r})):
    for _ in range(4096):
        os.write(2, b"x" * 99 + b"\\n")
print("done")
"""
    read, write = os.pipe()
    os.close(read)  # stderr goes to a pipe whose reader is gone
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], stderr=write, capture_output=False,
            stdout=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.stdout.strip() == "done"
    assert (tmp_path / "stage.err").stat().st_size == 4096 * 100


def test_the_document_an_attempt_begins_with_is_validated_once_before_any_stage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The stages read the documents the attempt passes them without validating them again
    # (the first was validated before any stage ran; each later one is a stage's own).
    # Naive variant caught: trusting the first one too -- a bad document from outside must
    # be refused, in one line naming what is wrong, before anything runs.

    ran.clear()
    _stages(monkeypatch, admit=_echo, invoke=_echo, diff=_echo, verify=_echo, decide=_echo)
    bad = (
        '{"kind": "loopkit/attempt", "version": 1, "task": {"id": 3, "text": "x", "kind": "task"}}'
    )
    result = CliRunner().invoke(attempt.main, [], input=bad)
    assert result.exit_code == 3, result.output
    assert "$.task.id" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert ran == []
    # What a stage reads: parsed, not validated again (the attempt's own).
    seen: list[Any] = []
    monkeypatch.setattr(
        "loopkit.schema.validate", lambda doc, *a, **k: seen.append(doc.get("task"))
    )
    result = CliRunner().invoke(attempt.main, [], input=DOC)
    assert result.exit_code == 0, result.output
    assert len(seen) == 1  # the first document, once
