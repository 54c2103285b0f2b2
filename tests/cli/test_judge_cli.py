"""lk-judge through click's CliRunner: saved transcripts, bad input, the read-only proof."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.judge import main
from tests.helpers.judge import GOAL, GOLDEN, attempt_with_goal, docs_repo

# case -> (exit code, verdict, grounded, trusted, reason, files_read)
GOLDEN_CASES: dict[str, tuple[int, str, bool, bool, str | None, list[str]]] = {
    "claude-met": (0, "MET", True, True, None, ["docs/api.md"]),
    "claude-unread": (1, "NOT_MET", False, False, "ungrounded", []),
    "claude-denied": (0, "MET", True, True, None, ["docs/api.md"]),
    "claude-cut": (1, "NOT_MET", True, False, "truncated", ["docs/api.md"]),
    "claude-wrote": (1, "NOT_MET", True, False, "not_read_only", ["docs/api.md"]),
    "codex-met": (0, "MET", True, True, None, ["docs/api.md"]),
    "codex-not-met": (1, "NOT_MET", True, True, "not_met", ["docs/api.md"]),
    "codex-no-verdict": (1, "NOT_MET", True, False, "no_verdict", ["docs/api.md"]),
}


def invoke(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    out = result.stdout.strip()
    doc = json.loads(out) if out else None
    if doc is not None:
        schema.validate(doc, str(doc["kind"]).removeprefix("loopkit/"))
    return result.exit_code, doc, result.stderr


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden_transcripts(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no repository, no contract: --transcript needs neither
    code, doc, err = invoke("--transcript", str(GOLDEN / f"{case}.jsonl"))
    want_code, verdict, grounded, trusted, reason, files = GOLDEN_CASES[case]
    assert doc is not None, err
    assert doc["kind"] == "loopkit/judge"
    got = (code, doc["verdict"], doc["grounded"], doc["trusted"], doc["reason"])
    assert got == (want_code, verdict, grounded, trusted, reason)
    assert doc["files_read"] == files
    assert doc["read_only"]["checked"] is False  # a saved stream proves nothing about a tree
    assert doc["provider"] == case.split("-")[0]


def test_golden_feedback_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, doc, _ = invoke("--transcript", str(GOLDEN / "codex-not-met.jsonl"))
    assert doc is not None
    assert "503 answer when the database is down" in doc["feedback"]
    _, doc, _ = invoke("--transcript", str(GOLDEN / "claude-wrote.jsonl"))
    assert doc is not None
    assert doc["files_written"] == ["docs/api.md"]
    assert "refused" in doc["feedback"]
    _, doc, _ = invoke("--transcript", str(GOLDEN / "claude-denied.jsonl"))
    assert doc is not None
    assert doc["denied"] and doc["denied"][0].startswith("Write")


def test_a_transcript_judged_into_a_piped_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    piped = attempt_with_goal()
    code, doc, _ = invoke("--transcript", str(GOLDEN / "claude-met.jsonl"), stdin=json.dumps(piped))
    assert code == 0
    assert doc is not None and doc["kind"] == "loopkit/attempt"
    assert doc["task"] == piped["task"] and doc["diff"] == piped["diff"]
    assert doc["judge"]["verdict"] == "MET"
    assert doc["judge"]["goal"] == GOAL and doc["judge"]["goal_source"] == "task"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such file"),
        ("", "not a judge transcript"),
        ("just some text\nVERDICT: MET\n", "not a judge transcript"),
    ],
)
def test_bad_transcripts_exit_3(
    content: str | None, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content)
    code, doc, err = invoke("--transcript", str(path))
    assert code == 3
    assert doc is None
    assert needle in err and str(path) in err
    assert len(err.strip().splitlines()) == 1


def test_no_goal_is_bad_input(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(git_repo)
    code, doc, err = invoke("--provider", "claude")
    assert (code, doc) == (3, None)
    assert "no goal to judge" in err


def test_no_provider_is_bad_input(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(git_repo)
    code, doc, err = invoke("--goal", GOAL)
    assert (code, doc) == (3, None)
    assert "no judge provider" in err


def test_an_invalid_contract_is_bad_input(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(git_repo)
    (git_repo / "loop.yaml").write_text("version: 1\njudge: {provider: gemini}\n")
    code, doc, err = invoke("--goal", GOAL)
    assert (code, doc) == (3, None)
    assert "loop.yaml" in err


def test_not_a_git_repository_exits_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, doc, err = invoke("--provider", "claude", "--goal", GOAL)
    assert (code, doc) == (4, None)
    assert "not a git repository" in err


def test_a_missing_provider_cli_exits_4(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(shutil.which("git") or "/usr/bin/git", bare / "git")
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.chdir(git_repo)
    code, doc, err = invoke("--provider", "codex", "--goal", GOAL)
    assert (code, doc) == (4, None)
    assert "codex" in err and "install" in err


def contract(repo: Path, command: str, *, sandbox: str = "auto") -> None:
    (repo / "loop.yaml").write_text(
        "version: 1\nobjective: document the routes\nscope: {writable: ['docs/**']}\n"
        "criteria: [{name: t, run: 'true'}]\n"
        f"judge: {{provider: command, command: {json.dumps(command)}, timeout: 20}}\n"
        f"sandbox: {{mode: {sandbox}}}\n"
    )


def test_a_judge_that_changes_the_tree_has_its_verdict_refused(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = docs_repo(git_repo)
    # Without a sandbox the write lands, and is caught; in one it cannot land at all.
    contract(repo, "echo '## GET /ready' >> docs/api.md; echo 'VERDICT: MET'", sandbox="off")
    monkeypatch.chdir(repo)
    code, doc, _ = invoke("--goal", GOAL)
    assert code == 1
    assert doc is not None
    assert (doc["verdict"], doc["reason"], doc["said"]) == ("NOT_MET", "tree_changed", "MET")
    ro = doc["read_only"]
    assert ro["checked"] and ro["changed"]
    assert ro["tree_before"] != ro["tree_after"]
    assert ro["changes"] == [{"status": "modified", "path": "docs/api.md"}]
    assert "modified docs/api.md" in doc["feedback"] and "refused" in doc["feedback"]


def test_in_the_sandbox_a_judge_cannot_change_the_tree(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = docs_repo(git_repo)
    before = (repo / "docs/api.md").read_text()
    contract(repo, "echo '## GET /ready' >> docs/api.md || echo refused; echo 'VERDICT: MET'")
    monkeypatch.chdir(repo)
    _, doc, _ = invoke("--goal", GOAL)
    assert (repo / "docs/api.md").read_text() == before
    assert doc is not None and doc["read_only"]["changed"] is False


def test_a_command_judge_cannot_ground_a_met(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = docs_repo(git_repo)
    contract(
        repo, 'cat "$LOOPKIT_HANDOFF" >/dev/null; cat docs/api.md >/dev/null; echo "VERDICT: MET"'
    )
    monkeypatch.chdir(repo)
    code, doc, _ = invoke("--goal", GOAL)
    assert code == 1
    assert doc is not None
    assert (doc["verdict"], doc["reason"], doc["grounded"]) == ("NOT_MET", "ungrounded", False)
    assert doc["read_only"]["changed"] is False
    assert doc["provider"] == "command"
    # The judge's stream is kept among the attempt's artifacts, never in the tree.
    assert doc["transcript"].startswith(".loopkit/artifacts/")
    assert (repo / doc["transcript"]).is_file()


def test_a_command_judge_gets_the_prompt(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = docs_repo(git_repo)
    contract(
        repo,
        'grep -c "VERDICT: NOT MET" "$LOOPKIT_HANDOFF"; echo "The 503 case is missing.";'
        ' echo "VERDICT: NOT MET"',
    )
    monkeypatch.chdir(repo)
    piped = attempt_with_goal()
    code, doc, _ = invoke(stdin=json.dumps(piped))
    assert code == 1
    assert doc is not None
    j = doc["judge"]
    assert (j["verdict"], j["reason"]) == ("NOT_MET", "not_met")
    assert j["goal"] == GOAL
    assert "The 503 case is missing." in j["feedback"]  # the whole output is the reply
    prompt = (repo / j["transcript"]).parent / "handoff.md"
    text = prompt.read_text()
    assert GOAL in text and "A docs/api.md (+5 -0)" in text and "VERDICT: MET" in text


def test_a_command_judge_that_cites_the_work_can_ground_a_met(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = docs_repo(git_repo)
    line_no, line = next(
        (i, text)
        for i, text in enumerate((repo / "docs/api.md").read_text().splitlines(), 1)
        if text.strip()
    )
    contract(repo, f"echo 'CITE: docs/api.md:{line_no}: {line.strip()}'; echo 'VERDICT: MET'")
    monkeypatch.chdir(repo)
    code, doc, _ = invoke("--goal", GOAL)
    assert code == 0, doc
    assert doc is not None and doc["grounded"] is True and doc["verdict"] == "MET"
    assert doc["citations"] == [
        {"path": "docs/api.md", "line": line_no, "text": line.strip(), "ok": True}
    ]


def test_a_citation_that_does_not_match_the_tree_makes_the_verdict_untrusted(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = docs_repo(git_repo)
    contract(
        repo,
        "echo 'CITE: docs/api.md:1: GET /ready returns 200'; "
        "echo 'CITE: ../../etc/passwd:1: root'; echo 'VERDICT: MET'",
    )
    monkeypatch.chdir(repo)
    code, doc, _ = invoke("--goal", GOAL)
    assert code == 1 and doc is not None
    assert (doc["verdict"], doc["reason"], doc["grounded"]) == ("NOT_MET", "miscited", False)
    whys = [c.get("why") for c in doc["citations"]]
    assert whys == ["the text is not on that line", "not a file of the repository"]
    assert "cited what is not in the tree" in doc["feedback"]
