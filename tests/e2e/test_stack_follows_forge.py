"""The stack follows what people do on the forge, through the real gh against loopkit's
own forge: the bottom pull request merged in the web page (merge commit, squash, rebase;
its branch deleted or not), a pull request closed, a branch pushed by someone else; then
the documented command, `lk stack sync`, and the rest of the stack lands -- each slice
verified, no empty commit, no stale base, nobody's work overwritten."""

from __future__ import annotations

import pytest

from tests.e2e import test_stack_forge as stack_forge
from tests.e2e.test_stack_forge import World, _three
from tests.helpers import git

world = stack_forge.world  # the forge, its repository and gh pointed at it


def _web_merge(w: World, number: int, method: str, *, delete: bool) -> str:
    """What the web page's merge button does (no sha named), then "Delete branch"."""
    got = w.gh(f"repos/o/r/pulls/{number}/merge", "-X", "PUT", body={"merge_method": method})
    if delete:
        head = w.gh(f"repos/o/r/pulls/{number}")["head"]["ref"]
        w.gh(f"repos/o/r/git/refs/heads/{head}", "-X", "DELETE")
    return str(got["sha"])


def _no_empty_commit(w: World, since: str, until: str) -> None:
    """Every commit between ``since`` and ``until`` changes the tree of its first parent."""
    listed = git(w.repo, "rev-list", "--first-parent", f"{since}..{until}").split()
    assert listed
    for commit in listed:
        assert git(w.repo, "rev-parse", f"{commit}^{{tree}}") != git(
            w.repo, "rev-parse", f"{commit}^1^{{tree}}"
        ), f"{commit[:12]} is an empty commit"


@pytest.fixture
def w(world: World) -> World:
    return world


def _sync(w: World, code: int = 0) -> dict:
    return w.lk("sync", "demo", "--contract", str(w.contract), code=code)


@pytest.mark.parametrize(
    ("method", "delete"), [("squash", True), ("merge", False), ("rebase", True)]
)
def test_a_merge_on_the_forge_below_the_stack_then_sync(
    w: World, method: str, delete: bool
) -> None:
    _three(w)
    start = w.remote_sha("main")
    pushed = w.lk("push", "demo")["stack"]["slices"]
    landed = _web_merge(w, pushed[0]["pr"], method, delete=delete)
    assert w.remote_sha("main") == landed != pushed[0]["head"]
    bare = w.forge.repos["o/r"].path
    parents = len(git(bare, "rev-list", "--parents", "-1", landed).split()) - 1
    assert parents == (2 if method == "merge" else 1)  # squash, rebase: a new commit

    out = _sync(w)
    assert [(f["slice"], f["state"], f["landed"]) for f in out["followed"]] == [
        ("s1", "merged", landed)
    ]
    assert out["moved"] == ["s2", "s3"]  # only what moved is verified again
    s1, s2, s3 = out["stack"]["slices"]
    assert s1["merged"] == landed
    # s2 sits on what landed, holding only its own change; s3 on s2.
    assert (s2["fork"], s3["fork"]) == (landed, s2["head"])
    assert git(w.repo, "rev-parse", f"{s2['head']}^").strip() == landed
    assert git(w.repo, "diff-tree", "--no-commit-id", "--name-only", "-r", s2["head"]) == "b.txt\n"
    for s in (s2, s3):
        assert s["evidence"]["verify"]["passed"] and s["evidence"]["verify"]["tree"] == s["tree"]
        assert w.remote_sha(s["branch"]) == s["head"] == s["pushed"]
    # No stale base: the bottom open pull request targets main, the next one s2's branch.
    assert w.gh(f"repos/o/r/pulls/{s2['pr']}")["base"]["ref"] == "main"
    assert w.gh(f"repos/o/r/pulls/{s3['pr']}")["base"]["ref"] == s2["branch"]
    assert w.gh(f"repos/o/r/pulls/{s2['pr']}")["state"] == "open"

    # The rest lands, each exactly its verified tree.
    out = w.lk("land", "demo", "--method", method)
    assert out["slice"] == "s2"
    out = _sync(w)
    assert out["moved"] == ["s3"] and out["followed"] == []
    out = w.lk("land", "demo", "--method", method)
    assert all(s["merged"] for s in out["stack"]["slices"])
    top = out["stack"]["slices"][2]
    assert git(w.repo, "rev-parse", f"{out['landed']}^{{tree}}").strip() == top["tree"]
    _no_empty_commit(w, start, w.remote_sha("main"))
    for name in ("a.txt", "b.txt", "c.txt"):
        assert git(w.repo, "show", f"{out['landed']}:{name}").startswith("s")


