"""Pushing several refs at once: all or none (``--atomic``), each with a lease on the
value this stack last pushed there (``--force-with-lease=REF:EXPECTED``; an empty
expectation: the ref must not exist yet). A ref someone else moved since is never
overwritten; the push is refused whole and nothing moves.

The forge's token reaches git for this one call only, as an HTTP header in git's
environment (``GIT_CONFIG_COUNT``): never in ``.git/config``, where a worker running
later in the same checkout could read it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopkit import git
from loopkit.digest import sha256
from loopkit.forge.stack import Refused


@dataclass(frozen=True)
class Update:
    ref: str  # the remote's ref (refs/heads/B, refs/loopkit/...)
    new: str  # the commit it gets
    expected: str  # what it must hold now ("" = must not exist)


def token_env() -> dict[str, str]:
    """git's environment carrying the forge's token as a basic-auth header, if one is set
    (LOOPKIT_FORGE_TOKEN, else GH_TOKEN, GITHUB_TOKEN, GITLAB_TOKEN)."""
    for name in ("LOOPKIT_FORGE_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN"):
        token = os.environ.get(name)
        if token:
            break
    else:
        return {}
    pair = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    n = int(os.environ.get("GIT_CONFIG_COUNT") or 0)
    return {
        "GIT_CONFIG_COUNT": str(n + 1),
        f"GIT_CONFIG_KEY_{n}": "http.extraHeader",
        f"GIT_CONFIG_VALUE_{n}": f"Authorization: Basic {pair}",
        "GIT_TERMINAL_PROMPT": "0",
    }


def push(root: Path, remote: str, updates: Sequence[Update]) -> None:
    """All of ``updates`` or none; Refused names the refs whose lease was lost."""
    if not updates:
        return
    args = ["push", "--atomic", "--porcelain", "--no-verify", remote]
    for u in updates:
        args.append(f"--force-with-lease={u.ref}:{u.expected}")
    # No "+": a forced refspec would override its lease; the lease alone allows a rewrite.
    args += [f"{u.new}:{u.ref}" for u in updates]
    done = git.git(args, cwd=root, env=token_env(), check=False)
    if done.exit_code == 0:
        return
    said = (done.stdout + done.stderr).decode("utf-8", "replace")
    stale = [
        line.split("\t")[1].split(":")[-1]
        for line in said.splitlines()
        if line.startswith("!") and "stale info" in line and "\t" in line
    ]
    if stale:
        raise Refused(
            f"push to {remote} refused, nothing moved: {', '.join(stale)} changed on the "
            "remote since this stack last pushed it (the lease was lost)"
        )
    last = [ln for ln in said.strip().splitlines() if ln.strip()][-1:] or ["?"]
    raise Refused(f"push to {remote} refused, nothing moved: {last[0].strip()}")


def fetch(root: Path, remote: str, branch: str) -> str:
    """The remote's ``branch`` now (fetched into refs/remotes/REMOTE/BRANCH)."""
    name = remote
    if git.ref_component(remote) != remote or "/" in remote:  # a URL or a path
        name = "loopkit-" + sha256(remote.encode()).hexdigest()[:12]
    local = f"refs/remotes/{name}/{branch}"
    git.out(
        ["fetch", "-q", "--no-tags", remote, f"+refs/heads/{branch}:{local}"],
        cwd=root,
        env=token_env(),
    )
    return git.out(["rev-parse", f"{local}^{{commit}}"], cwd=root)
