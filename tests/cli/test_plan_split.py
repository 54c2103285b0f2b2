"""lk-plan split: the real claude CLI against lk-model-server re-splits one slice; the
checker gates the answer, problems go back for a repair, and only that slice's plan
gains lines: its parent and the other slices stay byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopkit import schema
from tests.cli.test_plan_draft import _bin, _lk, _sessions
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.judge import judge_env

CONTRACT = """\
version: 1
objective: a parser that reads the whole grammar
criteria:
  - name: tests
    run: "true"
scope:
  writable: ["src/**", "docs/**"]
"""

TASKS = """\
# Plan

- [ ] Rework parsing {#rework}
  issue: #3
  - [x] Lexer {#lexer}
    budget: 20 lines / 1 file
    scope: src/lexer.py
    end
  - [!] Parser {#parser} (parked: failed)
    budget: 10 lines / 2 files
    scope: src/parser/
    files: src/parser/core.py, src/parser/expr.py
    end
  - [ ] Docs {#docs}
    budget: 5 lines
    scope: docs/
    end
  end
"""

#: Cut short (no end on the second), and a scope outside the slice's.
BAD = """\
```markdown
- [ ] Parser core {#parser-core}
  budget: 10 lines / 1 file
  scope: src/parser/core.py
  files: src/parser/core.py
  end
- [ ] Parser expressions {#parser-expr}
  budget: 10 lines / 1 file
  scope: src/lexer.py
  files: src/lexer.py
```
"""

GOOD = """\
Two slices:

```markdown
- [ ] Parser core {#parser-core}
  budget: 10 lines / 1 file
  scope: src/parser/core.py
  files: src/parser/core.py
  end
- [ ] Parser expressions {#parser-expr}
  budget: 10 lines / 1 file
  scope: src/parser/expr.py
  files: src/parser/expr.py
  accept: a + b * c parses as a + (b * c)
  end
```
"""


def _repo(repo: Path) -> Path:
    for name in ("src/lexer.py", "src/parser/core.py", "src/parser/expr.py", "docs/x.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("")
    (repo / "loop.yaml").write_text(CONTRACT)
    (repo / "TASKS.md").write_text(TASKS)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "parser")
    return repo


def test_a_parked_slice_is_split_under_itself_and_nothing_else_moves(
    git_repo: Path, tmp_path: Path
) -> None:
    repo = _repo(git_repo)
    log = tmp_path / "requests.jsonl"
    with model_server(_sessions(BAD, GOOD), log=log) as server:
        env = judge_env("claude", server, tmp_path)
        env["LOOPKIT_VALIDATE_OUTPUT"] = "1"
        code, doc, err = _lk(
            repo, env, "split", "TASKS.md", "--task", "parser", "--provider", "claude"
        )
        assert code == 0, err
        schema.validate(doc, "plan-draft")
        assert (doc["split"], doc["outcome"], doc["tasks"]) == (
            "parser",
            "repaired",
            ["parser-core", "parser-expr"],
        )
        messages = [p["message"] for p in doc["drafts"][0]["problems"]]
        assert any("no 'end' marker" in m for m in messages), messages
        assert any("outside its parent's scope" in m for m in messages), messages
        assert "split parser into parser-core, parser-expr" in err
        before, after = TASKS.splitlines(), (repo / "TASKS.md").read_text().splitlines()
        # Only the split slice's own line changed (parked -> open); its sub-slices sit
        # before its end; every other line -- the parent, the other slices -- as it was.
        at = before.index("    end", before.index("  - [!] Parser {#parser} (parked: failed)"))
        assert after[:at] == [
            "  - [ ] Parser {#parser}" if "{#parser}" in line else line for line in before[:at]
        ]
        assert after[-(len(before) - at) :] == before[at:]
        block = after[at : len(after) - (len(before) - at)]
        assert block[0] == "    - [ ] Parser core {#parser-core}"
        assert block[-1] == "      end" and len(block) == 11
        code, checked, _ = _lk(repo, env, "check", "TASKS.md")
        assert code == 0, checked
        code, nxt, err = _lk(repo, env, "next", "TASKS.md")
        assert (code, nxt["task"]["id"]) == (0, "parser-core"), err
        # The repair was asked with the checker's problems and the slice as written.
        asked = [json.dumps(json.loads(line).get("body")) for line in log.read_text().splitlines()]
        prompts = [a for a in asked if "went over its size estimate" in a]
        assert prompts and "src/parser/" in prompts[0] and "no 'end' marker" in prompts[-1]
        records = [
            json.loads(line)
            for line in (repo / ".loopkit" / "ledger.jsonl").read_text().splitlines()
            if line.strip()
        ]
        [rec] = [r for r in records if r["type"] == "draft"]
        schema.validate(rec, "ledger-record")
        assert rec["draft"]["split"] == "parser" and rec["draft"]["outcome"] == "repaired"
        code, report, err = _lk(repo, env, "report", "--json", tool="lk")
        assert code == 0, err
        assert report["health"]["estimates"]["resplit"] == 1
        # A sub-slice cannot be split again: slices nest two deep at most.
        code, _, err = _lk(
            repo, env, "split", "TASKS.md", "--task", "parser-core", "--provider", "claude"
        )
        assert code == 3 and "is a sub-slice" in err, err


@pytest.mark.parametrize(
    ("task", "extra", "needle"),
    [
        ("lexer", [], "lexer is done"),
        ("rework", [], "rework holds slices already"),
        ("nosuch", [], "no task with id 'nosuch'"),
        ("docs", ["--over-estimate"], "did not go over its estimate"),
        ("docs", ["--provider", "nosuch"], "no provider 'nosuch'"),
    ],
)
def test_a_task_that_cannot_be_split_is_one_line_and_exit_3(
    git_repo: Path, task: str, extra: list[str], needle: str
) -> None:
    repo = _repo(git_repo)
    env = {**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}
    args = ["split", "TASKS.md", "--task", task, *extra]
    if "--provider" not in extra:
        args += ["--provider", "claude"]
    done = subprocess.run(
        [_bin("lk-plan"), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    assert (repo / "TASKS.md").read_text() == TASKS


def test_no_valid_split_writes_nothing(git_repo: Path, tmp_path: Path) -> None:
    repo = _repo(git_repo)
    with model_server(_sessions(BAD, BAD)) as server:
        env: dict[str, Any] = judge_env("claude", server, tmp_path)
        code, doc, err = _lk(
            repo,
            env,
            "split",
            "TASKS.md",
            "--task",
            "parser",
            "--provider",
            "claude",
            "--repairs",
            "1",
        )
    assert code == 1, err
    assert (doc["outcome"], doc["written"], doc["tasks"]) == ("given_up", False, [])
    assert "nothing written" in err
    assert (repo / "TASKS.md").read_text() == TASKS