def test_sync_never_replays_a_landed_slice_as_an_empty_commit(w: World) -> None:
    """The bottom slice merged on the forge and main moved on since: sync lands the
    slices above on main's tip, and nothing of s1 is replayed."""
    _three(w)
    pushed = w.lk("push", "demo")["stack"]["slices"]
    _web_merge(w, pushed[0]["pr"], "squash", delete=False)
    other = w.tmp / "other"
    git(w.tmp, "clone", "-q", w.forge.url("o/r", token=w.forge.token), str(other))
    (other / "d.txt").write_text("someone's\n")
    git(other, "add", "d.txt")
    git(other, "commit", "-q", "-m", "someone's change on main")
    git(other, "push", "-q", "origin", "HEAD:main")
    tip = w.remote_sha("main")
    out = _sync(w)
    s2 = out["stack"]["slices"][1]
    assert git(w.repo, "rev-parse", f"{s2['head']}^").strip() == tip
    _no_empty_commit(w, tip, out["stack"]["slices"][2]["head"])
    assert len(git(w.repo, "rev-list", f"{tip}..{out['stack']['slices'][2]['head']}").split()) == 2


def test_a_pull_request_closed_on_the_forge_leaves_the_stack(w: World) -> None:
    issue = w.gh("repos/o/r/issues", "-X", "POST", body={"title": "parent", "body": "."})
    _three(w, issue=issue["number"])
    s1, s2, s3 = w.lk("push", "demo")["stack"]["slices"]
    w.gh(f"repos/o/r/pulls/{s2['pr']}", "-X", "PATCH", body={"state": "closed"})
    out = _sync(w)
    assert [(f["slice"], f["state"]) for f in out["followed"]] == [("s2", "closed")]
    assert out["moved"] == ["s3"]
    got = {s["id"]: s for s in out["stack"]["slices"]}
    assert got["s2"]["closed"] and not got["s2"]["merged"]
    # s3 now sits on s1 without s2's change, verified there.
    assert got["s3"]["fork"] == got["s1"]["head"] == s1["head"]
    assert git(w.repo, "rev-parse", f"{got['s3']['head']}^").strip() == s1["head"]
    names = git(w.repo, "ls-tree", "--name-only", got["s3"]["head"]).split()
    assert "b.txt" not in names and "c.txt" in names
    assert got["s3"]["evidence"]["verify"]["tree"] == got["s3"]["tree"]
    # Closed nothing else, reopened nothing, left the closed slice's branch alone.
    pulls = {s["id"]: w.gh(f"repos/o/r/pulls/{s['pr']}") for s in (s1, s2, s3)}
    assert [pulls[k]["state"] for k in ("s1", "s2", "s3")] == ["open", "closed", "open"]
    assert pulls["s3"]["base"]["ref"] == s1["branch"]
    assert w.remote_sha(s2["branch"]) == s2["head"]
    assert w.remote_sha(s3["branch"]) == got["s3"]["head"]
    assert w.gh(f"repos/o/r/issues/{issue['number']}")["state"] == "open"
    assert f"Closes #{issue['number']}" in pulls["s3"]["body"]


