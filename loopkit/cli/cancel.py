"""lk cancel: persist (or lift) the intent to stop the loop.

Usage:  lk cancel [--reason TEXT]     every later lk-decide answers cancelled (30); a
                                      running lk-invoke stops its worker and a running
                                      lk-verify ends its check at once
        lk cancel --clear             lift the intent
        lk cancel --status            print the intent, if any

Input:  none (the repository's state folder: .loopkit/, or the state_dir ./loop.yaml names).
Output: one JSON line: {"kind": "loopkit/cancel", "version": 1, "requested": bool, ...}
        (schemas/cancel.json).
Exit codes: 0 done; 1 --clear or --status found no intent; 4 not in a git repository.
"""

from __future__ import annotations

import click

from loopkit.cli._entry import command, say
from loopkit.document import emit
from loopkit.exitcodes import SHARED_HELP
from loopkit.state import cancel
from loopkit.workspace import for_state_only

EPILOG = (
    "\b\nExit codes of lk cancel:\n  0   requested, cleared, or (--status) requested\n"
    "  1   --clear or --status found no cancellation\n"
    "  4   not in a git repository\n\n" + SHARED_HELP
)


@command(epilog=EPILOG)
@click.option("--reason", metavar="TEXT", help="Why the loop should stop (recorded).")
@click.option("--clear", is_flag=True, help="Lift a persisted cancellation.")
@click.option("--status", is_flag=True, help="Only show whether cancellation is requested.")
def main(reason: str | None, clear: bool, status: bool) -> int:
    """Ask every loop in this repository to stop at its next boundary (or lift that)."""

    state = for_state_only().state
    body: dict[str, object] = {"kind": "loopkit/cancel", "version": 1}
    if clear:
        lifted = cancel.clear(state)
        body.update(requested=False, cleared=lifted)
        emit(body)
        say("lk cancel", "cleared" if lifted else "nothing to clear")
        return 0 if lifted else 1
    if status:
        intent = cancel.requested(state)
        body.update(requested=intent is not None, intent=intent)
        emit(body)
        return 0 if intent else 1
    intent = cancel.request(state, reason=reason)
    body.update(requested=True, intent=intent)
    emit(body)
    say("lk cancel", f"requested ({intent['reason']}); lift with `lk cancel --clear`")
    return 0
