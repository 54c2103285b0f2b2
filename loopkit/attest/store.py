"""Statements kept with git: one DSSE envelope per commit, as the note of that commit under
``refs/notes/loopkit-attest``. The ref is pushed and fetched like any other (``lk stack
push`` carries it); a rebase or an amend makes new commits the notes do not follow unless
``notes.rewriteRef`` says so -- and then ``lk attest verify`` tells a moved statement
from its own (docs/attest.md)."""

from __future__ import annotations

from pathlib import Path

from loopkit import git, gitstore

REF = "refs/notes/loopkit-attest"


def put(root: Path, commit: str, envelope: bytes) -> str:
    """The envelope as ``commit``'s note, byte for byte; its blob's id."""
    blob = gitstore.write_blob(root, envelope)
    if gitstore.add_note(root, REF, commit, blob):  # no git started where git would only do that
        return blob
    for _ in range(3):  # another landing may have moved the notes ref meanwhile
        done = git.git(
            ["notes", "--ref", REF, "add", "-f", "-C", blob, commit], cwd=root, check=False
        )
        if done.exit_code == 0:
            return blob
    git.out(["notes", "--ref", REF, "add", "-f", "-C", blob, commit], cwd=root)
    return blob


def get(root: Path, commit: str) -> bytes | None:
    """``commit``'s envelope, or None."""
    done = git.git(["notes", "--ref", REF, "show", commit], cwd=root, check=False)
    return done.stdout if done.exit_code == 0 and done.stdout else None


def take(root: Path, source: str, *, env: dict[str, str] | None = None) -> bool:
    """The statements ``source`` (a remote, a path, a bundle) holds, merged into this
    repository's: each commit's note is its own; where both hold one, this one's stays.
    False when ``source`` has none or they cannot be merged."""
    theirs = REF + "-incoming"
    fetch = ["fetch", "-q", "--no-tags", source, f"+{REF}:{theirs}"]
    if git.git(fetch, cwd=root, env=env, check=False).exit_code != 0:
        return False
    merge = ["notes", "--ref", REF, "merge", "-q", "-s", "ours", theirs]
    merged = git.git(merge, cwd=root, check=False).exit_code == 0
    git.git(["update-ref", "-d", theirs], cwd=root, check=False)
    return merged


def publish(root: Path, remote: str, *, env: dict[str, str]) -> bool:
    """The notes ref pushed to ``remote`` as a fast-forward (never forced: statements
    others pushed are kept). When the remote's holds notes this one lacks, they are
    merged first (``take``) and the push made again. False when there is nothing to push
    or the remote refused."""
    if not git.git(["rev-parse", "-q", "--verify", REF], cwd=root, check=False).stdout:
        return False
    for _ in range(3):
        args = ["push", "-q", "--no-verify", remote, f"{REF}:{REF}"]
        if git.git(args, cwd=root, env=env, check=False).exit_code == 0:
            return True
        if not take(root, remote, env=env):
            return False
    return False
