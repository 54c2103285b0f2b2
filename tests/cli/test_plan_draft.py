"""lk-plan draft: the real claude CLI against lk-model-server drafts a plan from an issue;
lk-plan check's checker gates it, the problems go back for a bounded repair, only a valid
plan is written, and each outcome lands in the ledger and in lk report's panel."""

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
from loopkit.plan.drafting import extract
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.judge import judge_env

CONTRACT = """\
version: 1
objective: keep the parser correct
criteria:
  - name: tests
    run: "true"
scope:
  writable: ["src/**", "tests/**"]
  protected: ["src/vendor/**"]
"""

ISSUE = "parse_headers fails on a blank line: a blank line should end the headers.\n"

EXISTING = "# Plan\n\n- [x] Set up the project {#setup}\n  budget: 10 lines\n  scope: src/setup.py\n  end\n"

#: Truncated: no end marker, and a file outside the scope.
BAD = """\
```markdown
- [ ] Stop parse_headers failing on a blank line {#blank-line}
  issue: #12
  budget: 40 lines / 2 files
  scope: src/parser/headers.py, tests/test_headers.py
  files: src/parser/headers.py, docs/headers.md
```
"""

GOOD = """\
Here is the plan.

```markdown
- [ ] Stop parse_headers failing on a blank line {#blank-line}
  issue: #12
  closes: #12
  budget: 40 lines / 2 files
  scope: src/parser/headers.py, tests/test_headers.py
  files: src/parser/headers.py, +tests/test_headers.py
  depends: setup
  end
```
"""


def _bin(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable))
    return found or name


def _repo(repo: Path) -> Path:
    (repo / "src" / "parser").mkdir(parents=True)
    (repo / "src" / "parser" / "headers.py").write_text("def parse_headers(lines):\n    pass\n")
    (repo / "src" / "setup.py").write_text("")
    (repo / "loop.yaml").write_text(CONTRACT)
    (repo / "TASKS.md").write_text(EXISTING)
    (repo / "issue.md").write_text(ISSUE)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "parser")
    return repo


def _lk(
    repo: Path, env: dict[str, str], *args: str, tool: str = "lk-plan", stdin: str = ""
) -> tuple[int, Any, str]:
    done = subprocess.run(
        [_bin(tool), *args],
        cwd=repo,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )
    doc = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, doc, done.stderr


def _sessions(*answers: str) -> dict[str, Any]:
    return {"sessions": [[a] for a in answers], "exhausted": "end"}


