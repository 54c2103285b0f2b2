"""Re-record the golden judge transcripts with the real CLIs and the scripted model server.

    .venv/bin/python -m tests.golden.judge.record      (needs `make agents`)

Each case runs ``lk-judge`` in a fresh repository and keeps the judge's own native stream
(``.loopkit/artifacts/<attempt>/judge/stream.jsonl``) as ``<case>.jsonl``. ``claude-wrote`` is a
claude *worker* run (acceptEdits) that writes before it answers: what a judge that was
not read-only would leave behind. ``claude-cut`` is ``claude-met`` without its last line.
The expected readings live in tests/cli/test_judge_cli.py.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.helpers.agents import model_server, run_claude
from tests.helpers.judge import GOAL, GOLDEN, docs_repo, judge_env, judge_turns, lk_judge

CASES = {
    "claude-met": (
        "claude",
        {"read": "docs/api.md", "reply": "GET /health is documented in docs/api.md.\nVERDICT: MET"},
    ),
    "claude-unread": ("claude", {"reply": "The route is surely documented.\nVERDICT: MET"}),
    "claude-denied": (
        "claude",
        {"write": "docs/api.md", "read": "docs/api.md", "reply": "Documented.\nVERDICT: MET"},
    ),
    "codex-met": (
        "codex",
        {"read": "docs/api.md", "reply": "GET /health is documented in docs/api.md.\nVERDICT: MET"},
    ),
    "codex-not-met": (
        "codex",
        {
            "read": "docs/api.md",
            "reply": "docs/api.md documents GET /health but not the 503 answer when the "
            "database is down.\nVERDICT: NOT MET",
        },
    ),
    "codex-no-verdict": ("codex", {"read": "docs/api.md", "reply": "The route seems documented."}),
}


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "README.md").write_text("# test repo\n")
    subprocess.run(["git", "add", "README.md"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "init"],
        cwd=repo,
        check=True,
    )
    return repo


def main() -> None:
    import os

    os.environ.setdefault("GIT_AUTHOR_NAME", "t")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "t@example.invalid")
    os.environ.setdefault("GIT_COMMITTER_NAME", "t")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "t@example.invalid")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, (provider, kw) in CASES.items():
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            repo = docs_repo(_repo(tmp))
            with model_server(judge_turns(provider, **kw)) as server:
                done = lk_judge(
                    repo, judge_env(provider, server, tmp), "--provider", provider, "--goal", GOAL
                )
            stream = repo / done.section["transcript"]
            (GOLDEN / f"{name}.jsonl").write_bytes(stream.read_bytes())
            print(name, done.code, done.section["reason"])
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        repo = docs_repo(_repo(tmp))
        turns = [
            {"tools": [{"name": "Read", "input": {"file_path": "{{cwd}}/docs/api.md"}}]},
            {
                "tools": [
                    {
                        "name": "Edit",
                        "input": {
                            "file_path": "{{cwd}}/docs/api.md",
                            "old_string": "# API",
                            "new_string": "# API (judged)",
                        },
                    }
                ]
            },
            {"text": "Fixed the title myself.\nVERDICT: MET"},
        ]
        with model_server(turns) as server:
            run = run_claude(server, repo, f"Judge: {GOAL}", home=tmp / "home")
        (GOLDEN / "claude-wrote.jsonl").write_text(run.stdout)
        print("claude-wrote", run.returncode)
    lines = (GOLDEN / "claude-met.jsonl").read_text().splitlines(keepends=True)
    (GOLDEN / "claude-cut.jsonl").write_text("".join(lines[:-1]))


if __name__ == "__main__":
    main()
