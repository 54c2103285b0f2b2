"""lk status: what is running now -- read from the state folder, no daemon.

Usage:  lk status [--json] [--watch [SECONDS]]

The newest run's task, round and stage, how long it has been going, the worker's last
actions (from its stream as it is written), and the spend so far (the ledger's finished
attempts plus the live run's tokens and cost). Whether a loop is running comes from its
lock (.git/loopkit/loop.lock, with the loop's pid).

Output: the status for a person; with --json one document (schemas/status.json).
        --watch redraws it every SECONDS (default 2) until Ctrl-C.
Exit codes: 0 shown (a loop runs, or ran); 1 no loop has run here; 4 not in a git
        repository; 130 interrupted (--watch ends this way).
"""

from __future__ import annotations

import time

import click

from loopkit.cli._entry import command
from loopkit.document import emit
from loopkit.exitcodes import SHARED_HELP
from loopkit.views import status as core
from loopkit.workspace import for_state_only

EPILOG = "\b\nExit codes of lk status:\n  0   shown\n  1   no loop has run here\n\n" + SHARED_HELP


@command(epilog=EPILOG)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
@click.option(
    "--watch",
    type=click.FloatRange(min=0.2),
    is_flag=False,
    flag_value=2.0,
    default=None,
    metavar="[SECONDS]",
    help="Redraw every SECONDS (default 2) until Ctrl-C.",
)
def main(as_json: bool, watch: float | None) -> int:
    """Show what is running now: task, attempt, stage, elapsed, last actions, spend."""

    ws = for_state_only()
    state = ws.state
    while True:
        body = core.gather(state, root=ws.root)
        if as_json:
            emit(body, schema_name="status")
        else:
            if watch is not None:
                click.echo("\x1b[H\x1b[2J", nl=False)
            click.echo(core.text(body), nl=False)
        if watch is None:
            return 0 if body.get("task") else 1
        time.sleep(watch)
