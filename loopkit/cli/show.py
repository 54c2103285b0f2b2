"""lk show: one task's story -- its attempts, where each is saved, what memory says.

Usage:  lk show TASK [--json] [--ledger PATH]

For each attempt: the decision, its failure class and reason, duration and cost. Then
the trees saved under refs/loopkit/<task>/ (every attempt a recipe reverted or parked),
each with the command that restores it (`git cherry-pick --no-commit REF`: what that
attempt changed, applied to the tree as it is now and left uncommitted -- later work stays),
and the sections of the memory file about the task.

Input:  the ledger (the state folder's ledger.jsonl, or --ledger), git refs, the memory
        file the contract names.
Output: the story for a person on stdout; with --json one document (kind loopkit/show).
Exit codes: 0 shown; 1 the ledger has no attempt of TASK and no tree is saved for it;
        4 not in a git repository.
"""

from __future__ import annotations

from pathlib import Path

import click

from loopkit import git
from loopkit.cli._entry import command
from loopkit.decision import ledger
from loopkit.document import emit
from loopkit.exitcodes import SHARED_HELP
from loopkit.views import report
from loopkit.workspace import for_state_only

EPILOG = "\b\nExit codes of lk show:\n  0   shown\n  1   nothing known about TASK\n\n" + SHARED_HELP


@command(epilog=EPILOG)
@click.argument("task_id", metavar="TASK")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
@click.option("--ledger", "ledger_path", metavar="PATH", help="Ledger file [state folder].")
def main(task_id: str, as_json: bool, ledger_path: str | None) -> int:
    """Show TASK's attempts, its saved trees and how to restore them, and its memory."""

    ws = for_state_only()
    path = Path(ledger_path) if ledger_path else ws.state / ledger.DEFAULT_NAME
    records, _ = ledger.read(path) if path.exists() else ([], [])
    refs = git.refs_under(ws.root, f"refs/loopkit/{git.ref_component(task_id)}/")
    memory_path = ws.memory_file()
    try:
        memory = memory_path.read_text(encoding="utf-8") if memory_path else None
    except OSError:
        memory = None
    story = report.task_story([r for _, r in records], task_id, refs=refs, memory=memory)
    if as_json:
        emit(story, schema_name="show")
    else:
        click.echo(report.story_text(story), nl=False)
    return 0 if story["attempts"] or story["saved"] else 1
