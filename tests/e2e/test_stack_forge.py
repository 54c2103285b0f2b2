"""lk stack against the project's own forge (loopkit.testing.forge) with the real gh CLI:
a three-slice stack pushed, one slice changed and the stack restacked (the moved slices
verified again), a squash merge below the stack, the last pull request closing the
issue; and the hostile cases: a lost lease, a head changed after verification, a forge
that would land an untested tree, a restack whose moved tree fails, a later process in
the same checkout trying to push with the credential a push left behind."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopkit.testing.forge import Forge, serving
from tests.helpers import git, require_tool
from tests.helpers.evidence import BIN, one_json, write_contract


@dataclass
class World:
    forge: Forge
    repo: Path
    contract: Path
    env: dict[str, str]
    tmp: Path

    def lk(self, *args: str, code: int = 0) -> dict[str, Any]:
        done = subprocess.run(
            [str(BIN / "lk"), "stack", *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
        if code in (0,):
            return one_json(done.stdout, "stack-step")
        assert "Traceback" not in done.stderr
        return {"stderr": done.stderr}

    def gh(self, *args: str, body: dict[str, Any] | None = None) -> Any:
        done = subprocess.run(
            ["gh", "api", *args, *(["--input", "-"] if body is not None else [])],
            input=json.dumps(body) if body is not None else None,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    def remote_sha(self, branch: str) -> str:
        bare = self.forge.repos["o/r"].path
        return git(bare, "rev-parse", f"refs/heads/{branch}").strip()

    def commit(self, name: str, text: str) -> str:
        (self.repo / name).write_text(text)
        git(self.repo, "add", name)
        git(self.repo, "commit", "-q", "-m", f"add {name}")
        return git(self.repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def world(git_repo: Path, tmp_path: Path) -> Iterator[World]:
    require_tool("gh")
    # The checks: no file says BAD, and a2.txt and b.txt never stand together (two
    # slices that pass alone and fail once stacked).
    contract = write_contract(
        git_repo,
        criteria=[
            {"name": "no-bad", "run": "! grep -qs BAD ./*.txt"},
            {"name": "apart", "run": "! { test -f a2.txt && test -f b.txt; }"},
        ],
        where=tmp_path,
    )
    with serving(tmp_path / "forge") as forge:
        forge.create_repo("o/r", source=git_repo)
        forge.protect("o/r", "main", strict=True)
        git(git_repo, "remote", "add", "origin", forge.url("o/r"))
        env = {**os.environ, **forge.gh_env(tmp_path / "gh")}
        yield World(forge, git_repo, contract, env, tmp_path)


def _three(w: World, *, issue: int | None = None) -> dict[str, str]:
    heads = {}
    first = ["--remote", "origin", "--forge", "github", "--repo", "o/r"]
    if issue:
        first += ["--issue", str(issue)]
    for i, (sid, name) in enumerate((("s1", "a.txt"), ("s2", "b.txt"), ("s3", "c.txt"))):
        heads[sid] = w.commit(name, f"{sid}\n")
        extra = first if i == 0 else []
        out = w.lk(
            "add", "demo", sid, "--contract", str(w.contract), "--title", f"Slice {sid}", *extra
        )
        got = out["stack"]["slices"][i]
        assert (got["head"], got["evidence"]["verify"]["passed"]) == (heads[sid], True)
    return heads


def test_a_three_slice_stack_from_push_to_the_issue_closed(world: World) -> None:
    w = world
    issue = w.gh("repos/o/r/issues", "-X", "POST", body={"title": "parent", "body": "three slices"})
    heads = _three(w, issue=issue["number"])
    out = w.lk("push", "demo", "--issues")
    slices = out["stack"]["slices"]
    # Three branches and three pull requests, each based on the one below.
    for s in slices:
        assert w.remote_sha(s["branch"]) == s["head"] == heads[s["id"]]
    pulls = [w.gh(f"repos/o/r/pulls/{s['pr']}") for s in slices]
    assert [p["base"]["ref"] for p in pulls] == ["main", slices[0]["branch"], slices[1]["branch"]]
    assert "| no-bad | pass |" in pulls[0]["body"]
    assert f"Closes #{issue['number']}" in pulls[2]["body"]
    assert all(f"Closes #{issue['number']}" not in p["body"] for p in pulls[:2])
    assert all(f"Closes #{s['issue']}" in p["body"] for s, p in zip(slices, pulls, strict=True))
    # The stack's record went along with the branches, in the same atomic push.
    bare = w.forge.repos["o/r"].path
    assert git(bare, "cat-file", "-p", "refs/loopkit/stack/demo:stack.json").startswith("{")

    # Slice 1 changes: s2 and s3 move onto it, each verified again on its new tree.
    git(w.repo, "checkout", "-q", heads["s1"])
    (w.repo / "a.txt").write_text("s1, reworked\n")
    git(w.repo, "commit", "-q", "-am", "rework s1")
    w.lk("add", "demo", "s1", "--contract", str(w.contract))
    out = w.lk("restack", "demo", "--contract", str(w.contract))
    assert out["moved"] == ["s2", "s3"]
    s1, s2, s3 = out["stack"]["slices"]
    assert (s2["fork"], s3["fork"]) == (s1["head"], s2["head"])
    assert git(w.repo, "rev-parse", f"{s3['head']}~2").strip() == s1["head"]
    assert git(w.repo, "show", f"{s3['head']}:a.txt") == "s1, reworked\n"
    assert s2["evidence"]["restacked_from"] == heads["s2"]
    assert all(s["evidence"]["verify"]["tree"] == s["tree"] for s in (s1, s2, s3))
    w.lk("push", "demo")
    assert w.remote_sha(s3["branch"]) == s3["head"]

    # A squash merge below the stack: main gets a commit that is none of the slices'.
    out = w.lk("land", "demo", "--method", "squash")
    landed = out["landed"]
    assert w.remote_sha("main") == landed != s1["head"]
    assert git(w.repo, "rev-parse", f"{landed}^{{tree}}").strip() == s1["tree"] == out["tree"]
    assert len(git(w.repo, "rev-list", "--parents", "-1", landed).split()) == 2  # one parent
    # The slices above restack onto it from their recorded fork point.
    out = w.lk("restack", "demo", "--contract", str(w.contract))
    assert out["moved"] == ["s2", "s3"]
    s2 = out["stack"]["slices"][1]
    assert git(w.repo, "rev-parse", f"{s2['head']}^").strip() == landed
    assert git(w.repo, "diff-tree", "--no-commit-id", "--name-only", "-r", s2["head"]) == "b.txt\n"
    out = w.lk("push", "demo")
    assert w.gh(f"repos/o/r/pulls/{s2['pr']}")["base"]["ref"] == "main"
    w.lk("land", "demo")
    w.lk("restack", "demo", "--contract", str(w.contract))
    w.lk("push", "demo")
    out = w.lk("land", "demo", "--method", "merge")
    assert all(s["merged"] for s in out["stack"]["slices"])
    final = out["stack"]["slices"][2]
    assert git(w.repo, "rev-parse", f"{out['landed']}^{{tree}}").strip() == final["tree"]
    assert w.gh(f"repos/o/r/issues/{issue['number']}")["state"] == "closed"
    for s in out["stack"]["slices"]:
        assert w.gh(f"repos/o/r/issues/{s['issue']}")["state"] == "closed"


def test_a_lost_lease_moves_nothing(world: World) -> None:
    w = world
    _three(w)
    first = w.lk("push", "demo")["stack"]["slices"]
    # Someone else pushes to slice 2's branch.
    other = w.tmp / "other"
    git(w.tmp, "clone", "-q", w.forge.url("o/r", token=w.forge.token), str(other))
    git(other, "checkout", "-q", first[1]["branch"])
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", "theirs.txt")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", first[1]["branch"])
    theirs = git(other, "rev-parse", "HEAD").strip()
    # Slice 1 changes; the push of all three loses its lease on slice 2's branch.
    git(w.repo, "checkout", "-q", first[0]["head"])
    (w.repo / "a.txt").write_text("changed\n")
    git(w.repo, "commit", "-q", "-am", "change s1")
    w.lk("add", "demo", "s1", "--contract", str(w.contract))
    w.lk("restack", "demo", "--contract", str(w.contract))
    before = git(w.repo, "rev-parse", "refs/loopkit/stack/demo").strip()
    said = w.lk("push", "demo", code=40)["stderr"]
    assert "lease" in said and first[1]["branch"] in said
    # Atomic: not one branch moved, theirs kept, the record where it was.
    assert w.remote_sha(first[0]["branch"]) == first[0]["head"]
    assert w.remote_sha(first[1]["branch"]) == theirs
    assert w.remote_sha(first[2]["branch"]) == first[2]["head"]
    assert git(w.repo, "rev-parse", "refs/loopkit/stack/demo").strip() == before


def test_a_head_changed_after_verification_is_not_merged(world: World) -> None:
    w = world
    _three(w)
    s1 = w.lk("push", "demo")["stack"]["slices"][0]
    other = w.tmp / "other"
    git(w.tmp, "clone", "-q", w.forge.url("o/r", token=w.forge.token), str(other))
    git(other, "checkout", "-q", s1["branch"])
    (other / "a.txt").write_text("BAD, never verified\n")
    git(other, "commit", "-q", "-am", "sneak in")
    git(other, "push", "-q", "origin", s1["branch"])
    main = w.remote_sha("main")
    said = w.lk("land", "demo", code=40)["stderr"]
    assert "changed after verification" in said
    assert w.remote_sha("main") == main
    assert w.gh(f"repos/o/r/pulls/{s1['pr']}")["state"] == "open"


def test_the_forge_merge_checks_the_verified_sha(world: World) -> None:
    """The merge call names the verified head: a head that moves between lk stack's
    look and the merge is refused by the forge itself (409), nothing merged."""
    w = world
    _three(w)
    s1 = w.lk("push", "demo")["stack"]["slices"][0]
    done = subprocess.run(
        ["gh", "api", "-X", "PUT", f"repos/o/r/pulls/{s1['pr']}/merge", "-f", "sha=" + "0" * 40],
        env=w.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "HTTP 409" in done.stderr
    assert w.gh(f"repos/o/r/pulls/{s1['pr']}")["state"] == "open"


def test_landing_refused_where_the_forge_checks_only_the_head(world: World) -> None:
    w = world
    _three(w)
    w.lk("push", "demo")
    main = w.remote_sha("main")
    w.forge.repos["o/r"].protection.clear()
    said = w.lk("land", "demo", code=40)["stderr"]
    assert "not protected" in said
    w.forge.protect("o/r", "main", strict=False)
    said = w.lk("land", "demo", code=40)["stderr"]
    assert "up to date" in said
    assert w.remote_sha("main") == main
    w.forge.repos["o/r"].merge_queue.add("main")  # a merge queue is enough
    assert w.lk("land", "demo")["landed"] == w.remote_sha("main")


def test_a_restack_verifies_each_moved_slice(world: World) -> None:
    """s1 reworked to add a2.txt passes alone; s2 moved onto it fails (a2.txt and b.txt
    together): the restack stops with exit 1 and the stack stays as it was."""
    w = world
    heads = _three(w)
    git(w.repo, "checkout", "-q", heads["s1"])
    w.commit("a2.txt", "fine alone\n")
    git(w.repo, "reset", "-q", "--soft", "HEAD~2")
    git(w.repo, "commit", "-q", "-m", "s1 with a2")
    w.lk("add", "demo", "s1", "--contract", str(w.contract))
    before = w.lk("show", "demo")["stack"]["slices"]
    done = subprocess.run(
        [str(BIN / "lk"), "stack", "restack", "demo", "--contract", str(w.contract)],
        cwd=w.repo,
        env=w.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "s2" in done.stderr and "apart" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    after = w.lk("show", "demo")["stack"]
    assert after["slices"] == before  # nothing moved
    assert [(r["slice"], r["step"]) for r in after["returned"]] == [("s2", "restack")]


def test_no_push_credential_is_left_for_a_later_process(world: World) -> None:
    """lk stack pushes with the forge's token in git's environment for that one call;
    a worker running later in the same checkout (without the token in its environment)
    finds nothing in .git/config to push with."""
    w = world
    _three(w)
    w.lk("push", "demo")
    assert w.forge.token not in (w.repo / ".git" / "config").read_text()
    main = w.remote_sha("main")
    hostile = {k: v for k, v in w.env.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    hostile["GIT_TERMINAL_PROMPT"] = "0"
    done = subprocess.run(
        ["git", "push", "-f", "origin", "HEAD:main"],
        cwd=w.repo,
        env=hostile,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert w.remote_sha("main") == main
    assert any(e.get("push") for e in w.forge.log)  # it did reach the forge, and was refused
