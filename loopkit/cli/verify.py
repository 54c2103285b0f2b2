"""lk-verify: run the acceptance checks and record evidence bound to the working tree.

Usage:  lk-verify [--contract loop.yaml] [--only NAME ...] [--fail-fast] [--in-place]
                  [--summary]      (a commit hook: a summary for a person, the document
                                    into the state folder)
                  [--ratchet]      (a commit hook on a suite red at HEAD: block only
                                    what this change makes worse, per test where the
                                    check gives per-test results)
        ... | lk-verify | ...        (adds "verify" to the piped attempt document)

        With a piped attempt (a loop) the checks run in a clean room: a checkout of
        exactly the tree lk-diff checked (diff.tree; without one, the working tree's)
        outside the repository, where no ignored file takes part (docs/evidence.md).
        Alone (a commit hook) they run in place.

Input:  an attempt document on stdin when piped (optional; a terminal is never read).
        The contract is --contract, else the piped document's, else ./loop.yaml.
Output: one JSON line on stdout: the attempt document with "verify" added, or the verify
        section alone ({"kind": "loopkit/verify", ...}) when nothing is piped. Each
        check's full output is in the log named by checks[].log (under .loopkit/).
        Progress goes to stderr: a live line on a terminal, else a line as each check
        starts and ends.
        [--attest]       (CI, a pre-push hook: HEAD's signed statement must hold
                          first; lk attest verify's codes 60-66 refuse it)
Exit codes: 0 every check passed; 1 a check failed (or timed out); 3 bad input;
        4 not a git repository; 60-66 (--attest) HEAD's statement does not hold.
"""

from __future__ import annotations

import click

from loopkit.cli._entry import command
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    """\b
Exit codes:
  0   every check passed
  1   a check failed or timed out (the evidence is still printed)
  60-66  --attest: HEAD's signed statement does not hold (lk attest verify --help)
"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@click.option("--contract", "contract_path", metavar="FILE", help="The loop contract (loop.yaml).")
@click.option("--only", multiple=True, metavar="NAME", help="Run only the check NAME (repeatable).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failing check.")
@click.option(
    "--clean-room/--in-place",
    "clean_room",
    default=None,
    help="Run the checks in a clean checkout of exactly the working tree's tree (the "
    "default when an attempt document is piped: what a recipe commits), or in the working "
    "tree itself (the default alone, e.g. in a commit hook).",
)
@click.option(
    "--summary",
    is_flag=True,
    help="For a person (a commit hook): a short summary on stdout -- each check, and the "
    "tail of a failing one -- and the JSON document into the state folder (verify-last.json).",
)
@click.option(
    "--ratchet",
    is_flag=True,
    help="Alone (a commit hook on a project red at HEAD): block only what this change "
    "makes worse than HEAD -- a check that passed there, a test that passed there (per "
    "test where the check gives per-test results) -- not what already failed. HEAD's "
    "results are run once per tree in the clean room and kept.",
)
@click.option(
    "--attest",
    is_flag=True,
    help="First require HEAD's signed statement to hold (lk attest verify HEAD; a CI job "
    "or a pre-push hook): an unattested commit is refused with its code (60-66) before "
    "any check runs.",
)
def main(
    contract_path: str | None,
    only: tuple[str, ...],
    fail_fast: bool,
    clean_room: bool | None,
    summary: bool,
    ratchet: bool,
    attest: bool,
) -> int:
    """Run the contract's acceptance checks in order, each in the repository root with its
    timeout, and record per check its exit code, duration, output tail, output sha256 and
    failure fingerprint, with the tree hash before and after the checks."""
    from loopkit import stages

    return stages.verify(
        contract_path=contract_path,
        only=only,
        fail_fast=fail_fast,
        clean_room=clean_room,
        summary=summary,
        ratchet=ratchet,
        attest=attest,
    )
