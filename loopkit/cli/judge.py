"""lk-judge: a read-only model judge for goals no command can check; grounded verdicts only.

Usage:  lk-judge [--contract F] [--goal TEXT] [--provider NAME] [--model M]
        lk-judge --transcript FILE [--goal TEXT] [--provider P]

Input:  an attempt document on stdin when one is piped (its task's GOAL text, its diff
        and verify sections go into the judge's prompt); the contract's ``judge`` section
        (provider, model, goal, timeout, max_turns) from --contract, the piped document
        or ./loop.yaml. ``--transcript`` judges a saved judge stream and runs nothing.
Output: one JSON line: the attempt document with its ``judge`` section added, or the
        section alone (kind ``loopkit/judge``) when nothing was piped.
        Fields: verdict MET|NOT_MET, grounded, trusted, files_read, feedback, provider,
        reason (null | not_met | ungrounded | no_verdict | malformed_verdict | truncated |
        run_failed | tree_changed | not_read_only), read_only {tree_before, tree_after,
        changed, changes}, ...
Exit codes: 0 MET and grounded; 1 NOT MET, ungrounded, no verdict, failed run or a tree
        the judge changed (the verdict is still printed); 3 bad input; 4 provider CLI
        missing or not a git repository.
"""

from __future__ import annotations

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP
from loopkit.worker import providers

EPILOG = (
    """\b
Exit codes:
  0   MET, and grounded (the judge opened files) and read-only (tree unchanged)
  1   NOT MET, ungrounded MET, no VERDICT line, a failed or cut run, or a
      judge that changed the tree (the judge section is printed all the same)
"""
    + "\n"
    + SHARED_HELP
)


@command(epilog=EPILOG)
@declared(options.JUDGE, providers=providers.names())
def main(**kw: Any) -> int:
    """Ask a read-only model whether a goal is met, and trust only a grounded MET.

    The judge must open the files it judges and end its reply with `VERDICT: MET` or
    `VERDICT: NOT MET`; the last VERDICT line decides, and anything else is NOT MET. A
    MET with no file read is ungrounded and counts as NOT MET. The working tree's hash
    is taken before and after: a judge that changed anything has its verdict refused.
    The judge's reasons, bounded, go into judge.feedback for the next attempt.
    """
    from loopkit import stages  # not at the top: --help loads none of it

    return stages.judge(**kw)
