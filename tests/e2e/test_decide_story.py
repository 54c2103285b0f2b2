"""The parser story end to end: real git, the real lk-plan, lk-diff, lk-verify and lk-decide.

Baseline: the blank-line test fails. A wrong first fix leaves the same failure (the same
fingerprint): replan. The right fix passes on the tree on disk: complete. Then replay
re-derives every decision, and the report tells the story.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopkit import schema
from loopkit.decision import ledger
from tests.helpers import git

BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "parser-project"

ORIGINAL = (EXAMPLE / "src" / "parser" / "headers.py").read_text()
# A guess that leaves the cause alone: the blank line still reaches the split.
WRONG_FIX = ORIGINAL.replace(
    "    for line in text.splitlines():\n",
    "    for line in text.splitlines():\n        line = line.rstrip()  # trailing whitespace?\n",
)
assert WRONG_FIX != ORIGINAL

RIGHT_FIX = '''\
"""Parse the header block of a message."""

from __future__ import annotations


def parse_headers(text: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the blank line ends the headers
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    return headers
'''


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e["PYTHONPATH"] = "src"
    e.pop("LOOPKIT_STATE_DIR", None)
    return e


def step(cmd: list[str], cwd: Path, stdin: str | None = None) -> tuple[int, str, str]:
    p = subprocess.run(
        [str(BIN / cmd[0]), *cmd[1:]],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    return p.returncode, p.stdout, p.stderr


def attempt(repo: Path, run: dict[str, Any] | None = None) -> tuple[int, dict[str, Any], str]:
    """One round after the worker: plan -> diff -> verify -> decide (each a real command)."""
    code, doc, err = step(["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], repo)
    assert code == 0, err
    code, doc, err = step(["lk-diff"], repo, doc)
    assert code in (0, 1), err
    code, doc, err = step(["lk-verify"], repo, doc)
    assert code in (0, 1), err
    if run is not None:  # what the worker said of its own run
        doc = json.dumps({**json.loads(doc), "run": run})
    code, out, err = step(["lk-decide"], repo, doc)
    assert out.strip(), err
    document = json.loads(out)
    schema.validate(document, "attempt")
    return code, document, err


@pytest.fixture
def parser_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "parser"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    contract = repo / "loop.yaml"
    text = contract.read_text()
    assert "attempts: 3," in text
    contract.write_text(text.replace("attempts: 3,", "attempts: 5,"))  # room for the stale step
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "parser example")
    return repo


@pytest.mark.longest
def test_wrong_fix_replans_and_right_fix_completes(parser_repo: Path) -> None:
    repo = parser_repo
    code, base, err = attempt(repo)
    assert code == 10, err
    assert base["decision"]["failure_class"] == "verification_failure"
    fingerprint = base["verify"]["fingerprint"]
    assert fingerprint

    (repo / "src" / "parser" / "headers.py").write_text(WRONG_FIX)
    claim = {
        "provider": "command",
        "stop_reason": "completed",
        "is_error": False,
        "claimed_complete": True,
        "final_message": "Fixed: all tests pass now.",
    }
    code, wrong, err = attempt(repo, claim)
    assert wrong["verify"]["fingerprint"] == fingerprint, "the wrong fix should fail the same way"
    assert code == 11, err
    assert wrong["decision"]["outcome"] == "replan"
    assert wrong["decision"]["failure_class"] == "no_progress"
    assert "hypothesis failed" in wrong["decision"]["feedback"]
    assert "unsupported completion" in wrong["decision"]["feedback"]  # the claim was not trusted

    (repo / "src" / "parser" / "headers.py").write_text(RIGHT_FIX)
    code, doc, err = step(["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], repo)
    _, doc, _ = step(["lk-diff"], repo, doc)
    code, doc, err = step(["lk-verify"], repo, doc)
    assert code == 0, err
    # An edit after the evidence was taken makes it stale: passing, but never complete.
    scratch = repo / "src" / "parser" / "scratch.py"
    scratch.write_text("# a late edit\n")
    code, out, _ = step(["lk-decide"], repo, doc)
    assert code == 10
    assert json.loads(out)["decision"]["failure_class"] == "stale_evidence"
    scratch.unlink()  # the tree on disk is the verified one again
    code, out, _ = step(["lk-decide"], repo, doc)
    right = json.loads(out)
    assert code == 0, right["decision"]
    assert right["decision"]["outcome"] == "complete"
    assert right["decision"]["attempt"] == 4

    path = repo / ".loopkit" / "ledger.jsonl"
    records, problems = ledger.read(path)
    assert problems == []
    outcomes = ["retry", "replan", "retry", "complete"]
    assert [r["decision"]["outcome"] for _, r in records] == outcomes
    assert {r["task_id"] for _, r in records} == {"blank-line"}

    code, out, err = step(["lk-decide", "--replay", str(path)], repo)
    assert code == 0, err
    assert json.loads(out)["agree"] is True

    # Tamper with the recorded evidence of the replan: the wrong fix "passed".
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["inputs"]["document"]["verify"]["passed"] = True
    rec["inputs"]["document"]["verify"]["fingerprint"] = None
    tampered = repo / "tampered.jsonl"
    tampered.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    code, out, err = step(["lk-decide", "--replay", str(tampered)], repo)
    assert code == 1
    report = json.loads(out)
    assert {d["line"] for d in report["disagreements"]} == {2}
    assert "decision" in {d["field"] for d in report["disagreements"]}
    assert "line 2" in err
    tampered.unlink()

    code, out, err = step(["lk", "report", "--json"], repo)
    assert code == 0, err
    (task,) = json.loads(out)["tasks"]
    assert task["outcome"] == "complete"
    assert task["outcome"] == "complete" and task["attempts"] == 4
    assert [a["outcome"] for a in task["timeline"]] == outcomes
