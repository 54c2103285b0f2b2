"""Re-splitting one slice: a model splits a task that over-ran its estimate into smaller
slices nested under it, lk-plan check's checker gates them.

The model is asked exactly as ``lk-plan draft`` asks it (``drafting.ask``: read-only in
the sandbox, the checker's problems back for at most ``repairs`` repairs). Its items are
written before the task's own ``end`` line, indented under it, and the task is opened
again when it was parked: every other line of TASKS.md -- the task's parent, the other
slices -- is kept byte for byte. Only a valid split is written, atomically, under the
same lock as ``mark``; each outcome is one ledger ``draft`` record naming the task.
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit.decision import ledger
from loopkit.errors import BadInput
from loopkit.evidence import globs
from loopkit.plan.checking import check
from loopkit.plan.drafting import (
    NO_FILES,
    Draft,
    ask,
    document,
    files_part,
    on_item,
    placed,
    record,
    refused_part,
)
from loopkit.plan.expanding import expand, tree_files
from loopkit.plan.marking import replace_plan, rewrite_line
from loopkit.plan.parsing import Plan, PlanProblem, Task, parse, read_bytes, split_lines
from loopkit.plan.readiness import effective_status

if TYPE_CHECKING:
    from loopkit.judge.running import Settings
    from loopkit.sections import PlanDraft
    from loopkit.workspace import Workspace

#: A split makes at least this many sub-slices (one would be the same task again).
MIN_SLICES = 2

SYNTAX = """\
Answer with the sub-slices as checklist items at the start of the line (they are indented
under the task for you), in the order they should run, each in exactly this form:

- [ ] Short imperative title {#explicit-id}
  budget: 30 lines / 1 file
  scope: src/pkg/part.py
  files: src/pkg/part.py
  accept: what must be true when it is done
  end

- At least 2 items; each smaller than the task; together they do the whole task.
- `budget:` each slice's own estimate in lines and files (numbers >= 1). Required.
- `scope:` inside the task's scope (TASK_SCOPE); the slices' scopes are disjoint.
- `files:` the exact files the slice changes; each exists or is new (`+path`).
- `end` closes every item. No nested items. Do not repeat the task itself or its own
  `end` line: the slices are placed inside it.
- Ids: lowercase letters, digits and '-'; never reuse an id listed below.
"""


def over_estimate(ws: Workspace, task_id: str) -> Mapping[str, Any] | None:
    """The estimate of the task's last attempt that recorded one (the ledger's), when
    that attempt's diff went over it; None otherwise."""
    path = ws.state / ledger.DEFAULT_NAME
    records, _ = ledger.read(path) if path.exists() else ([], [])
    last: Mapping[str, Any] | None = None
    for _, rec in records:
        if rec.get("task_id") == task_id and isinstance(rec.get("estimate"), Mapping):
            last = rec["estimate"]
    return last if last is not None and last.get("within") is False else None


def require_over(ws: Workspace, task_id: str) -> Mapping[str, Any]:
    """The over-run estimate of the task's last attempt; BadInput (exit 3) when it stayed
    within (``--over-estimate``: nothing to re-split)."""
    over = over_estimate(ws, task_id)
    if over is None:
        raise BadInput(
            "--over-estimate",
            f"{task_id}: its last attempt did not go over its estimate (or none is recorded)",
        )
    return over


def refusal(task: Task) -> str | None:
    """Why this task cannot be re-split without rewriting a plan; None when it can."""
    if effective_status(task) == "done":
        return "is done: a landed task is not re-split"
    if task.each is not None:
        return "is an each: item: its expansion makes its slices; re-split one of them"
    if task.slices:
        return "holds slices already: re-split one of them, not the plan that holds them"
    if not task.has_plan or not task.ended:
        return "has no plan ending in 'end' to nest slices under: give it a plan first"
    if task.parent is not None and task.parent.parent is not None:
        return "is a sub-slice: slices nest two deep at most, so it cannot be split again"
    if len(task.scope) == 1 and globs.is_literal(task.scope[0]):
        # An each: slice is one: its slices' scopes would have to be disjoint inside it.
        return (
            f"has one file as its scope ({task.scope[0]}): slices with disjoint scopes "
            "cannot be made inside it; widen its scope by hand"
        )
    return None


def find(raw: bytes, source: str, task_id: str, tree: Collection[str]) -> tuple[Plan, Task]:
    plan = parse(raw, source=source)
    expand(plan, tree)
    task = plan.find(task_id)
    if task is None:
        known = ", ".join(t.id for t in plan.tasks[:12])
        raise BadInput(source, f"no task with id {task_id!r} (ids: {known})")
    return plan, task


def insert(raw: bytes, task: Task, answer: str) -> tuple[bytes, int]:
    """TASKS.md with ``answer``'s lines indented under ``task`` before its ``end`` line,
    and the task's line opened again when it was parked; and the (0-based) index of the
    answer's first line in it. Every other byte is kept."""
    assert task.end_line is not None
    answer = textwrap.dedent(answer)  # an answer indented as it will stand is the same
    lines = split_lines(raw)
    end = task.end_line - 1
    end_line = lines[end]
    body = end_line.rstrip(b"\r\n")
    eol = end_line[len(body) :] or (b"\r\n" if b"\r\n" in raw else b"\n")
    lead = body[: len(body) - len(body.lstrip())]
    block = [
        (lead + line.rstrip().encode() if line.strip() else b"") + eol
        for line in answer.splitlines()
    ]
    head = lines[:end]
    if task.status == "parked":
        head[task.line - 1] = rewrite_line(head[task.line - 1], "open", None)
    return b"".join([*head, *block, *lines[end:]]), end


