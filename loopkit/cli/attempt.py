"""lk attempt: one whole attempt -- admission to decision -- in one process.

Usage:  lk attempt [--contract loop.yaml] [--base REF] [--resume ID] [--keep PREFIX]
                   [--shell] [--settle [--owner PID]] < doc.json

        The same as the pipe
          lk-decide --admit | lk-invoke | lk-diff --base REF | lk-verify [| lk-judge] | lk-decide
        stage for stage: each stage is that very command's code (loopkit.stages), run
        in this process on the document the stage before it left (handed on as a value,
        not printed and read back), so Python and loopkit start once instead of five or six times (and the `lk` console script runs it
        without loading click). lk-judge runs when the task is a GOAL whose checks passed.

Input:  an attempt document on stdin: a task (lk-plan next) or a decided attempt to retry.
Output: the last stage's document on stdout (the decided attempt; the admission document
        when admission refused). With --keep PREFIX every stage's document is also kept
        as PREFIX-admit.json, PREFIX-invoke.json, PREFIX-diff.json, PREFIX-verify.json,
        PREFIX-judge.json, PREFIX-decide.json, and its stderr (shown as it comes) as
        PREFIX-<stage>.err, and PREFIX-worker is written the moment the worker is about
        to start (a recovery charges an interrupted attempt only when its worker ran):
        what the recipes keep under .loopkit/runs/. With --shell,
        instead of the document, the fields the recipes act on, as shell assignments
        (LK_DOC_OUTCOME='retry' ..., as `lk task save --doc FILE --shell` prints them).
Settle: lk attempt --settle  then takes the ratchet's step the decision calls for, in the
        same process (no Python start of its own): complete lands (lk task land
        --stat-cache --end), retry and replan save the tree (lk task save), blocked,
        failed and exhausted park (lk task park --end), cancelled cancels (lk task
        cancel --end); --owner PID names the loop whose lock a last step releases. The
        step's result follows the document on stdout: its JSON line (schemas/
        task-step.json), or with --shell its LK_NAME=VALUE lines after the LK_DOC_* ones.
        The exit is the decision's once the step is done, the step's own (40, 3, 4)
        when it is refused or cannot run.
Exit codes: lk-decide's: 0 complete, 10 retry, 11 replan, 20 blocked, 21 failed, 22 budget
        exhausted, 30 cancelled -- admission's refusal (20, 22, 30) included, then nothing
        ran (no PREFIX-invoke.json). A stage that fails otherwise stops the attempt with
        its own code (2, 3, 4, 70, 130), the stage named on stderr. With --settle, lk
        task's: 40 the landing or park refused (the branch moved), 4 its environment.
"""

from __future__ import annotations

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    """\b
Exit codes (lk-decide's):
  0   complete           10  retry        11  replan
  20  blocked            21  failed       22  budget exhausted
  30  cancelled
  Admission refusing (20, 22, 30) runs nothing further.
  A stage failing otherwise stops the attempt with its own code.
  With --settle: 40 the landing or park refused (the branch moved).
"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@declared(options.ATTEMPT)
def main(**kw: Any) -> int:
    """Run one attempt, admission to decision, each stage the published command itself on
    the document the stage before printed; exit with the decision's code."""
    from loopkit.cli import transactions  # not at the top: --help loads none of it

    return transactions.attempt(**kw)
