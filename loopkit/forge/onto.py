"""Moving a slice onto a new parent by plumbing: ``git rebase --onto NEW FORK HEAD``
for a slice that is one commit, from the fork point the stack recorded.

A squash merge below a stack leaves the target with a commit that is none of the
slices' own, so git's own ancestry cannot tell where a slice above begins; the recorded
fork point can. The three-way merge is git's own (``merge-tree --write-tree``, merge-ort),
given its merge base by three throwaway commits -- the fork's tree as their root, the new
parent's and the slice's trees on top -- so no work tree or index is touched and git
before 2.40 (no ``--merge-base``) does the same.
"""

from __future__ import annotations

from pathlib import Path

from loopkit import git
from loopkit.forge.stack import Refused


def move(root: Path, *, fork: str, head: str, onto: str) -> str:
    """The slice ``fork..head`` replayed onto ``onto``: a new commit with the slice's
    message and author, ``onto`` its parent. ``head`` itself when nothing moves."""
    if fork == onto:
        return head
    base_tree = git.out(["rev-parse", f"{fork}^{{tree}}"], cwd=root)
    ours_tree = git.out(["rev-parse", f"{onto}^{{tree}}"], cwd=root)
    theirs_tree = git.out(["rev-parse", f"{head}^{{tree}}"], cwd=root)
    fixed = {
        "GIT_AUTHOR_NAME": "loopkit",
        "GIT_AUTHOR_EMAIL": "loopkit@localhost",
        "GIT_COMMITTER_NAME": "loopkit",
        "GIT_COMMITTER_EMAIL": "loopkit@localhost",
        "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
    }
    base = git.out(["commit-tree", base_tree, "-m", "fork"], cwd=root, env=fixed)
    ours = git.out(["commit-tree", ours_tree, "-p", base, "-m", "onto"], cwd=root, env=fixed)
    theirs = git.out(["commit-tree", theirs_tree, "-p", base, "-m", "slice"], cwd=root, env=fixed)
    done = git.git(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs],
        cwd=root,
        check=False,
    )
    lines = done.stdout.decode("utf-8", "surrogateescape").split("\n")
    if done.exit_code == 1:
        paths = ", ".join(p for p in lines[1:] if p) or "?"
        raise Refused(f"the slice does not apply on its new parent: conflict in {paths}")
    if done.exit_code != 0 or not git.is_object_id(lines[0].strip()):
        raise git.GitError(f"git merge-tree failed (exit {done.exit_code})")
    tree = lines[0].strip()
    # The slice's own author, date and message; only the parent and the tree are new.
    fmt = "%an%x00%ae%x00%aI%x00%B"
    an, ae, ad, message = git.out(["log", "-1", f"--format={fmt}", head], cwd=root).split("\0", 3)
    env = {"GIT_AUTHOR_NAME": an, "GIT_AUTHOR_EMAIL": ae, "GIT_AUTHOR_DATE": ad}
    return git.out(["commit-tree", tree, "-p", onto], cwd=root, env=env, input=message.encode())
