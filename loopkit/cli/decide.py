"""lk-decide: the controller -- classify, compare with history, apply budgets, decide, record.

Usage:  lk-verify | lk-decide [--contract F] [--ledger PATH] [--trigger manual|schedule|event]
        lk-plan next TASKS.md | lk-decide --admit      (may the next run start?)
        lk-decide --replay LEDGER                      (re-derive every recorded decision)

Input:  the attempt document on stdin (task, contract, run, diff, verify, judge as present);
        the contract from --contract, else the document's, else ./loop.yaml.
Output: the attempt document with ``decision`` added (--admit: with ``admission`` added,
        and ``decision`` when refused), one JSON line; --replay prints a loopkit/replay
        document. One ledger record is appended per decision (and per admission).
Exit codes: 0 complete, 10 retry, 11 replan, 20 blocked, 21 failed, 22 budget exhausted,
        30 cancelled; --admit: 0 admitted, 22 exhausted, 20 blocked until a usage limit
        resets, 30 cancelled; --replay: 0 all agree, 1 not.
"""

from __future__ import annotations

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    """\b
Exit codes of lk-decide (the decision):
  0   complete          verified on the tree on disk, changed, in scope (goal: grounded MET)
  10  retry             with feedback (a transient failure carries backoff_s)
  11  replan            the same failure came back: the hypothesis failed
  20  blocked           needs a person (permission, auth, usage limit until resume_after)
  21  failed            park the task
  22  budget exhausted  (--admit: the next run may not start; a checkpoint is written)
  30  cancelled         `lk cancel` was requested
--admit exits 0 admitted, 22 exhausted, 20 blocked until resume_after, 30 cancelled.
--replay exits 0 when every decision re-derives, 1 when any disagrees.

"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@declared(options.DECIDE)
def main(**kw: Any) -> int:
    """Decide an attempt's next step from its evidence and the task's history.

    Reads the attempt document on stdin, prints it with a `decision` section and exits
    with the decision's code. Every decision is appended to the ledger with the exact
    inputs it was derived from, so `--replay` can check it later.
    """
    from loopkit import stages  # not at the top: --help loads none of it

    return stages.decide(**kw)
