"""lk-plan mark: rewrite one task's line in TASKS.md."""

from __future__ import annotations

import click

from loopkit.cli.plan import SETTINGS, plan_say
from loopkit.plan.marking import commit_edit, prepare_mark
from loopkit.plan.reopening import reopen


@click.command("mark", context_settings=SETTINGS)
@click.argument("tasks_file", metavar="TASKS.md")
@click.option("--task", "task_id", required=True, metavar="ID", help="The task id.")
@click.option(
    "--status",
    required=True,
    type=click.Choice(["done", "parked", "open"]),
    help="The new status.",
)
@click.option(
    "--reason", metavar="TEXT", help="A short note kept on the line, e.g. why it was parked."
)
def mark_cmd(tasks_file: str, task_id: str, status: str, reason: str | None) -> int:
    """Rewrite one task's line in TASKS.md: [x] done, [!] parked, [ ] open.

    Every other byte of the file is kept -- but for the parent of a slice marked done last
    (marked done too; reopening or parking a slice reopens it), and an each: item, whose slices the
    first mark of one writes out before its end line. The write is atomic (temp file +
    rename) and is refused, exit 1, if that line changed between read and write.
    """
    edit = prepare_mark(tasks_file, task_id, status, reason=reason)
    if not edit.changed:
        plan_say(f"{task_id} is already {status} ({tasks_file} line {edit.line})")
        return 0
    commit_edit(edit)
    plan_say(f"marked {task_id} {status} ({tasks_file} line {edit.line})")
    if status == "open" and edit.old_status == "parked":
        _reopen(tasks_file, task_id, reason)
    return 0


def _reopen(tasks_file: str, task_id: str, reason: str | None) -> None:
    """A parked task reopened by a person starts a new budget epoch, recorded in the
    ledger of the repository TASKS.md is in (none outside a repository: nothing spent)."""
    record = reopen(tasks_file, task_id, reason=reason or "")
    if record is not None:
        plan_say(f"{task_id}: a new budget epoch ({record['epoch']}) starts in {record['ledger']}")