def test_an_invalid_draft_is_repaired_then_written_and_reported(
    git_repo: Path, tmp_path: Path
) -> None:
    repo = _repo(git_repo)
    log = tmp_path / "requests.jsonl"
    with model_server(_sessions(BAD, GOOD), log=log) as server:
        env = judge_env("claude", server, tmp_path)
        code, doc, err = _lk(repo, env, "draft", "issue.md", "--provider", "claude")
    assert code == 0, err
    schema.validate(doc, "plan-draft")
    assert doc["outcome"] == "repaired" and doc["written"] and doc["tasks"] == ["blank-line"]
    first, second = doc["drafts"]
    messages = [p["message"] for p in first["problems"]]
    assert any("no 'end' marker" in m for m in messages), messages
    assert any("'docs/headers.md'" in m and "outside" in m for m in messages), messages
    assert {p.get("line") for p in first["problems"]} >= {1, 5}  # lines of the draft
    assert second == {**second, "valid": True, "problems": []}
    text = (repo / "TASKS.md").read_text()
    assert text.startswith(EXISTING)  # every existing byte kept
    assert "closes: #12" in text and text.rstrip().endswith("end")
    code, check, _ = _lk(repo, env, "check", "TASKS.md")
    assert code == 0, check
    task = next(t for t in check["tasks"] if t["id"] == "blank-line")
    assert (task["issue"], task["closes"]) == ("#12", "#12")
    assert task["new_files"] == ["tests/test_headers.py"]
    # The repair was asked with the checker's problems; the first draft without any.
    asked = [json.dumps(json.loads(line).get("body")) for line in log.read_text().splitlines()]
    prompts = [a for a in asked if "You draft a plan for the issue below" in a]
    assert prompts and "src/parser/headers.py" in prompts[0]
    assert any("no 'end' marker" in a for a in prompts)
    assert "no 'end' marker" not in prompts[0]
    records = [
        json.loads(line)
        for line in (repo / ".loopkit" / "ledger.jsonl").read_text().splitlines()
        if line.strip()
    ]
    drafts = [r for r in records if r["type"] == "draft"]
    assert len(drafts) == 1 and drafts[0]["draft"]["outcome"] == "repaired"
    for r in drafts:
        schema.validate(r, "ledger-record")
    code, report, err = _lk(repo, env, "report", "--json", tool="lk")
    assert code == 0, err
    panel = report["health"]["plan_drafts"]
    assert (panel["drafts"], panel["first_time_share"], panel["after_repair_share"]) == (
        1,
        0.0,
        1.0,
    )
    done = subprocess.run(
        [_bin("lk"), "report"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert "drafts valid first time: 0% (SLO >= 95%: MISSED)" in done.stdout
    assert "valid after repair: 100% (SLO >= 95%: met)" in done.stdout
    html = tmp_path / "report.html"
    done = subprocess.run(
        [_bin("lk"), "report", "--html", str(html)],
        cwd=repo,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert "valid first time 0%, valid after repair 100%" in html.read_text(), done.stderr


def test_a_model_that_never_drafts_a_valid_plan_writes_nothing(
    git_repo: Path, tmp_path: Path
) -> None:
    repo = _repo(git_repo)
    before = (repo / "TASKS.md").read_bytes()
    with model_server(_sessions(BAD, BAD)) as server:
        env = judge_env("claude", server, tmp_path)
        code, doc, err = _lk(
            repo, env, "draft", "issue.md", "--provider", "claude", "--repairs", "1"
        )
    assert code == 1, err
    schema.validate(doc, "plan-draft")
    assert (doc["outcome"], doc["written"], doc["tasks"]) == ("given_up", False, [])
    assert len(doc["drafts"]) == 2 and not any(d["valid"] for d in doc["drafts"])
    assert "nothing written" in err and "no 'end' marker" in err
    assert (repo / "TASKS.md").read_bytes() == before


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["draft", "missing.md"], None, "missing.md: no such file"),
        (["draft", "-"], "   \n", "empty"),
        (["draft", "empty.md"], None, "empty"),
        (["draft", "issue.md", "--tasks", "bad.md"], None, "invalid plan already"),
        (["draft", "issue.md", "--provider", "nosuch"], None, "nosuch"),
        (["draft", "issue.md", "--tasks", "plain.md"], None, "open items without plans (a, b)"),
        (["draft", "issue.md", "--tasks", "src"], None, "src: is a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(
    git_repo: Path, tmp_path: Path, args: list[str], stdin: str | None, needle: str
) -> None:
    repo = _repo(git_repo)
    (repo / "empty.md").write_text("")
    (repo / "plain.md").write_text("- [ ] A\n- [ ] B\n- [x] C\n")
    (repo / "bad.md").write_text("- [ ] A {#a}\n  budget: 5 lines\n  scope: src/a.py\n")
    env = {**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}
    done = subprocess.run(
        [_bin("lk-plan"), *args],
        cwd=repo,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
    assert (repo / "TASKS.md").read_text() == EXISTING


def test_a_missing_provider_cli_is_exit_4_and_nothing_written(
    git_repo: Path, tmp_path: Path
) -> None:
    repo = _repo(git_repo)
    env = {**os.environ, "PATH": "/usr/bin:/bin", "LOOPKIT_VALIDATE_OUTPUT": "1"}
    code, doc, err = _lk(repo, env, "draft", "issue.md", "--provider", "claude")
    assert (code, doc) == (4, None), err
    assert "claude" in err and len(err.strip().splitlines()) == 1
    assert (repo / "TASKS.md").read_text() == EXISTING


def test_a_valid_first_draft_makes_the_missing_tasks_file(git_repo: Path, tmp_path: Path) -> None:
    repo = _repo(git_repo)
    good = GOOD.replace("  depends: setup\n", "")
    with model_server(_sessions(good)) as server:
        env = judge_env("claude", server, tmp_path)
        code, doc, err = _lk(
            repo, env, "draft", "-", "--provider", "claude", "--tasks", "PLAN.md", stdin=ISSUE
        )
        assert code == 0, err
        assert (doc["issue"], doc["outcome"], doc["repairs"]) == ("<stdin>", "first_time", 0)
        assert (repo / "PLAN.md").read_text() == extract(good)
        code, report, err = _lk(repo, env, "report", "--json", tool="lk")
    panel = report["health"]["plan_drafts"]
    assert (panel["first_time_share"], panel["after_repair_share"]) == (1.0, 1.0)
