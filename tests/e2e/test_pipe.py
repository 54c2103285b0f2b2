"""The installed commands piped into one another: a pipe may start with any of them, and
what is not an attempt document (or a section of one) is still refused."""

from __future__ import annotations

import json
from pathlib import Path

from loopkit import schema
from tests.helpers.evidence import lk_run as _run
from tests.helpers.evidence import notes_project as _project


def test_a_pipe_may_start_with_any_command_run_alone(git_repo: Path) -> None:
    """`lk-invoke --contract F | lk-diff | lk-verify | lk-decide`: the section a command
    prints alone is carried on as an attempt document, not refused as bad input."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    out = _run(["lk-invoke", "--contract", "loop.yaml"], git_repo)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kind"] == "loopkit/run"
    for cmd, code in (("lk-diff", 0), ("lk-verify", 0), ("lk-decide", 0)):
        nxt = _run([cmd, "--contract", "loop.yaml"], git_repo, out.stdout)
        assert nxt.returncode == code, (cmd, nxt.stderr)
        out = nxt
    doc = json.loads(out.stdout)
    schema.validate(doc, "attempt")
    assert doc["decision"]["outcome"] == "complete"
    assert doc["attempt_id"] == doc["run"]["attempt_id"]  # one attempt, one artifacts folder
    # A section printed alone and piped on: lk-verify alone, then lk-decide.
    alone = _run(["lk-verify", "--contract", "loop.yaml"], git_repo)
    decided = _run(["lk-decide", "--contract", "loop.yaml"], git_repo, alone.stdout)
    assert decided.returncode == 10, decided.stderr  # no diff evidence: retry, not exit 3
    # Anything else is still refused.
    wrong = _run(["lk-decide"], git_repo, '{"kind": "loopkit/report", "version": 1}')
    assert wrong.returncode == 3 and "$.kind" in wrong.stderr
