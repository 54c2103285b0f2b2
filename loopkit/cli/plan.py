"""lk-plan: validate the loop contract and plans; pick the next task; mark tasks; render guidance.

Usage:
  lk-plan check FILE [--contract loop.yaml] [--type auto|contract|tasks]
  lk-plan next TASKS.md [--contract loop.yaml] [--task ID] [--except ID]...
  lk-plan mark TASKS.md --task ID --status done|parked|open [--reason TEXT]
  lk-plan draft ISSUE [--tasks TASKS.md] [--contract loop.yaml] [--repairs N]
                [--provider P] [--model M]
  lk-plan split TASKS.md --task ID [--over-estimate] [--commit] [--contract loop.yaml]
                [--repairs N] [--provider P] [--model M]
  lk-plan guidance [CONTRACT] [--output FILE]

Input:
  check     a loop contract (YAML/JSON) or a TASKS.md, told apart by extension, else by
            content; FILE '-' reads stdin. A TASKS.md is checked against --contract,
            else ./loop.yaml when there is one (the contract `next` would use).
  next      a TASKS.md and the contract (--contract, else ./loop.yaml). stdin is not read.
  guidance  a contract file; with no file (or '-') a piped attempt document, whose
            contract and task are rendered; else ./loop.yaml.

Output:
  check     one JSON document (schema problems.json): valid, every problem with its JSON
            path (and line for a TASKS.md), and the parsed tasks.
  next      one JSON attempt document (schema attempt.json): task and contract, with the
            task's scope and budget applied to the contract.
  mark      nothing on stdout; one line on stderr.
  draft     one JSON document (schema plan-draft.json): the outcome, every draft and its
  split     problems, the ids written (split: and the task split, its last estimate).
  guidance  Markdown on stdout, or the block written into --output (replacing an earlier
            block between loopkit's marker comments, else appended; other text kept).

Exit codes:
  check     0 valid, 1 invalid (every problem on stdout), 3 the file cannot be read.
  next      0 a task was printed, 1 nothing ready (a summary on stderr), 3 bad input
            (unreadable/garbled TASKS.md, invalid plan, invalid contract).
  mark      0 marked (or already so), 1 the task's line changed between read and write
            (nothing written: read and retry), 3 bad input (no such task id, bad file).
  guidance  0 rendered, 3 invalid contract or document.
  draft     0 a valid plan was appended, 1 no valid plan within --repairs (nothing
            written), 3 bad input, 4 environment (no repository, no provider CLI).
  split     0 the task's sub-slices were written, 1 no valid split within --repairs or
            TASKS.md changed meanwhile (nothing written), 3 bad input or a task that
            cannot be split (done, each:, holding slices, a sub-slice, one file as
            its scope, no plan; with
            --over-estimate: its last attempt was within its estimate), 4 environment.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

import click

from loopkit import guidance
from loopkit.cli._entry import CONTEXT, Group, options, say
from loopkit.errors import BadInput
from loopkit.exitcodes import SHARED_HELP

if TYPE_CHECKING:
    from pathlib import Path

    from loopkit.sections import PlanDraft

PLAN_HELP = """\b
Exit codes of lk-plan:
  0   valid / a task was printed / marked / rendered
  1   check: invalid (problems on stdout); next: nothing ready;
      mark: the line changed under it (nothing written);
      draft, split: no valid plan within the repairs (nothing written)
  3   bad input (see the one line on stderr); split: a task that cannot be split
  4   draft, split: environment (no repository, the provider's CLI missing)"""


def _terminal_width() -> int:
    """The help width shutil.get_terminal_size would give, without importing shutil
    (with its compression modules: ~5 ms of start-up for every --help)."""

    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            cols = 80
    return max(min(cols, 100) - 2, 50)  # 100: CONTEXT["max_content_width"]


SETTINGS = {**CONTEXT, "terminal_width": _terminal_width()}


@click.group(cls=Group, context_settings=SETTINGS, epilog=PLAN_HELP + "\n\n" + SHARED_HELP)
def main() -> None:
    """Validate the loop contract and TASKS.md plans; print the next ready task as an
    attempt document; mark tasks done or parked; render agent guidance (AGENTS.md)."""


def _say(message: str) -> None:
    say("lk-plan", message)


def _read_input(file: str) -> tuple[bytes, str, int]:
    """(bytes, source name, size); OS-level failures are bad input (exit 3)."""
    from pathlib import Path

    from loopkit.plan.parsing import MAX_TASKS_BYTES

    if file == "-":
        raw = sys.stdin.buffer.read(MAX_TASKS_BYTES + 1) if hasattr(sys.stdin, "buffer") else b""
        return raw, "<stdin>", len(raw)
    p = Path(file)
    try:
        if p.is_dir():
            raise BadInput(file, "is a directory, expected a file")
        size = p.stat().st_size
        if size > MAX_TASKS_BYTES:
            # Not read at all: the size alone answers.
            return b"", file, size
        return p.read_bytes(), file, size
    except FileNotFoundError:
        raise BadInput(file, "no such file") from None
    except OSError as e:
        raise BadInput(file, f"cannot read: {e.strerror}") from None


def _looks_like_tasks(name: str, raw: bytes) -> bool:
    lower = name.lower()
    if lower.endswith((".md", ".markdown", ".txt")):
        return True
    if lower.endswith((".yaml", ".yml", ".json")):
        return False

    return re.search(rb"(?m)^[ \t]*[-*+][ \t]+\[[ xX!]\]", raw[:65536]) is not None


@main.command("check", context_settings=SETTINGS)
@click.argument("file")
@click.option(
    "--contract",
    "contract_path",
    metavar="FILE",
    help="For a TASKS.md: the contract whose split threshold and scope the plans must respect "
    "(default ./loop.yaml when there is one, as for next).",
)
@click.option(
    "--type",
    "kind",
    type=click.Choice(["auto", "contract", "tasks"]),
    default="auto",
    show_default=True,
    help="What FILE is (auto: by extension, else by content).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The JSON document on stdout even on a terminal (it always is when piped).",
)
def check_cmd(file: str, contract_path: str | None, kind: str, as_json: bool = False) -> int:
    """Validate a loop contract or a TASKS.md and list every problem.

    On a terminal, one line per problem (FILE:LINE: message); piped, or with --json, the
    problems as one JSON document on stdout. Exit 0 valid, 1 invalid, 3 the file cannot
    be read.
    """
    from loopkit import contract as contracts
    from loopkit.document import emit
    from loopkit.plan.checking import check
    from loopkit.plan.checking import warnings as goal_warnings
    from loopkit.plan.parsing import MAX_TASKS_BYTES, parse
    from loopkit.plan.readiness import is_ready

    raw, source, size = _read_input(file)
    if kind == "auto":
        kind = "tasks" if _looks_like_tasks(source, raw) else "contract"
    problems: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] | None = None
    used: str | None = None
    limit = MAX_TASKS_BYTES if kind == "tasks" else contracts.MAX_CONTRACT_BYTES
    if size > limit:
        what = "a TASKS.md" if kind == "tasks" else "a contract"
        problems.append(
            {"path": "$", "message": f"file is {size} bytes; {what} is at most {limit}"}
        )
    elif kind == "contract":
        try:
            data = contracts.parse_text(raw, source)
        except BadInput as e:
            problems.append({"path": e.path or "$", "message": _content_message(e, source)})
        else:
            problems = [p.as_dict() for p in contracts.validate(data)]
            if not problems:
                warnings = contracts.control_warnings(data, contract_file=source)
                warnings += _missing_programs(data.get("criteria"))
    else:
        # The same contract `next` would use, so check and next never disagree.
        from pathlib import Path

        from loopkit.workspace import resolve_contract

        found = resolve_contract(
            contract_path, None, start=Path("."), root=None, cache_root=_repository()
        )
        contract = found.contract
        used = found.source
        try:
            parsed = parse(raw, source=source)
        except BadInput as e:
            problems.append({"path": "$", "message": _content_message(e, source)})
        else:
            from loopkit.plan.expanding import folders_of, prepare

            tree = prepare(parsed, source)
            problems = [
                p.as_dict()
                for p in check(parsed, contract=contract, tree=tree, is_folder=folders_of(source))
            ]
            warnings = goal_warnings(parsed, contract=contract)
            warnings += _missing_programs((contract or {}).get("criteria"))
            ids = parsed.by_id()
            tasks = []
            for t in parsed.tasks:
                d = t.as_dict(source=source)
                d["ready"] = is_ready(t, ids)
                tasks.append(d)
    doc: dict[str, Any] = {
        "kind": "loopkit/problems",
        "version": 1,
        "file": source,
        "type": kind,
        "valid": not problems,
        "problems": problems,
    }
    if warnings:
        doc["warnings"] = warnings
        if not problems:  # the problems come first; warnings only for a valid file
            for w in warnings:
                _say(f"{source}: warning: {w['path']}: {w['message']}")
    if tasks is not None:
        doc["contract"] = used
        doc["tasks"] = tasks
    if as_json or not sys.stdout.isatty():
        emit(doc, schema_name="problems")
    else:  # a person at a terminal: the problems as lines (the JSON: --json, or piped)
        for p in problems:
            where = f"{p['line']}:" if "line" in p else f" {p['path']}:"
            sys.stdout.write(f"{source}:{where} {p['message']}\n")
    if problems:
        first = problems[0]
        where = f"line {first['line']}: " if "line" in first else f"{first['path']}: "
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        _say(f"{source}: invalid {kind}: {where}{first['message']}{more}")
        return 1
    what = f"{len(tasks)} tasks" if tasks is not None else "contract"
    _say(f"{source}: valid ({what})")
    return 0


