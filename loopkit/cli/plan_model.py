"""lk-plan draft and lk-plan split: plan items written by a model run read-only, gated by
lk-plan check's checker."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from loopkit import git
from loopkit.cli._entry import options
from loopkit.cli.plan import SETTINGS, plan_say
from loopkit.document import emit
from loopkit.errors import BadInput
from loopkit.judge.running import Settings
from loopkit.plan import drafting, splitting
from loopkit.ratchet import trees
from loopkit.ratchet.steps import commit_paths
from loopkit.sections import PlanDraft
from loopkit.worker import providers
from loopkit.workspace import Workspace

#: The options lk-plan draft and split share: the contract, the repairs, the model.
_model_options = options(
    click.option(
        "--contract",
        "contract_path",
        metavar="FILE",
        help="The loop contract (default ./loop.yaml).",
    ),
    click.option(
        "--repairs",
        type=click.IntRange(0, 10),
        default=2,
        show_default=True,
        help="How many times the checker's problems go back to the model for a repair.",
    ),
    click.option(
        "--provider",
        metavar="NAME",
        help="The model's CLI (default: the contract's judge).",
    ),
    click.option(
        "--model", metavar="MODEL", help="The model (default: the contract's judge model)."
    ),
)


def _outcome(doc: PlanDraft, done: str, failed: str) -> int:
    """Say how a draft or split ended -- ``done`` and how soon the model got it valid, or
    ``failed`` and the last draft's first problem -- and return its exit (0 or 1)."""
    if doc["written"]:
        how = (
            "first time" if doc["outcome"] == "first_time" else f"after {doc['repairs']} repair(s)"
        )
        plan_say(f"{done} (valid {how})")
        return 0
    last = doc["drafts"][-1]
    first = last["problems"][0] if last["problems"] else {"message": "no valid plan"}
    where = f"line {first['line']}: " if "line" in first else ""
    more = f" (and {len(last['problems']) - 1} more)" if len(last["problems"]) > 1 else ""
    plan_say(
        f"{failed} after {doc['repairs']} repair(s); nothing written: {where}{first['message']}{more}"
    )
    return 1


@click.command("draft", context_settings=SETTINGS)
@click.argument("issue")
@click.option(
    "--tasks",
    "tasks_file",
    default="TASKS.md",
    show_default=True,
    metavar="FILE",
    help="The TASKS.md a valid plan is appended to (made when missing).",
)
@_model_options
def draft_cmd(
    issue: str,
    tasks_file: str,
    contract_path: str | None,
    repairs: int,
    provider: str | None,
    model: str | None,
) -> int:
    """Draft plan items for an issue (ISSUE: a file, or - for stdin) with a model run
    read-only, gate them with lk-plan check's checker, send the problems back for at most
    --repairs repairs, and append only a valid plan to TASKS.md.

    Exit 0 written, 1 no valid plan within the repairs (nothing written), 3 bad input,
    4 environment (no repository, the provider's CLI missing).
    """
    text = drafting.read_issue(issue, lambda n: sys.stdin.buffer.read(n))
    ws = Workspace.open(contract_path=contract_path)
    path = Path(tasks_file)
    existing = drafting.read_tasks(path, ws, tasks_file)
    settings = Settings.resolve(ws.contract, provider=_provider(ws, provider), model=model)
    doc = drafting.run(
        text,
        existing=existing,
        tasks_path=path,
        ws=ws,
        settings=settings,
        repairs=repairs,
        issue_name="<stdin>" if issue == "-" else issue,
    )
    emit(doc, schema_name="plan-draft")
    return _outcome(doc, f"{tasks_file}: appended {', '.join(doc['tasks'])}", "no valid plan")


@click.command("split", context_settings=SETTINGS)
@click.argument("tasks_file", metavar="TASKS.md")
@click.option("--task", "task_id", required=True, metavar="ID", help="The task to re-split.")
@click.option(
    "--over-estimate",
    is_flag=True,
    help="Only if the task's last attempt went over its estimate (the ledger's record); "
    "else exit 3, nothing asked.",
)
@click.option(
    "--commit",
    "commit_it",
    is_flag=True,
    help="Commit the split on HEAD (TASKS.md alone, no hook, the branch moved by "
    "compare-and-swap), as lk task commits a checklist: 'loopkit: re-split ID'.",
)
@_model_options
def split_cmd(
    tasks_file: str,
    task_id: str,
    over_estimate: bool,
    commit_it: bool,
    contract_path: str | None,
    repairs: int,
    provider: str | None,
    model: str | None,
) -> int:
    """Re-split one task that over-ran its estimate: a model run read-only splits it into
    smaller slices, gated by lk-plan check's checker (at most --repairs repairs), written
    nested under it before its end line -- every other line kept, the task opened again
    if it was parked.

    Exit 0 written, 1 no valid split within the repairs, or TASKS.md changed meanwhile
    (nothing written), 3 bad input or a task that cannot be split (done, an each: item, a
    parent of slices, a sub-slice, one file as its scope, no plan), 4 environment (with
    --commit: the split is written but the commit could not be made).
    """
    ws = Workspace.open(contract_path=contract_path)
    if over_estimate:  # first: a task within its estimate needs no provider to say so
        splitting.require_over(ws, task_id)
    settings = Settings.resolve(ws.contract, provider=_provider(ws, provider), model=model)
    doc = splitting.run(
        task_id,
        tasks_path=Path(tasks_file),
        ws=ws,
        settings=settings,
        repairs=repairs,
        only_over=over_estimate,
    )
    if doc["written"] and commit_it:
        doc["commit"] = _commit(ws, Path(tasks_file), task_id)
    emit(doc, schema_name="plan-draft")
    done = f"{tasks_file}: split {task_id} into {', '.join(doc['tasks'])}"
    return _outcome(doc, done, f"no valid split of {task_id}")


def _commit(ws: Workspace, tasks_path: Path, task_id: str) -> str | None:
    """The split committed on HEAD: that one file, no hook, the branch moved by
    compare-and-swap (``lk task``'s own commit of a checklist); None when there was
    nothing to commit (git ignores the file, or it is outside the work tree)."""
    where = trees.Where(ws.root, git.git_dirs(ws.root).own, ws.state)
    return commit_paths(where, [str(tasks_path.resolve())], f"loopkit: re-split {task_id}")


def _provider(ws: Workspace, provider: str | None) -> str | None:
    """``--provider``, checked; BadInput when neither it nor the contract's judge names one."""
    judge = ws.contract.get("judge") if ws.contract else None
    if not provider and not (judge and judge.get("provider")):
        raise BadInput(
            "--provider",
            "no provider: pass --provider NAME (claude, codex, ...) or set judge.provider in "
            "the contract (the model runs read-only, like the judge)",
        )
    if provider is not None and provider not in providers.names():
        raise BadInput(
            "--provider", f"no provider {provider!r}: one of {', '.join(providers.names())}"
        )
    return provider