def validate(
    raw: bytes,
    task: Task,
    answer: str,
    *,
    contract: Mapping[str, Any] | None,
    tree: Collection[str],
    source: str,
) -> tuple[list[PlanProblem], list[str]]:
    """The answer's problems (lines counted in the answer) and the ids of its items."""
    answer = textwrap.dedent(answer)
    whole, start = insert(raw, task, answer)
    count = len(answer.splitlines())
    plan, new, out = placed(
        answer,
        whole,
        start,
        count,
        empty="no slices in the answer: expected '- [ ] ...' items",
        not_item="the answer must start with an item '- [ ] ...'",
        contract=contract,
        tree=tree,
        source=source,
    )
    if plan is None:
        return out, []
    parent = plan.find(task.id)
    slices = [t for t in new if parent is not None and t.parent is parent]
    if len(slices) < MIN_SLICES:
        out.append(
            PlanProblem(
                "$",
                f"{len(slices)} slice(s): a split makes at least {MIN_SLICES} smaller slices",
            )
        )
    for t in new:
        if t.status != "open":
            out.append(on_item(t, start, "a slice of a split is open: '- [ ]', not done or parked"))
        if not t.has_plan:
            out.append(on_item(t, start, "no plan: a slice needs budget:, scope:, files: and end"))
        elif not t.files:
            out.append(on_item(t, start, NO_FILES, ".files"))
    out.sort(key=lambda p: p.line if p.line is not None else 0)
    return out, [t.id for t in slices]


def prompt(
    task: Task,
    raw: bytes,
    *,
    contract: Mapping[str, Any] | None,
    files: list[str],
    ids: list[str],
    over: Mapping[str, Any] | None,
    previous: Draft | None,
) -> str:
    """What the model is asked: the task as written, what its last attempt changed against
    its estimate, the contract's objective and scope, the repository's files, the syntax
    -- and, for a repair, its last answer's problems."""
    assert task.end_line is not None
    lines = split_lines(raw)[task.line - 1 : task.end_line]
    written = b"".join(lines).decode("utf-8", "replace")
    parts = [
        "The task below went over its size estimate. Split it into smaller slices that "
        "together do the whole task. Read the repository as you need, change nothing, and "
        "answer with the slices only, in one ```markdown block.",
        "## The task\n\n```markdown\n" + written.rstrip("\n") + "\n```",
    ]
    if over:
        parts.append(
            "## Its last attempt\n\n"
            f"estimate: {over.get('lines') or '-'} lines / {over.get('files') or '-'} files; "
            f"the diff: {over.get('actual_lines')} lines / {over.get('actual_files')} files"
        )
    scope = (contract or {}).get("scope") or {}
    if contract and contract.get("objective"):
        parts.append("## Objective\n\n" + str(contract["objective"]))
    if scope.get("protected"):
        parts.append("## Protected (never in a slice)\n\n" + ", ".join(scope["protected"]))
    parts.append(files_part(files))
    parts.append("## Ids already taken\n\n" + ", ".join(ids))
    parts.append(SYNTAX.replace("TASK_SCOPE", ", ".join(task.scope) or "the repository"))
    if previous is not None:
        parts.append(refused_part(previous, "answer", "Answer with all the slices, corrected."))
    return "\n\n".join(parts) + "\n"


def read_plan(tasks_path: Path, ws: Workspace, source: str, task_id: str) -> tuple[bytes, Task]:
    """The TASKS.md and the task to split; BadInput (exit 3) when the plan is invalid
    already, there is no such task, or it cannot be split without rewriting a plan."""
    raw = read_bytes(tasks_path)
    tree = tree_files(ws.root)
    plan, task = find(raw, source, task_id, tree)
    problems = check(plan, contract=ws.contract, tree=tree)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(
            source, f"invalid plan already: {problems[0]}{more}; run lk-plan check {source}"
        )
    why = refusal(task)
    if why is not None:
        raise BadInput("--task", f"{task_id} {why}")
    return raw, task


def run(
    task_id: str,
    *,
    tasks_path: Path,
    ws: Workspace,
    settings: Settings,
    repairs: int,
    only_over: bool,
) -> PlanDraft:
    """Split, check and repair; write a valid split; record the outcome. The document
    (``written``: the caller commits the file, ``lk-plan split --commit``)."""
    source = str(tasks_path)
    raw, task = read_plan(tasks_path, ws, source, task_id)
    over = require_over(ws, task_id) if only_over else over_estimate(ws, task_id)
    tree = tree_files(ws.root)
    ids = [t.id for t in parse(raw, source=source).tasks]

    def prompt_for(previous: Draft | None) -> str:
        return prompt(
            task,
            raw,
            contract=ws.contract,
            files=sorted(tree),
            ids=ids,
            over=over,
            previous=previous,
        )

    def validate_answer(answer: str) -> tuple[list[PlanProblem], list[str]]:
        return validate(raw, task, answer, contract=ws.contract, tree=tree, source=source)

    drafts, written = ask(
        ws,
        settings,
        repairs,
        label=f"split-{task_id}",
        prompt_for=prompt_for,
        validate_answer=validate_answer,
    )
    if drafts and drafts[-1].valid:
        whole, _ = insert(raw, task, drafts[-1].text)
        replace_plan(tasks_path, raw, whole)
    doc = document(drafts, written, settings=settings, repairs=repairs, tasks_file=source)
    doc["split"] = task_id
    if over is not None:
        doc["estimate"] = dict(over)
    record(ws, doc)
    return doc