def _content_message(e: BadInput, source: str) -> str:
    """The message without the source and JSON path its ``problems`` entry names apart."""
    msg = str(e)
    for prefix in (source, e.path):
        if prefix and msg.startswith(prefix + ": "):
            msg = msg[len(prefix) + 2 :]
    return msg


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
        _say(f"{done} (valid {how})")
        return 0
    last = doc["drafts"][-1]
    first = last["problems"][0] if last["problems"] else {"message": "no valid plan"}
    where = f"line {first['line']}: " if "line" in first else ""
    more = f" (and {len(last['problems']) - 1} more)" if len(last["problems"]) > 1 else ""
    _say(
        f"{failed} after {doc['repairs']} repair(s); nothing written: {where}{first['message']}{more}"
    )
    return 1


@main.command("draft", context_settings=SETTINGS)
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
    from pathlib import Path

    from loopkit.document import emit
    from loopkit.judge.running import Settings
    from loopkit.plan import drafting
    from loopkit.workspace import Workspace

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


@main.command("split", context_settings=SETTINGS)
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
    from pathlib import Path

    from loopkit.document import emit
    from loopkit.judge.running import Settings
    from loopkit.plan import splitting
    from loopkit.workspace import Workspace

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


def _commit(ws: Any, tasks_path: Any, task_id: str) -> str | None:
    """The split committed on HEAD: that one file, no hook, the branch moved by
    compare-and-swap (``lk task``'s own commit of a checklist); None when there was
    nothing to commit (git ignores the file, or it is outside the work tree)."""
    from loopkit import git
    from loopkit.ratchet import trees
    from loopkit.ratchet.steps import commit_paths

    where = trees.Where(ws.root, git.git_dirs(ws.root).own, ws.state)
    return commit_paths(where, [str(tasks_path.resolve())], f"loopkit: re-split {task_id}")