def test_a_head_branch_deleted_on_the_forge_closes_its_slice_only(w: World) -> None:
    """s3's branch deleted in the web page: the forge closes its pull request; sync takes
    s3 out of the stack and moves nothing else."""
    _three(w)
    s1, s2, s3 = w.lk("push", "demo")["stack"]["slices"]
    w.gh(f"repos/o/r/git/refs/heads/{s3['branch']}", "-X", "DELETE")
    out = _sync(w)
    assert [(f["slice"], f["state"]) for f in out["followed"]] == [("s3", "closed")]
    assert out["moved"] == [] and out["pushed"] == []
    assert [w.gh(f"repos/o/r/pulls/{s['pr']}")["state"] for s in (s1, s2)] == ["open", "open"]
    assert w.remote_sha(s2["branch"]) == s2["head"]


def test_a_branch_someone_else_pushed_is_not_overwritten(w: World) -> None:
    _three(w)
    s1, s2, s3 = w.lk("push", "demo")["stack"]["slices"]
    other = w.tmp / "other"
    git(w.tmp, "clone", "-q", w.forge.url("o/r", token=w.forge.token), str(other))
    git(other, "checkout", "-q", s2["branch"])
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", "theirs.txt")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", s2["branch"])
    theirs = git(other, "rev-parse", "HEAD").strip()
    _web_merge(w, s1["pr"], "squash", delete=False)  # something for sync to do
    before = git(w.repo, "rev-parse", "refs/loopkit/stack/demo").strip()
    said = _sync(w, code=40)["stderr"]
    lines = [line for line in said.splitlines() if line.strip()]
    assert len(lines) == 1 and s2["branch"] in lines[0] and "someone else" in lines[0], said
    # Theirs kept, nothing pushed, the stack as it was (the refusal noted, nothing moved).
    assert w.remote_sha(s2["branch"]) == theirs
    assert w.remote_sha(s3["branch"]) == s3["head"]
    after = w.lk("show", "demo")["stack"]
    assert [s["head"] for s in after["slices"]] == [s1["head"], s2["head"], s3["head"]]
    assert not any(s["merged"] for s in after["slices"])
    assert [(r["slice"], r["step"]) for r in after["returned"]] == [("s2", "restack")]
    assert git(w.repo, "rev-parse", "refs/loopkit/stack/demo^").strip() == before
    assert w.gh(f"repos/o/r/pulls/{s3['pr']}")["base"]["ref"] == s2["branch"]


def test_restack_drops_a_slice_main_already_holds(w: World) -> None:
    """No pull request to ask: the bottom slice's change cherry-picked onto main by hand;
    the restack finds it there (git alone) and does not replay it as an empty commit."""
    heads = _three(w)
    git(w.repo, "checkout", "-q", "--detach", f"{heads['s1']}~1")
    w.commit("d.txt", "someone's\n")
    git(w.repo, "cherry-pick", heads["s1"])
    git(w.repo, "push", "-q", w.forge.url("o/r", token=w.forge.token), "HEAD:main")
    tip = w.remote_sha("main")
    out = w.lk("restack", "demo", "--contract", str(w.contract))
    assert [(f["slice"], f["state"]) for f in out["followed"]] == [("s1", "merged")]
    out = w.lk("show", "demo")["stack"]
    s1, s2, s3 = out["slices"]
    assert s1["merged"] == tip
    assert git(w.repo, "rev-parse", f"{s2['head']}^").strip() == tip
    _no_empty_commit(w, tip, s3["head"])


def test_a_pull_request_merged_into_the_slice_below_is_refused(w: World) -> None:
    """#2 merged on the forge into s1's branch (its base then), not main: s1's branch
    moved under the stack and main holds nothing of it; sync refuses, moves nothing."""
    _three(w)
    s1, s2, s3 = w.lk("push", "demo")["stack"]["slices"]
    _web_merge(w, s2["pr"], "merge", delete=False)
    before = w.lk("show", "demo")["stack"]["slices"]
    said = _sync(w, code=40)["stderr"]
    lines = [line for line in said.splitlines() if line.strip()]
    assert len(lines) == 1 and s1["branch"] in lines[0] and "nothing moved" in lines[0]
    assert w.lk("show", "demo")["stack"]["slices"] == before
    assert w.remote_sha(s3["branch"]) == s3["head"]
    assert w.gh(f"repos/o/r/pulls/{s3['pr']}")["base"]["ref"] == s2["branch"]
