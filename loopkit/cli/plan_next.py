"""lk-plan next: the attempt document for the first ready task (every turn of a loop
asks it: it loads only what picking a task needs)."""

from __future__ import annotations

from pathlib import Path

import click

from loopkit import contract as contracts
from loopkit import git
from loopkit.cli.plan import SETTINGS, plan_say
from loopkit.document import emit, new_attempt
from loopkit.errors import BadInput
from loopkit.plan.checking import check
from loopkit.plan.expanding import folders_of, prepare
from loopkit.plan.parsing import Plan, parse, read_bytes
from loopkit.plan.readiness import blocked_by, effective_status, is_ready, ready_tasks, summary
from loopkit.plan.reopening import reopen
from loopkit.workspace import resolve_contract


@click.command("next", context_settings=SETTINGS)
@click.argument("tasks_file", metavar="TASKS.md")
@click.option(
    "--contract", "contract_path", metavar="FILE", help="The loop contract (default ./loop.yaml)."
)
@click.option(
    "--task",
    "task_id",
    metavar="ID",
    help="Print this task (if it is ready) instead of the first ready one.",
)
@click.option(
    "--except",
    "running",
    multiple=True,
    metavar="ID",
    help="Pass over this task (repeatable): one a parallel run has started already.",
)
def next_cmd(
    tasks_file: str, contract_path: str | None, task_id: str | None, running: tuple[str, ...] = ()
) -> int:
    """Print the attempt document for the first ready task: open, its dependencies done.

    A parked task blocks everything that depends on it. Exit 1 with a summary on stderr
    when nothing is ready; exit 3 when the plan or the contract is invalid.
    """
    # cache_root: the repository's git folder remembers checked contracts, so a YAML
    # contract is parsed once, not at every turn (found without starting git).
    resolved = resolve_contract(
        contract_path, None, start=Path("."), root=None, cache_root=git.plain_root(".")
    )
    if resolved.contract is None:
        raise BadInput(
            "--contract", "no contract: pass --contract FILE, or add loop.yaml to this folder"
        )
    contract = resolved.contract

    def read() -> tuple[Plan, set[str] | None]:
        parsed = parse(read_bytes(tasks_file), source=tasks_file)
        return parsed, prepare(parsed, tasks_file)

    # TASKS.md and the files it names read as one checkout: a lander moving it to what it
    # landed (the task marked done, its new file there) is waited out, never read halfway.
    if tasks_file in ("-", "<stdin>"):
        parsed, tree = read()
    else:
        parsed, tree = git.unmoved(Path(tasks_file).resolve().parent, read)
    problems = check(parsed, contract=contract, tree=tree, is_folder=folders_of(tasks_file))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(
            tasks_file,
            f"invalid plan: {problems[0]}{more}; run lk-plan check {tasks_file}",
        )
    ids = parsed.by_id()
    if task_id is not None:
        task = ids.get(task_id)
        if task is None:
            raise BadInput("--task", f"no task {task_id!r} in {tasks_file}")
        if not is_ready(task, ids):
            waits = blocked_by(task, ids)
            why = f"waits for {', '.join(waits)}" if waits else f"is {effective_status(task)}"
            plan_say(f"{task_id} is not ready: it {why}")
            return 1
    else:
        found = next((t for t in ready_tasks(parsed) if t.id not in running), None)
        if found is None:
            plan_say(summary(parsed))
            return 1
        task = found
    record = reopen(tasks_file, task.id, by_hand=True)
    if record is not None:  # set back to `- [ ]` by hand after a park: as `mark --status open`
        plan_say(
            f"{task.id}: set back to '- [ ]' after its park: a new budget epoch "
            f"({record['epoch']}) starts in {record['ledger']}"
        )
    task_doc = task.as_dict(source=tasks_file)
    doc = new_attempt(task=task_doc, contract=contracts.apply_task(contract, task_doc))
    resolved.stamp(doc)  # the contract the loop starts with: later stages refuse a changed file
    emit(doc)
    plan_say(f"next: {task.id} ({tasks_file} line {task.line})")
    return 0
