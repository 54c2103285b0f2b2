"""lk attest: the signed statement of what verified a landed commit (docs/attest.md).

Usage:  lk attest verify [REV | A..B]... [--allowed-signers FILE] [--contract PATH]
        lk attest show [REV]

Each landing (lk task land, lk queue) signs an in-toto statement (schemas/
attest-statement.json) in a DSSE envelope and keeps it as the landed commit's git note
under refs/notes/loopkit-attest. verify checks, for each commit named (default HEAD):
the signature against the allowed signers (--allowed-signers, else git's
gpg.ssh.allowedSignersFile, else the repository key's file in the git folder), that the
statement was made in this repository, names this commit and its tree, and that its
checks are the contract's criteria at that commit, each passed (--contract, a path in
the commit's tree; else the one the statement names; else loop.yaml).

Output: verify prints one JSON line (schemas/attest-verify.json); each failure's line
goes to stderr, and the first one's code is the exit status. show prints the statement.
"""

from __future__ import annotations

import json

import click

from loopkit import git
from loopkit.attest import check, store
from loopkit.cli._entry import group, say
from loopkit.errors import BadInput
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    "\b\nExit codes of lk attest verify:\n"
    "  0   every commit's statement holds\n"
    "  60  no statement (where one is required)\n"
    "  61  signed by a key no allowed signer holds\n"
    "  62  the signature does not cover the statement: it changed after signing\n"
    "  63  the statement was made in another repository (replayed)\n"
    "  64  the commit's tree is not the tree the checks ran on\n"
    "  65  the statement is another commit's with the same tree (moved, amended, squashed)\n"
    "  66  its checks are not the contract's criteria at that commit, each passed\n\n" + SHARED_HELP
)


@group(epilog=EPILOG)
def main() -> None:
    """Verify (or show) the signed statement of what verified a landed commit."""


@main.command(epilog=EPILOG)
@click.argument("revs", nargs=-1, metavar="[REV | A..B]...")
@click.option(
    "--allowed-signers",
    metavar="FILE",
    help="The SSH allowed signers file (default: gpg.ssh.allowedSignersFile, else the "
    "repository key's, in the git folder).",
)
@click.option(
    "--contract",
    metavar="PATH",
    help="The contract (a path in the commit's tree) whose criteria the statement's checks "
    "must be (default: the one the statement names, else loop.yaml).",
)
def verify(revs: tuple[str, ...], allowed_signers: str | None, contract: str | None) -> int:
    """Check each commit's statement: signer, repository, tree, commit, checks."""
    root = git.locate(".").root
    results = check.verify(
        root, list(revs) or ["HEAD"], allowed_signers=allowed_signers, contract=contract
    )
    doc = check.document(results)
    click.echo(check.as_text(doc))
    for r in results:
        if r.problem:
            say("lk attest", r.problem)
    return int(doc["exit_code"])


@main.command(epilog=SHARED_HELP)
@click.argument("rev", default="HEAD", metavar="[REV]")
def show(rev: str) -> int:
    """Print REV's statement (the envelope's payload), unverified."""
    root = git.locate(".").root
    raw = store.get(root, check.commit_of(root, rev))
    if raw is None:
        raise BadInput(rev, f"no statement ({store.REF})")
    _, payload, _ = check.opened(raw)
    try:
        shown = json.dumps(json.loads(payload), indent=2)
    except ValueError as e:
        raise check.Unreadable(f"{rev}: the payload is not JSON: {e}") from None
    click.echo(shown)
    return 0
