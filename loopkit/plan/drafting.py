"""Drafting a plan from an issue: a model writes TASKS.md items, lk-plan's checker gates them.

The model runs read-only in the sandbox, exactly like the judge
(``loopkit.judge.running.run_read_only``). Its answer is checked by ``checking.check``
together with the TASKS.md it would be appended to; the problems (line, path, message)
go back to it for at most ``repairs`` more answers. Only a valid draft is written:
appended atomically, every existing byte kept. Each outcome is one ledger record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import loader
from loopkit.decision import ledger, records
from loopkit.errors import BadInput
from loopkit.judge.running import run_read_only
from loopkit.plan.checking import check, threshold
from loopkit.plan.expanding import expand, folders, prepare, tree_files
from loopkit.plan.marking import append_plan
from loopkit.plan.parsing import ITEM_LINE, Plan, PlanProblem, Task, parse, read_bytes
from loopkit.state import artifacts, cancel

if TYPE_CHECKING:
    from loopkit.judge.running import Settings
    from loopkit.sections import DraftTry, PlanDraft
    from loopkit.workspace import Workspace

DEFAULT_REPAIRS = 2
MAX_REPAIRS = 10
#: An issue longer than this is refused (an issue is text, not an attachment).
MAX_ISSUE_BYTES = 200_000
#: At most this many of the repository's files are listed in the prompt.
MAX_PROMPT_FILES = 400
#: The ledger key of draft records: no task id (ids never start with ':').
RECORD_TASK = ":draft"
OUTCOMES = ("first_time", "repaired", "given_up")

SYNTAX = """\
TASKS.md plan syntax (answer with checklist items in exactly this form):

