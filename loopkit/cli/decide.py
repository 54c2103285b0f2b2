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

import click

from loopkit.cli._entry import command
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
@click.option("--contract", "contract_path", metavar="F", help="The loop contract (loop.yaml).")
@click.option(
    "--ledger", "ledger_path", metavar="PATH", help="Ledger file [.loopkit/ledger.jsonl]."
)
@click.option(
    "--trigger",
    type=click.Choice(["manual", "schedule", "event"]),
    help="What started this loop [detected from CI variables, else manual].",
)
@click.option("--admit", is_flag=True, help="Admission: reserve the next run's share (0) or 22.")
@click.option(
    "--replay", "replay_path", metavar="LEDGER", help="Re-derive every recorded decision."
)
@click.option(
    "--interrupted",
    "interrupted",
    metavar="TASK",
    help="Record that TASK's attempt never reached a decision (its loop died); the recipes "
    "call it when they recover at the next start.",
)
@click.option("--reason", metavar="TEXT", help="With --interrupted: what was found.")
def main(
    contract_path: str | None,
    ledger_path: str | None,
    trigger: str | None,
    admit: bool,
    replay_path: str | None,
    interrupted: str | None,
    reason: str | None,
) -> int:
    """Decide an attempt's next step from its evidence and the task's history.

    Reads the attempt document on stdin, prints it with a `decision` section and exits
    with the decision's code. Every decision is appended to the ledger with the exact
    inputs it was derived from, so `--replay` can check it later.
    """
    from loopkit import stages

    return stages.decide(
        contract_path=contract_path,
        ledger_path=ledger_path,
        trigger=trigger,
        admit=admit,
        replay_path=replay_path,
        interrupted=interrupted,
        reason=reason,
    )