def _provider(ws: Any, provider: str | None) -> str | None:
    """``--provider``, checked; BadInput when neither it nor the contract's judge names one."""
    from loopkit.worker import providers

    if not provider and not ((ws.contract or {}).get("judge") or {}).get("provider"):
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


@main.command("next", context_settings=SETTINGS)
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
    from pathlib import Path

    from loopkit import contract as contracts
    from loopkit.document import emit, new_attempt
    from loopkit.plan.checking import check
    from loopkit.plan.parsing import parse, read_bytes
    from loopkit.plan.readiness import blocked_by, effective_status, is_ready, summary
    from loopkit.workspace import resolve_contract

    resolved = resolve_contract(
        contract_path, None, start=Path("."), root=None, cache_root=_repository()
    )
    if resolved.contract is None:
        raise BadInput(
            "--contract", "no contract: pass --contract FILE, or add loop.yaml to this folder"
        )
    contract = resolved.contract
    raw = read_bytes(tasks_file)
    parsed = parse(raw, source=tasks_file)
    from loopkit.plan.expanding import folders_of, prepare

    tree = prepare(parsed, tasks_file)
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
            _say(f"{task_id} is not ready: it {why}")
            return 1
    else:
        from loopkit.plan.readiness import ready_tasks

        found = next((t for t in ready_tasks(parsed) if t.id not in running), None)
        if found is None:
            _say(summary(parsed))
            return 1
        task = found
    from loopkit.plan.reopening import reopen

    record = reopen(tasks_file, task.id, by_hand=True)
    if record is not None:  # set back to `- [ ]` by hand after a park: as `mark --status open`
        _say(
            f"{task.id}: set back to '- [ ]' after its park: a new budget epoch "
            f"({record['epoch']}) starts in {record['ledger']}"
        )
    task_doc = task.as_dict(source=tasks_file)
    doc = new_attempt(task=task_doc, contract=contracts.apply_task(contract, task_doc))
    resolved.stamp(doc)  # the contract the loop starts with: later stages refuse a changed file
    emit(doc)
    _say(f"next: {task.id} ({tasks_file} line {task.line})")
    return 0