- [ ] Short imperative title {#explicit-id}
  issue: #42
  closes: #42
  budget: 120 lines / 3 files
  scope: src/pkg/module.py, tests/test_module.py
  files: src/pkg/module.py, +tests/test_module.py
  depends: other-task-id
  accept: what must be true when it is done
  end

- `budget:` the size estimate in lines and files (numbers >= 1). Required.
- `scope:` the files or globs the task may change (comma separated; `dir/` means dir/**).
  Required; inside the contract's writable scope.
- `files:` the exact files the task changes; each exists in the repository or is new,
  marked `+path` (or listed on a `new: path` line); each lies inside `scope:`.
- `end` closes every plan. A plan without `end` is refused.
- Over SPLIT_LINES lines or SPLIT_FILES files, split the item into slices: nested
  items indented two spaces under it, each with its own budget/scope/files/end, scopes
  disjoint, run in order; the parent's own `end` goes after its last slice.
- `each: GLOB` on an item (with a budget, no slices) makes one slice per matching file.
- Ids: lowercase letters, digits and '-'; never reuse an id listed below.
"""


class Draft:
    """One answer of the model: its plan text and the problems the checker found."""

    def __init__(self, number: int, text: str, problems: list[PlanProblem]) -> None:
        self.number = number
        self.text = text
        self.problems = problems
        self.session_id: str | None = None
        self.transcript: str | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    def as_dict(self) -> DraftTry:
        out: DraftTry = {
            "draft": self.number,
            "valid": self.valid,
            "problems": [p.as_dict() for p in self.problems],
            "lines": len(self.text.splitlines()),
        }
        if self.session_id is not None:
            out["session_id"] = self.session_id
        if self.transcript is not None:
            out["transcript"] = self.transcript
        return out


def read_issue(source: str, read_stdin: Callable[[int], bytes]) -> str:
    """The issue's text from a file or ``-`` (stdin); BadInput (exit 3) when unusable."""
    name = "<stdin>" if source == "-" else source
    if source == "-":
        raw = read_stdin(MAX_ISSUE_BYTES + 1)
    else:
        p = Path(source)
        try:
            if p.is_dir():
                raise BadInput(source, "is a directory, expected a file holding the issue")
            if p.stat().st_size > MAX_ISSUE_BYTES:
                raise BadInput(source, f"an issue is at most {MAX_ISSUE_BYTES} bytes")
            raw = p.read_bytes()
        except FileNotFoundError:
            raise BadInput(source, "no such file") from None
        except OSError as e:
            raise BadInput(source, f"cannot read: {e.strerror}") from None
    if len(raw) > MAX_ISSUE_BYTES:
        raise BadInput(name, f"an issue is at most {MAX_ISSUE_BYTES} bytes")
    text = loader.decoded(raw, name, "the issue's text", not_utf8="not UTF-8 text (byte {})")
    if not text.strip():
        raise BadInput(name, "empty: expected the issue's text")
    return text.strip()


def extract(reply: str | None) -> str:
    """The plan items of an answer: its first fenced block holding items, else the lines
    from its first checklist item to its last plan line (prose around them left out)."""
    if not reply:
        return ""
    blocks = re.findall(r"(?ms)^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", reply)
    for _, body in blocks:
        if any(ITEM_LINE.match(line) for line in body.splitlines()):
            return _trim(body.splitlines())
    return _trim(reply.splitlines())


def _trim(lines: list[str]) -> str:
    start = next((i for i, line in enumerate(lines) if ITEM_LINE.match(line)), None)
    if start is None:
        return ""
    kept = lines[start:]
    last = 0
    for i, line in enumerate(kept):
        if ITEM_LINE.match(line) or line[:1] in (" ", "\t") or line.strip().lower() == "end":
            last = i
    return "\n".join(line.rstrip() for line in kept[: last + 1]) + "\n"


def joined(existing: bytes, draft: str) -> tuple[bytes, int]:
    """The file with the draft appended (a blank line between), and the draft's first
    line number minus one: what a problem's line is shifted by."""
    if not existing:
        return draft.encode(), 0
    body = existing if existing.endswith(b"\n") else existing + b"\n"
    if body.strip() and not body.endswith(b"\n\n"):
        body += b"\n"
    return body + draft.encode(), body.count(b"\n")


def validate(
    existing: bytes,
    draft: str,
    *,
    contract: Mapping[str, Any] | None,
    tree: Collection[str],
    source: str,
) -> tuple[list[PlanProblem], list[str]]:
    """The draft's problems (lines counted in the draft) and the ids of its items."""
    whole, offset = joined(existing, draft)
    _, new, out = placed(
        draft,
        whole,
        offset,
        None,
        empty="no plan items in the answer: expected '- [ ] ...' items",
        not_item="the draft must start with a top-level item '- [ ] ...'",
        contract=contract,
        tree=tree,
        source=source,
    )
    for t in new:
        if t.expanded:
            continue
        if t.status != "open":
            out.append(on_item(t, offset, "a drafted item is open: '- [ ]', not done or parked"))
        if not t.has_plan:
            if not any(p.task == t.id and p.message.startswith("no plan") for p in out):
                message = "no plan: a drafted item needs budget:, scope:, files: and end"
                out.append(on_item(t, offset, message))
        elif not t.slices and t.each is None and not t.files:
            out.append(on_item(t, offset, NO_FILES, ".files"))
    out.sort(key=lambda p: p.line if p.line is not None else 0)
    return out, [t.id for t in new if not t.expanded]


#: An item of a model's answer with no files: line.
NO_FILES = "no files: list: name the exact files it changes (+path for new)"


def on_item(task: Task, start: int, message: str, where: str = "") -> PlanProblem:
    """A problem of ``task``, an item of a model's answer placed after line ``start``."""
    return PlanProblem(f"$.tasks[{task.index}]{where}", message, task.line - start, task.id)


def placed(
    answer: str,
    whole: bytes,
    start: int,
    count: int | None,
    *,
    empty: str,
    not_item: str,
    contract: Mapping[str, Any] | None,
    tree: Collection[str],
    source: str,
) -> tuple[Plan | None, list[Task], list[PlanProblem]]:
    """A model's ``answer`` placed in the plan file (``whole``, the answer's ``count``
    lines after line ``start``; None: to the end) parsed, expanded and checked: the plan
    (None when the bytes are not a plan at all, or the answer has nothing in it: ``empty``,
    or starts with a line that is not a top-level item: ``not_item``), its items from the
    answer, and its problems, each line counted in the answer (None for one outside it)."""
    if not answer.strip():
        return None, [], [PlanProblem("$", empty)]
    m = ITEM_LINE.match(answer.splitlines()[0])
    if m is None or m.group("indent"):
        return None, [], [PlanProblem("$", not_item, 1)]
    try:
        plan = parse(whole, source=source)
    except BadInput as e:
        return None, [], [PlanProblem("$", str(e))]
    expand(plan, tree)

    def inside(line: int | None) -> bool:
        return line is not None and line > start and (count is None or line <= start + count)

    out = [
        PlanProblem(
            p.path, p.message, p.line - start if inside(p.line) and p.line else None, p.task
        )
        for p in check(plan, contract=contract, tree=tree)
    ]
    return plan, [t for t in plan.tasks if inside(t.line)], out


def prompt(
    issue: str,
    *,
    contract: Mapping[str, Any] | None,
    files: list[str],
    existing_ids: list[str],
    previous: Draft | None,
) -> str:
    """What the model is asked: the issue, the contract's objective and scope, the
    repository's files, the plan syntax -- and, for a repair, its last draft's problems."""
    split_lines, split_files = threshold(contract)
    scope = (contract or {}).get("scope") or {}
    parts = [
        "You draft a plan for the issue below: checklist items for TASKS.md. Read the "
        "repository as you need, change nothing, and answer with the plan items only, in "
        "one ```markdown block.",
        "## Issue\n\n" + issue,
    ]
    if contract and contract.get("objective"):
        parts.append("## Objective\n\n" + str(contract["objective"]))
    if scope:
        lines = [f"- writable: {', '.join(scope.get('writable') or []) or '-'}"]
        if scope.get("protected"):
            lines.append(f"- protected (never in a plan): {', '.join(scope['protected'])}")
        parts.append("## Scope\n\n" + "\n".join(lines))
    parts.append(files_part(files))
    if existing_ids:
        parts.append("## Ids already taken\n\n" + ", ".join(existing_ids))
    parts.append(
        SYNTAX.replace("SPLIT_LINES", str(split_lines)).replace("SPLIT_FILES", str(split_files))
    )
    if previous is not None:
        parts.append(refused_part(previous, "draft", "Answer with the whole corrected plan."))
    return "\n\n".join(parts) + "\n"


def files_part(files: list[str]) -> str:
    """A prompt's list of the repository's files (the first MAX_PROMPT_FILES of them)."""
    shown = files[:MAX_PROMPT_FILES]
    more = len(files) - len(shown)
    return (
        "## Repository files\n\n"
        + "\n".join(shown)
        + (f"\n... and {more} more" if more > 0 else "")
    )


def refused_part(previous: Draft, name: str, again: str) -> str:
    """A repair prompt's part: the model's previous ``name`` (its draft, its answer), its
    problems, and what to answer ``again``."""
    problems = "\n".join(
        f"- line {p.line}: {p.path}: {p.message}" if p.line else f"- {p.path}: {p.message}"
        for p in previous.problems
    )
    return (
        f"## Your previous {name} was refused\n\n```markdown\n"
        + previous.text
        + f"```\n\nProblems (lines counted in that {name}):\n"
        + problems
        + "\n\n"
        + again
    )


def outcome(drafts: list[Draft]) -> str:
    if drafts and drafts[-1].valid:
        return "first_time" if len(drafts) == 1 else "repaired"
    return "given_up"


def ask(
    ws: Workspace,
    settings: Settings,
    repairs: int,
    *,
    label: str,
    prompt_for: Callable[[Draft | None], str],
    validate_answer: Callable[[str], tuple[list[PlanProblem], list[str]]],
) -> tuple[list[Draft], list[str]]:
    """Ask the model (read-only, in the sandbox) until an answer passes ``validate_answer``
    or ``repairs`` repairs are spent; each repair is asked with the last answer's problems.
    The drafts, and the ids of the valid one (empty when none was)."""
    stamp = artifacts.new_attempt_id()
    drafts: list[Draft] = []
    previous: Draft | None = None

    def should_stop() -> str | None:
        return "cancelled" if cancel.requested(ws.state) else None

    for n in range(1, repairs + 2):
        if drafts and should_stop():
            break  # lk cancel: no more repairs
        folder = artifacts.attempt_dir(ws.state, f"{label}-{stamp}-{n}")
        done = run_read_only(
            prompt_for(previous), settings, ws, artifacts=folder, should_stop=should_stop
        )
        answer = extract(done.observed.reply)
        problems, ids = validate_answer(answer)
        if done.observed.tree_before != done.observed.tree_after:
            problems.insert(0, PlanProblem("$", "the model changed the tree: nothing is taken"))
        d = Draft(n, answer, problems)
        d.session_id = done.session_id
        if done.transcript:
            d.transcript = artifacts.relative(Path(done.transcript), ws.root)
        drafts.append(d)
        if d.valid:
            return drafts, ids
        previous = d
    return drafts, []


def run(
    issue: str,
    *,
    tasks_path: Path,
    ws: Workspace,
    settings: Settings,
    repairs: int,
    issue_name: str,
    existing: bytes,
) -> PlanDraft:
    """Draft, check and repair; append a valid plan; record the outcome. The document."""
    source = str(tasks_path)
    tree = tree_files(ws.root)
    existing_ids = _ids(existing, source)
    files = sorted(tree)

    def prompt_for(previous: Draft | None) -> str:
        return prompt(
            issue,
            contract=ws.contract,
            files=files,
            existing_ids=existing_ids,
            previous=previous,
        )

    def validate_answer(answer: str) -> tuple[list[PlanProblem], list[str]]:
        return validate(existing, answer, contract=ws.contract, tree=tree, source=source)

    drafts, ids = ask(
        ws,
        settings,
        repairs,
        label="draft",
        prompt_for=prompt_for,
        validate_answer=validate_answer,
    )
    if drafts and drafts[-1].valid:
        whole, _ = joined(existing, drafts[-1].text)
        append_plan(tasks_path, existing, whole)
    doc = document(drafts, ids, settings=settings, repairs=repairs, tasks_file=source)
    doc["issue"] = issue_name
    record(ws, doc)
    return doc


def document(
    drafts: list[Draft], ids: list[str], *, settings: Settings, repairs: int, tasks_file: str
) -> PlanDraft:
    """The plan-draft document of a run of drafts (schema plan-draft.json)."""
    result = outcome(drafts)
    written = ids if result != "given_up" else []
    return {
        "kind": "loopkit/plan-draft",
        "version": 1,
        "issue": None,
        "tasks_file": tasks_file,
        "provider": settings.provider,
        "model": settings.model,
        "outcome": result,
        "written": bool(written),
        "tasks": written,
        "repairs": len(drafts) - 1,
        "max_repairs": repairs,
        "drafts": [d.as_dict() for d in drafts],
    }


def read_tasks(tasks_path: Path, ws: Workspace, source: str) -> bytes:
    """The TASKS.md as it is (b'' when there is none); BadInput when it is invalid already:
    a draft is checked with it, and its problems would be no draft's."""
    if not tasks_path.exists():
        return b""
    raw = read_bytes(tasks_path)
    if not raw.strip():
        return raw
    plan = parse(raw, source=source)
    tree = prepare(plan, source)
    problems = check(plan, contract=ws.contract, tree=tree, is_folder=folders(ws.root))
    unplanned = [t for t in plan.tasks if t.status == "open" and not t.has_plan]
    if not problems and unplanned:
        raise BadInput(
            source,
            f"open items without plans ({', '.join(t.id for t in unplanned[:3])}"
            f"{', ...' if len(unplanned) > 3 else ''}): a drafted plan would make them "
            "invalid (once one item carries a plan, every open item needs one); plan them first",
        )
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(
            source, f"invalid plan already: {problems[0]}{more}; run lk-plan check {source}"
        )
    return raw


def _ids(existing: bytes, source: str) -> list[str]:
    if not existing.strip():
        return []
    return [t.id for t in parse(existing, source=source).tasks]


def record(ws: Workspace, doc: Mapping[str, Any]) -> None:
    """The draft's outcome as one ledger record (``lk report``'s plan-draft rates); a
    re-split (``lk-plan split``) names the task it split."""
    book = ledger.Ledger(ws.state / ledger.DEFAULT_NAME)
    with book.transaction() as txn:
        history = txn.history(RECORD_TASK)
        txn.append(
            {
                **records.manual_record(
                    "draft",
                    RECORD_TASK,
                    history,
                    source="lk-plan draft",
                    now=ledger.now_iso(),
                    reason=(f"re-split of {doc['split']}" if doc.get("split") else "plan draft")
                    + f" {doc['outcome']}: {len(doc['drafts'])} draft(s)",
                ),
                "draft": {
                    "outcome": doc["outcome"],
                    "drafts": len(doc["drafts"]),
                    "repairs": doc["repairs"],
                    "tasks": list(doc["tasks"]),
                    **({"issue": doc["issue"]} if doc.get("issue") is not None else {}),
                    **({"split": doc["split"]} if doc.get("split") else {}),
                },
                "inputs": {
                    "document": {"issue": doc["issue"], "tasks_file": doc["tasks_file"]},
                    "history": dict(history),
                },
            }
        )
