"""Statements kept with git: one DSSE envelope per commit, as the note of that commit under
``refs/notes/loopkit-attest``. The ref is pushed and fetched like any other (``lk stack
push`` carries it); a rebase or an amend makes new commits the notes do not follow unless
``notes.rewriteRef`` says so -- and then ``lk attest verify`` tells a moved statement
from its own (docs/attest.md)."""

from __future__ import annotations

from pathlib import Path

from loopkit import git

REF = "refs/notes/loopkit-attest"


def put(root: Path, commit: str, envelope: bytes) -> str:
    """The envelope as ``commit``'s note, byte for byte; its blob's id."""
    blob = git.out(["hash-object", "-w", "--stdin"], cwd=root, input=envelope)
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
    done = git.git(["notes", "--ref", REF, "list", commit], cwd=root, check=False)
    blob = done.stdout.decode().strip()
    if done.exit_code != 0 or not blob:
        return None
    return git.git(["cat-file", "blob", blob], cwd=root).stdout