@main.command("mark", context_settings=SETTINGS)
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
    from loopkit.plan.marking import commit_edit, prepare_mark

    edit = prepare_mark(tasks_file, task_id, status, reason=reason)
    if not edit.changed:
        _say(f"{task_id} is already {status} ({tasks_file} line {edit.line})")
        return 0
    commit_edit(edit)
    _say(f"marked {task_id} {status} ({tasks_file} line {edit.line})")
    if status == "open" and edit.old_status == "parked":
        _reopen(tasks_file, task_id, reason)
    return 0


def _reopen(tasks_file: str, task_id: str, reason: str | None) -> None:
    """A parked task reopened by a person starts a new budget epoch, recorded in the
    ledger of the repository TASKS.md is in (none outside a repository: nothing spent)."""
    from loopkit.plan.reopening import reopen

    record = reopen(tasks_file, task_id, reason=reason or "")
    if record is not None:
        _say(f"{task_id}: a new budget epoch ({record['epoch']}) starts in {record['ledger']}")


@main.command("guidance", context_settings=SETTINGS)
@click.argument("contract_file", metavar="[CONTRACT]", required=False)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Write into FILE (AGENTS.md, CLAUDE.md) instead of stdout.",
)
def guidance_cmd(contract_file: str | None, output: str | None) -> int:
    """Render the agent guidance (objective, scope, required checks) as Markdown.

    Budgets are left out: the loop enforces them, not the agent. With --output, only the
    block between loopkit's marker comments is replaced; the rest of the file is kept.
    """
    from loopkit import contract as contracts

    task = None
    if contract_file in (None, "-"):
        from loopkit.document import read_attempt

        doc = read_attempt()
        if doc is None and contract_file == "-":
            raise BadInput("<stdin>", "empty: expected an attempt document (JSON)")
        from pathlib import Path

        from loopkit.workspace import resolve_contract

        contract = resolve_contract(None, doc, start=Path("."), root=None).contract
        if contract is None:
            raise BadInput(
                "--contract", "no contract: name a contract file, pipe a document, or add loop.yaml"
            )
        task = doc.get("task") if doc else None
    else:
        contract = contracts.load(contract_file)
    block = guidance.render(contract, task=task)
    if output is None:
        click.echo(block, nl=False)
        return 0
    from pathlib import Path

    _write_guidance(Path(output), block)
    _say(f"wrote guidance to {output}")
    return 0


def _write_guidance(path: Path, block: str) -> None:
    from loopkit.files import atomic_write

    try:
        existing = path.read_bytes().decode("utf-8") if path.exists() else None
    except UnicodeDecodeError:
        raise BadInput(str(path), "not UTF-8 text: will not rewrite it") from None
    except OSError as e:
        raise BadInput(str(path), f"cannot read: {e.strerror}") from None
    text = guidance.update(existing, block)
    try:
        atomic_write(path, text, keep_mode=True)
    except OSError as e:
        raise BadInput(str(path), f"cannot write here: {e.strerror}") from None


def _repository() -> Path | None:
    """The repository here, found without starting git (None outside one): its git folder
    remembers checked contracts, so a YAML contract is parsed once, not at every turn."""
    from loopkit import git

    return git.plain_root(".")


def _missing_programs(criteria: Any) -> list[dict[str, Any]]:
    """A warning for each criterion whose program is not on PATH here: such a check
    cannot run, and a loop would block on it (the ``environment`` class)."""

    from loopkit.evidence.testresults import missing_programs

    return [
        {
            "path": f"$.criteria[{name}]",
            "message": f"`{program}` is not on PATH: the check cannot run here "
            "(install it, or change the criterion's `run`)",
        }
        for name, program in missing_programs(criteria, path=os.environ.get("PATH"))
    ]
