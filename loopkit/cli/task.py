"""lk task: the ratchet's transactions, for loops in any language.

Usage:  lk task begin [DOC | --task-id ID --task TEXT [--goal]] [--tasks TASKS.md]
                      [--allow-dirty] [--reset-path PATH]... [--owner PID] [--reproduce] [--attempt]
        lk task save LABEL            lk task land [DOC] [--label N] [--stat-cache]
        lk task park [DOC] [--label N] [--outcome O]     lk task cancel [DOC] [--label N]
        lk task end [--owner PID]     lk task note TEXT

Input:  DOC (a file, or stdin when piped): the start document (begin: lk-plan next's) or
        the decided attempt document (land, park, cancel).
Output: one JSON line (schemas/task-step.json): {"kind": "loopkit/task-step",
        "version": 1, "step": ..., "task": ..., ...}; with --shell, LK_NAME=VALUE lines a
        shell can eval instead.

begin takes the work tree's one-loop lock (in its git folder, whatever the state folder;
a lock whose owner is gone is taken over), finishes whatever a loop that stopped left
half done (a landing, a park, a mark; an interrupted attempt is saved under
refs/loopkit/<task>/interrupted and the tree brought back), and records where the task
begins. Without a document it does the first two only (a loop over many tasks). land
commits exactly verify.tree on the task's start (commit-tree, no hook, a guarded
update-ref), brings index and work tree to it, marks the task done and commits the mark.
park saves the tree, reverts, resets the reset paths, writes the retrospective, marks the
task parked and commits both. end releases the lock; a task still open has its tree saved
and is finished by the next begin. Every step can be stopped at any point (kill -9
included): the next begin finishes it.

Exit codes: 0 done; 40 a landing or a park refused (the branch moved since the task
began, the commit failed, no verified tree): nothing committed or reverted, the tree saved
under refs/loopkit/ (the ref is in the output); 3 bad input (not a decided document);
4 environment (another loop holds the lock, uncommitted changes without --allow-dirty,
an unsafe reset path, no task begun, a full disk, a path or ref that cannot be written:
one line names it; the plain rerun finishes once the cause is gone).
"""

from __future__ import annotations

from loopkit.cli import options
from loopkit.cli import transactions as t
from loopkit.cli._entry import declared, group
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    "\b\nExit codes of lk task:\n  0   done\n"
    "  40  a landing or a park refused (the branch moved, the commit failed): nothing\n"
    "      committed or reverted, the work tree saved under refs/loopkit/\n"
    "  3   bad input (not a decided document)\n"
    "  4   another loop holds the lock; uncommitted changes (without --allow-dirty); an\n"
    "      unsafe reset path; a full disk or an unwritable path or ref (named)\n\n" + SHARED_HELP
)


@group(epilog=EPILOG)
def main() -> None:
    """The ratchet's transactions: begin a task, save a tree, land or park an attempt, end."""


#: ``lk task VERB``: its help; the step is loopkit.cli.transactions.VERB, its parameters
#: loopkit.cli.options.TASK[VERB].
STEPS = {
    "begin": """Take the lock, finish what a stopped loop left, record where the task begins.

    The start document is kept as <state>/runs/<task>/<run>/start.json (run_dir, start).
    Reset paths come from --reset-path and $RESET_PATHS (split on blanks, never globbed).
    A loop that starts loops of its own exports LK_LOCK_OWNER=its pid: they work under its
    lock. When the task given is the one a stopped loop left and begin finished it,
    "finished" (LK_FINISHED) is the exit code that loop would have given.

    --attempt: round 1 follows in the same process, as `lk attempt --settle --keep
    <run_dir>/1 --base <diff_base> --owner PID < <start>` would run it (not when begin
    finished a stopped loop's task): its fields or document follow begin's and the exit
    is the attempt's, so a loop saves a Python start per task.

    --reproduce: round 0 first, the checks on the untouched tree with no worker: passing,
    a note goes into the start document (no attempt spent); failing, lk-decide records the
    failure and its step is taken (saved as <task>/0, or parked). With --shell, LK_ROUND
    names the last round that ran; the exit is its decision's.
    """,
    "save": """Save the work tree as it stands under refs/loopkit/<task>/<LABEL>[-N].

    With --doc and --shell, the decision's fields a loop acts on follow (LK_DOC_OUTCOME,
    LK_DOC_ATTEMPT, LK_DOC_REASON, LK_DOC_BACKOFF, LK_DOC_SESSION, ...: as lk attempt
    --shell prints them).""",
    "land": "Commit exactly the tree a complete decision's checks ran on; mark the task done.",
    "park": "Save, revert, reset, write the retrospective, mark parked, commit the record.",
    "cancel": "Save the tree under refs/loopkit/<task>/cancelled and leave it as it is.",
    "note": "Add TEXT to the task's notes in its start document (the handoff carries it).",
    "end": "Release the lock; a task still open is saved and kept for the next begin.",
}

for _verb, _help in STEPS.items():
    main.command(_verb, help=_help, epilog=EPILOG)(declared(options.TASK[_verb])(getattr(t, _verb)))
