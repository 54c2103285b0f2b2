"""A worker that commits its own change cannot hide it from lk-diff: lk-invoke records
the commit the tree started from (run.base) and lk-diff compares against it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.helpers import git
from tests.helpers.evidence import run


def test_a_committing_worker_is_still_diffed_against_where_it_started(git_repo: Path) -> None:
    contract = git_repo.parent / "loop.yaml"
    contract.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "objective": "Add notes.",
                "scope": {"writable": ["notes/**"]},
                "criteria": [{"name": "notes", "run": "test -f notes/a.txt"}],
                "worker": {
                    "provider": "command",
                    "command": "mkdir -p notes && echo hi > notes/a.txt && echo x > stray.txt"
                    " && git add -A && git commit -qm 'worker commit' && echo done",
                },
                "sandbox": {"mode": "off"},  # in a sandbox .git is read-only: no worker commits
            }
        )
    )
    start = git(git_repo, "rev-parse", "HEAD").strip()
    task = json.dumps(
        {
            "kind": "loopkit/attempt",
            "version": 1,
            "task": {"id": "notes", "text": "Add notes.", "kind": "task"},
        }
    )
    invoked = run("lk-invoke", "--contract", str(contract), cwd=git_repo, stdin=task)
    assert invoked.returncode == 0, invoked.stderr
    doc = json.loads(invoked.stdout)
    assert doc["run"]["base"] == start
    assert git(git_repo, "rev-parse", "HEAD").strip() != start  # the worker did commit

    diffed = run("lk-diff", cwd=git_repo, stdin=invoked.stdout)
    out = json.loads(diffed.stdout)
    assert out["diff"]["base"].startswith(start) or out["diff"]["base"] == start
    paths = {f["path"] for f in out["diff"]["files"]}
    assert paths == {"notes/a.txt", "stray.txt"}
    # The committed stray file is still outside the writable scope: the policy sees it.
    assert diffed.returncode == 1
    assert {"rule": "outside_writable", "path": "stray.txt"} in [
        {"rule": v["rule"], "path": v["path"]} for v in out["diff"]["violations"]
    ]
