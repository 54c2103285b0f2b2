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

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
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
@declared(options.VERIFY)
def main(**kw: Any) -> int:
    """Run the contract's acceptance checks in order, each in the repository root with its
    timeout, and record per check its exit code, duration, output tail, output sha256 and
    failure fingerprint, with the tree hash before and after the checks."""
    from loopkit import stages  # not at the top: --help loads none of it

    return stages.verify(**kw)
