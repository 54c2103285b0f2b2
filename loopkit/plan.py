"""TASKS.md: parse the checklist, check every plan contract, pick the next task, mark one.

A TASKS.md is a Markdown checklist. ``- [ ]`` is open, ``- [x]`` done, ``- [!]`` parked;
``GOAL:`` at the start of an item makes it a judged goal. An item may carry a plan
contract in lines indented under it::

    - [ ] Fix blank-line handling in parse_headers {#blank-line}
      budget: 40 lines / 2 files
      scope: src/parser/headers.py, tests/test_headers.py
      depends: project-setup
      end

Plans over the split threshold hold slices: nested checklist items, each with its own
plan, run in their written order with disjoint scopes. An item's id is its explicit
``{#id}`` or a slug of its text -- never its line number -- so ids survive edits above
it and marking it. This module reads and writes bytes; it never prints.
"""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from loopkit import globs
from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write

#: A TASKS.md larger than this is refused before it is read (a plan is not a data file).
MAX_TASKS_BYTES = 4 * 1024 * 1024
STATUSES = {" ": "open", "x": "done", "X": "done", "!": "parked"}
MARKS = {"open": " ", "done": "x", "parked": "!"}
PLAN_KEYS = ("budget", "scope", "depends", "allow-empty", "accept", "note")
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_SLUG = 48
#: A budget is a count of lines or files: more digits than this is not an estimate.
MAX_BUDGET_DIGITS = 12

_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?P<bullet>[-*+])[ \t]+\[(?P<mark>.)\](?P<rest>.*)$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_EXPLICIT_ID = re.compile(r"\s*\{#(?P<id>[^{}\s]*)\}\s*$")
_NOTE = re.compile(r"\s+\((?P<status>parked|done):\s*(?P<text>[^()]*)\)\s*$")
_KEY = re.compile(r"^(?P<key>[A-Za-z][A-Za-z_-]*)\s*:(?P<value>.*)$")
_BUDGET_PART = re.compile(r"^~?\s*(?P<n>-?\d+)\s*(?P<unit>lines?|files?)$", re.IGNORECASE)


# Plain classes rather than dataclasses: building five dataclasses costs milliseconds
# at every start-up of `lk-plan next`.


class PlanProblem:
    """One problem in a TASKS.md: a JSON path into the task list, a line, a message."""

    __slots__ = ("line", "message", "path", "task")

    def __init__(
        self, path: str, message: str, line: int | None = None, task: str | None = None
    ) -> None:
        self.path = path
        self.message = message
        self.line = line
        self.task = task

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanProblem) and self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PlanProblem({self.as_dict()!r})"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "message": self.message}
        if self.line is not None:
            out["line"] = self.line
        if self.task is not None:
            out["task"] = self.task
        return out

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"


class Task:
    """One checklist item. ``line`` is 1-based and informational: the id is what is stable."""

    def __init__(
        self,
        *,
        text: str,
        kind: str,
        status: str,
        line: int,
        indent: int,
        explicit_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.text = text
        self.kind = kind  # task | goal
        self.status = status  # open | done | parked (as written on its line)
        self.line = line
        self.indent = indent
        self.id = ""
        self.explicit_id = explicit_id
        self.scope: list[str] = []
        self.budget: dict[str, int] = {}
        self.depends: list[str] = []
        self.allow_empty = False
        self.accept: list[str] = []
        self.notes: list[str] = []
        self.reason = reason
        self.has_plan = False
        self.ended = False
        self.end_line: int | None = None
        self.parent: Task | None = None
        self.slices: list[Task] = []
        self.index = 0

    def __repr__(self) -> str:
        return f"Task({self.id!r}, {self.status}, line {self.line})"

    def as_dict(self, *, source: str | None = None) -> dict[str, Any]:
        """The task as published in schemas/task.json."""
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "status": self.status,
            "scope": list(self.scope),
            "budget": dict(self.budget),
            "depends": list(self.depends),
        }
        if self.allow_empty:
            out["allow_empty"] = True
        if self.accept:
            out["accept"] = list(self.accept)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.reason is not None:
            out["reason"] = self.reason
        if self.parent is not None:
            out["parent"] = self.parent.id
        if self.slices:
            out["slices"] = [s.id for s in self.slices]
        out["source"] = (
            {"line": self.line} if source is None else {"file": source, "line": self.line}
        )
        return out


class Plan:
    """A parsed TASKS.md: every item in document order (slices right after their parent)."""

    def __init__(
        self, *, tasks: list[Task], problems: list[PlanProblem], source: str = "TASKS.md"
    ) -> None:
        self.tasks = tasks
        self.problems = problems
        self.source = source

    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}

    def find(self, task_id: str) -> Task | None:
        return self.by_id().get(task_id)


class Conflict(LoopkitError):
    """The line to rewrite changed between reading and writing: nothing was written."""

    code = ExitCode.FAILED_CHECK


# --------------------------------------------------------------------------- reading


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of a TASKS.md; BadInput (exit 3) when the file cannot be read at all."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise BadInput(str(path), "is a directory, expected a TASKS.md file")
        if size > MAX_TASKS_BYTES:
            raise BadInput(
                str(path), f"file is {size} bytes; a TASKS.md is at most {MAX_TASKS_BYTES}"
            )
        return p.read_bytes()
    except FileNotFoundError:
        raise BadInput(str(path), "no such file") from None
    except OSError as e:
        raise BadInput(str(path), f"cannot read: {e.strerror}") from None


def decode(raw: bytes, source: str) -> str:
    """UTF-8 text of a TASKS.md (a leading BOM is kept as a character, then ignored)."""
    if len(raw) > MAX_TASKS_BYTES:
        raise BadInput(source, f"file is {len(raw)} bytes; a TASKS.md is at most {MAX_TASKS_BYTES}")
    if b"\x00" in raw:
        raise BadInput(source, "binary data: expected a Markdown checklist (TASKS.md)")
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(
            source, f"not UTF-8 text (byte {e.start}): expected a Markdown checklist (TASKS.md)"
        ) from None
    if not body.strip():
        raise BadInput(source, "empty file: expected a Markdown checklist (TASKS.md)")
    return body


def split_lines(raw: bytes) -> list[bytes]:
    """Lines with their endings kept (only \\n ends a line, so \\r\\n survives intact)."""
    return raw.splitlines(keepends=True) if b"\r" not in raw else _split_on_lf(raw)


def _split_on_lf(raw: bytes) -> list[bytes]:
    out: list[bytes] = []
    start = 0
    while True:
        i = raw.find(b"\n", start)
        if i < 0:
            if start < len(raw):
                out.append(raw[start:])
            return out
        out.append(raw[start : i + 1])
        start = i + 1


def _columns(indent: str) -> int:
    return len(indent.expandtabs(4))


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


# --------------------------------------------------------------------------- parsing


class _Item:
    __slots__ = ("body", "mark")

    def __init__(self, mark: str, body: str) -> None:
        self.mark = mark
        self.body = body  # everything after "[m]"


def parse_item_line(line: str) -> tuple[int, _Item] | None:
    """(indent columns, item) when ``line`` is a checklist item, else None."""
    m = _ITEM.match(_strip_eol(line).lstrip("\ufeff"))
    if not m:
        return None
    rest = m.group("rest")
    if rest and not rest[0].isspace():
        return None  # "- [x]foo" is not a checklist item in Markdown
    return _columns(m.group("indent")), _Item(m.group("mark"), rest)


def split_body(body: str) -> tuple[str, str, str | None, str | None, str | None]:
    """(kind, text, explicit id, note status, note text) of an item's text."""
    text = body.strip()
    note_status = note_text = None
    m = _NOTE.search(" " + text)
    if m:
        note_status, note_text = m.group("status"), m.group("text").strip()
        text = (" " + text)[: m.start()].strip()
    explicit = None
    m2 = _EXPLICIT_ID.search(text)
    if m2:
        explicit = m2.group("id")
        text = text[: m2.start()].strip()
    kind = "task"
    if text.startswith("GOAL:"):
        kind = "goal"
        text = text[len("GOAL:") :].strip()
    return kind, text, explicit, note_status, note_text


def slugify(text: str) -> str:
    """A stable id from an item's text: lowercase ASCII words joined by '-'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for w in words:
        candidate = f"{slug}-{w}" if slug else w
        if len(candidate) > MAX_SLUG:
            if not slug:
                slug = w[:MAX_SLUG]
            break
        slug = candidate
    return slug or "task"


def parse(raw: bytes, *, source: str = "TASKS.md") -> Plan:
    """Parse a TASKS.md. Raises BadInput for bytes that are not a text file at all;
    everything else wrong is a problem in the returned plan (see ``check``)."""
    body = decode(raw, source)
    lines = body.split("\n")
    problems: list[PlanProblem] = []
    tasks: list[Task] = []
    stack: list[Task] = []
    last_key: dict[int, str | None] = {}
    owners: dict[int, Task] = {}  # problem index -> the task it concerns
    fence: str | None = None

    def close(task: Task) -> None:
        if task.has_plan and not task.ended:
            owners[len(problems)] = task
            problems.append(
                PlanProblem(
                    "",
                    "truncated plan: no 'end' marker line after its plan; a plan without "
                    "its end marker is refused",
                    task.line,
                )
            )

    def pop_to(col: int) -> None:
        while stack and stack[-1].indent >= col:
            close(stack.pop())

    for lineno, line in enumerate(lines, start=1):
        text = _strip_eol(line)
        if lineno == 1:
            text = text.lstrip("\ufeff")
        fm = _FENCE.match(text)
        if fence is not None:
            if fm and fm.group(1) == fence:
                fence = None
            continue
        if fm:
            pop_to(_columns(text[: len(text) - len(text.lstrip())]))
            fence = fm.group(1)
            continue
        if not text.strip():
            continue
        item = parse_item_line(text)
        col = _columns(text[: len(text) - len(text.lstrip())])
        if item is not None:
            col, it = item
            pop_to(col)
            kind, item_text, explicit, note_status, note_text = split_body(it.body)
            task = Task(
                text=item_text,
                kind=kind,
                status=STATUSES.get(it.mark, "open"),
                line=lineno,
                indent=col,
                explicit_id=explicit,
                reason=note_text if note_status else None,
            )
            if it.mark not in STATUSES:
                owners[len(problems)] = task
                problems.append(
                    PlanProblem(
                        "",
                        f"unknown status mark [{it.mark}]: expected [ ] open, [x] done or "
                        "[!] parked",
                        lineno,
                    )
                )
            if not item_text:
                owners[len(problems)] = task
                problems.append(PlanProblem("", "empty item: a task needs a text", lineno))
            if stack:
                parent = stack[-1]
                if parent.parent is not None:
                    owners[len(problems)] = task
                    problems.append(
                        PlanProblem(
                            "",
                            "slices do not nest: a slice cannot hold slices of its own",
                            lineno,
                        )
                    )
                elif parent.ended:
                    owners[len(problems)] = task
                    problems.append(
                        PlanProblem(
                            "",
                            f"slice after the 'end' marker of its parent (line {parent.end_line})",
                            lineno,
                        )
                    )
                task.parent = parent
                parent.slices.append(task)
                parent.has_plan = True
            stack.append(task)
            last_key[id(task)] = None
            tasks.append(task)
            continue
        # not an item: a plan line of the deepest item it is indented under, or prose
        pop_to(col)
        if not stack:
            continue
        owner = stack[-1]
        before = len(problems)
        _plan_line(owner, text.strip(), lineno, last_key, problems)
        for k in range(before, len(problems)):
            owners[k] = owner
    while stack:
        close(stack.pop())
    _assign_ids(tasks, problems, owners)
    for i, t in enumerate(tasks):
        t.index = i
    for p_i, p in enumerate(problems):
        if p.line is not None and not p.path:
            at = owners.get(p_i) or _task_at(tasks, p.line)
            problems[p_i] = PlanProblem(
                _path_of(at, p.line), p.message, p.line, at.id if at else None
            )
    return Plan(tasks=tasks, problems=problems, source=source)


def _task_at(tasks: list[Task], line: int) -> Task | None:
    found = None
    for t in tasks:
        if t.line <= line:
            found = t
    return found


def _path_of(task: Task | None, line: int) -> str:
    return f"$.tasks[{task.index}]" if task is not None else "$"


def _plan_line(
    task: Task, line: str, lineno: int, last_key: dict[int, str | None], out: list[PlanProblem]
) -> None:
    def problem(message: str) -> None:
        out.append(PlanProblem("", message, lineno))

    if task.ended:
        problem(f"plan line after the 'end' marker (line {task.end_line}): {line[:60]!r}")
        return
    if task.slices and not line.startswith("end"):
        # After a slice closed, the parent's own keys belong before its first slice.
        problem("plan lines of a parent go before its first slice (or indent it under a slice)")
        return
    task.has_plan = True
    if line.lower() in ("end", "end.", "<!-- end -->"):
        task.ended = True
        task.end_line = lineno
        return
    if line.startswith(("- ", "* ", "+ ")) and last_key.get(id(task)) == "scope":
        _add_scope(task, [line[2:]], problem)
        return
    m = _KEY.match(line)
    if not m:
        problem(
            f"unrecognized plan line {line[:60]!r}: expected one of "
            + ", ".join(f"{k}:" for k in PLAN_KEYS)
            + " or end"
        )
        last_key[id(task)] = None
        return
    key = m.group("key").lower().replace("_", "-")
    value = m.group("value").strip()
    last_key[id(task)] = key
    if key == "budget":
        if task.budget:
            problem("budget given twice")
        task.budget = _parse_budget(value, problem)
    elif key == "scope":
        if value:
            _add_scope(task, value.split(","), problem)
    elif key == "depends":
        for dep in (d.strip() for d in value.split(",")):
            if not dep:
                continue
            dep = dep.removeprefix("#").removeprefix("{#").removesuffix("}")
            if dep not in task.depends:
                task.depends.append(dep)
        if not value:
            problem("depends: expected one or more task ids, comma separated")
    elif key == "allow-empty":
        v = value.lower()
        if v in ("yes", "true", "on"):
            task.allow_empty = True
        elif v in ("no", "false", "off"):
            task.allow_empty = False
        else:
            problem(f"allow-empty: expected yes or no, got {value[:40]!r}")
    elif key == "accept":
        if value:
            task.accept.append(value)
        else:
            problem("accept: expected the acceptance statement")
    elif key == "note":
        task.notes.append(value)
    else:
        problem(
            f"unknown plan key {key!r}: expected one of "
            + ", ".join(f"{k}:" for k in PLAN_KEYS)
            + " or end"
        )


def _add_scope(task: Task, entries: Iterable[str], problem: Any) -> None:

    for raw in entries:
        entry = raw.strip().strip("`").strip()
        if not entry:
            continue
        if entry.endswith("/"):
            entry += "**"
        reason = globs.escape_reason(entry)
        if reason:
            problem(f"scope {entry!r} {reason}")
            continue
        if entry not in task.scope:
            task.scope.append(entry)


def _parse_budget(value: str, problem: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    parts = [p.strip() for p in re.split(r"[/,;]|\band\b", value) if p.strip()]
    if not parts:
        problem("budget: expected '<N> lines / <M> files'")
        return out
    for part in parts:
        m = _BUDGET_PART.match(part)
        if not m:
            problem(f"budget: cannot read {part[:40]!r}: expected '<N> lines / <M> files'")
            continue
        unit = "lines" if m.group("unit").lower().startswith("line") else "files"
        if len(m.group("n").lstrip("-")) > MAX_BUDGET_DIGITS:  # int() refuses 4,300 digits
            problem(f"budget: {unit} {m.group('n')[:20]}... is too large")
            continue
        n = int(m.group("n"))
        if n < 1:
            problem(f"budget: {unit} must be >= 1, got {n}")
            continue
        if unit in out:
            problem(f"budget: {unit} given twice")
        out[unit] = n
    return out


def _assign_ids(tasks: list[Task], problems: list[PlanProblem], owners: dict[int, Task]) -> None:
    """Explicit ids first, then slugs in document order; a repeated slug gets -2, -3, ..."""
    taken: dict[str, int] = {}
    for t in tasks:
        if t.explicit_id is None:
            continue
        if not ID_PATTERN.match(t.explicit_id):
            owners[len(problems)] = t
            problems.append(
                PlanProblem(
                    "",
                    f"id {{#{t.explicit_id}}}: expected lowercase letters, digits and '-' "
                    "(starting with a letter or digit)",
                    t.line,
                )
            )
            t.explicit_id = None
            continue
        if t.explicit_id in taken:
            owners[len(problems)] = t
            problems.append(
                PlanProblem(
                    "",
                    f"duplicate id {{#{t.explicit_id}}} (first on line {taken[t.explicit_id]})",
                    t.line,
                )
            )
            continue
        t.id = t.explicit_id
        taken[t.id] = t.line
    for t in tasks:
        if t.id:
            continue
        base = slugify(t.text)
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}-{n}"
        t.id = candidate
        taken[candidate] = t.line


# --------------------------------------------------------------------------- checking


def threshold(contract: Mapping[str, Any] | None) -> tuple[int, int]:
    """(split_lines, split_files): the contract's, else the contract defaults."""
    from loopkit.contract import DEFAULTS

    plan = {**DEFAULTS["plan"], **((contract or {}).get("plan") or {})}
    return int(plan["split_lines"]), int(plan["split_files"])


def check(plan: Plan, *, contract: Mapping[str, Any] | None = None) -> list[PlanProblem]:
    """Every problem in a parsed plan (parse problems first), in document order."""
    split_lines_, split_files_ = threshold(contract)
    out = list(plan.problems)
    tasks = plan.tasks
    ids = plan.by_id()

    def problem(task: Task, where: str, message: str) -> None:
        out.append(PlanProblem(f"$.tasks[{task.index}]{where}", message, task.line, task.id))

    if not tasks:
        out.append(
            PlanProblem("$.tasks", "no tasks: expected checklist items such as '- [ ] Fix ...'")
        )
        return out
    planned = any(t.has_plan for t in tasks)
    for t in tasks:
        if planned and not t.has_plan and t.status == "open":
            problem(
                t,
                "",
                "no plan: other items carry plans, so this open item needs one too "
                "(budget:, scope:, end) -- or the file was cut short",
            )
        if t.has_plan and not t.slices:
            if not t.scope:
                problem(t, ".scope", "plan has no scope: list the files or globs it may change")
            if not t.budget:
                problem(
                    t, ".budget", "plan has no budget: expected 'budget: <N> lines / <M> files'"
                )
        for dep in t.depends:
            if dep == t.id:
                problem(t, ".depends", "a task cannot depend on itself")
            elif t.parent is not None and dep == t.parent.id:
                problem(t, ".depends", "a slice cannot depend on its own parent")
            elif dep not in ids:
                problem(t, ".depends", f"depends on unknown task {dep!r}")
            elif t.parent is not None and ids[dep].parent is t.parent and ids[dep].index > t.index:
                problem(
                    t,
                    ".depends",
                    f"slices run in their written order: {t.id!r} cannot depend on the later "
                    f"slice {dep!r}",
                )
        if _over(t, split_lines_, split_files_) and not t.slices:
            est = _estimate(t)
            if t.parent is not None:
                problem(
                    t,
                    ".budget",
                    f"slice estimate {est} is over the split threshold ({split_lines_} lines or "
                    f"{split_files_} files): make it smaller",
                )
            else:
                problem(
                    t,
                    ".budget",
                    f"estimate {est} is over the split threshold ({split_lines_} lines or "
                    f"{split_files_} files): split it into slices (nested items with disjoint "
                    "scopes)",
                )
        if t.slices:
            _check_slices(t, problem)
    cycle = _find_cycle(tasks, ids)
    if cycle:
        first = ids[cycle[0]]
        problem(first, ".depends", "dependency cycle: " + " -> ".join([*cycle, cycle[0]]))
    if contract is not None:
        _check_against_contract(tasks, contract, problem)
    out.sort(key=lambda p: p.line if p.line is not None else 10**9)
    return out


def _estimate(t: Task) -> str:
    parts = []
    if "lines" in t.budget:
        parts.append(f"{t.budget['lines']} lines")
    if "files" in t.budget:
        parts.append(f"{t.budget['files']} files")
    if len(t.scope) > t.budget.get("files", 0):
        parts.append(f"{len(t.scope)} scope entries")
    return " / ".join(parts)


def _over(t: Task, max_lines: int, max_files: int) -> bool:
    return (
        t.budget.get("lines", 0) > max_lines
        or t.budget.get("files", 0) > max_files
        or len(t.scope) > max_files
    )


def _check_slices(parent: Task, problem: Any) -> None:
    for s in parent.slices:
        if parent.scope:
            for g in s.scope:
                if not any(globs.overlap(g, p) for p in parent.scope):
                    problem(s, ".scope", f"scope {g!r} is outside its parent's scope")
    for i, a in enumerate(parent.slices):
        for b in parent.slices[i + 1 :]:
            for ga in a.scope:
                for gb in b.scope:
                    if globs.overlap(ga, gb):
                        problem(
                            b,
                            ".scope",
                            f"slice scopes must be disjoint: {gb!r} overlaps {ga!r} of slice "
                            f"{a.id!r}",
                        )


def _check_against_contract(tasks: list[Task], contract: Mapping[str, Any], problem: Any) -> None:
    scope = contract.get("scope") or {}
    allowed = list(scope.get("writable") or []) + list(scope.get("always_allowed") or [])
    protected = list(scope.get("protected") or [])
    for t in tasks:
        for g in t.scope:
            if allowed and not any(globs.overlap(g, a) for a in allowed):
                problem(t, ".scope", f"scope {g!r} is outside the contract's writable scope")
            elif globs.is_literal(g) and any(globs.overlap(g, p) for p in protected):
                problem(t, ".scope", f"scope {g!r} is protected by the contract")


def _find_cycle(tasks: list[Task], ids: dict[str, Task]) -> list[str] | None:
    """The first dependency cycle, depth first in document order; None when there is none.

    Iterative (an explicit stack of edge iterators): a chain of thousands of tasks is a
    plan like any other, not a RecursionError.
    """
    edges = {t.id: [d for d in all_depends(t) if d in ids] for t in tasks}
    state: dict[str, int] = {}  # 1: on the current path, 2: explored
    for t in tasks:
        if t.id in state:
            continue
        state[t.id] = 1
        path = [t.id]
        stack = [iter(edges.get(t.id, []))]
        while stack:
            for d in stack[-1]:
                if state.get(d) == 1:
                    return path[path.index(d) :]
                if d not in state:
                    state[d] = 1
                    path.append(d)
                    stack.append(iter(edges.get(d, [])))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None


# --------------------------------------------------------------------------- readiness


def all_depends(t: Task) -> list[str]:
    """Declared dependencies plus the implied ones: a slice waits for the slice before it
    and for whatever its parent waits for (nearest first, each once)."""
    deps = list(t.depends)
    node = t
    while node.parent is not None:  # up the parents in a loop: nesting depth is the file's
        parent = node.parent
        i = parent.slices.index(node)
        if i > 0:
            deps.append(parent.slices[i - 1].id)
        deps.extend(parent.depends)
        node = parent
    return list(dict.fromkeys(deps))


def effective_status(t: Task) -> str:
    """A parent with slices is done when every slice is, parked when any slice is."""
    if t.status != "open" or not t.slices:
        return t.status
    found: dict[int, str] = {}
    stack: list[tuple[Task, bool]] = [(t, False)]
    while stack:  # post-order without recursion: slices first, then their parent
        node, slices_done = stack.pop()
        if node.status != "open" or not node.slices:
            found[id(node)] = node.status
        elif not slices_done:
            stack.append((node, True))
            stack.extend((s, False) for s in node.slices)
        else:
            statuses = [found[id(s)] for s in node.slices]
            if "parked" in statuses:
                found[id(node)] = "parked"
            elif all(s == "done" for s in statuses):
                found[id(node)] = "done"
            else:
                found[id(node)] = "open"
    return found[id(t)]


def blocked_by(t: Task, ids: Mapping[str, Task]) -> list[str]:
    """The dependencies (transitively) that are not done, nearest first."""
    return [d for d in all_depends(t) if d in ids and effective_status(ids[d]) != "done"]


def is_ready(t: Task, ids: Mapping[str, Task]) -> bool:
    if t.parent is not None and t.parent.status != "open":
        return False  # a parent marked done or parked by hand closes its slices
    return t.status == "open" and not t.slices and not blocked_by(t, ids)


def parked_upstream(t: Task, ids: Mapping[str, Task], seen: set[str] | None = None) -> list[str]:
    """The parked tasks ``t`` waits for, directly or through others (depth first)."""
    seen = seen if seen is not None else set()
    out: list[str] = []
    stack = [iter(all_depends(t))]
    while stack:
        for d in stack[-1]:
            if d in seen or d not in ids:
                continue
            seen.add(d)
            if effective_status(ids[d]) == "parked":
                out.append(d)
            else:
                stack.append(iter(all_depends(ids[d])))
                break
        else:
            stack.pop()
    return out


def ready_tasks(plan: Plan) -> list[Task]:
    ids = plan.by_id()
    return [t for t in plan.tasks if is_ready(t, ids)]


def next_task(plan: Plan) -> Task | None:
    """The first ready task in document order: open, no slices, every dependency done."""
    ready = ready_tasks(plan)
    return ready[0] if ready else None


def summary(plan: Plan) -> str:
    """Why nothing is ready, in one line."""
    ids = plan.by_id()
    leaves = [t for t in plan.tasks if not t.slices]  # a leaf's effective status is its own
    done = [t for t in leaves if t.status == "done"]
    parked = [t for t in leaves if t.status == "parked"]
    waiting = [t for t in leaves if t.status == "open" and not is_ready(t, ids)]
    if len(done) == len(leaves):
        return f"nothing ready: all {len(leaves)} tasks are done"
    parts = [f"{len(done)} done"]
    if parked:
        parts.append(f"{len(parked)} parked ({', '.join(t.id for t in parked[:5])})")
    if waiting:
        blocked = []
        for t in waiting[:5]:
            up = parked_upstream(t, ids)
            blocked.append(f"{t.id} behind parked {', '.join(up)}" if up else f"{t.id} waits")
        parts.append(f"{len(waiting)} blocked ({'; '.join(blocked)})")
    return "nothing ready: " + ", ".join(parts)


# --------------------------------------------------------------------------- marking


class Edit:
    """A one-line rewrite prepared from the bytes read: applied only if that line is unchanged."""

    __slots__ = ("index", "new_line", "old_line", "original", "path", "task_id")

    def __init__(
        self,
        path: Path,
        task_id: str,
        original: bytes,
        index: int,
        old_line: bytes,
        new_line: bytes,
    ) -> None:
        self.path = path
        self.task_id = task_id
        self.original = original
        self.index = index  # 0-based line index
        self.old_line = old_line
        self.new_line = new_line

    @property
    def changed(self) -> bool:
        return self.old_line != self.new_line


def rewrite_line(line: bytes, status: str, reason: str | None) -> bytes:
    """One item line with a new status mark and note; every other byte kept."""
    body = line.rstrip(b"\r\n")
    eol = line[len(body) :]
    text = body.decode("utf-8")
    lead = ""
    if text.startswith("\ufeff"):
        lead, text = "\ufeff", text[1:]
    m = _ITEM.match(text)
    if not m:
        raise ValueError("not a checklist item line")
    rest = m.group("rest")
    core = rest.rstrip()
    trailing = rest[len(core) :]
    note = _NOTE.search(core)
    if note:
        core = core[: note.start()]
    if reason and status in ("done", "parked"):
        core += f" ({status}: {clean_reason(reason)})"
    elif note and note.group("status") == status:
        core += note.group(0)  # same status, no new reason: keep the note as it was
    new = (
        lead
        + text[: m.start("mark")]
        + MARKS[status]
        + text[m.end("mark") : m.start("rest")]
        + core
        + trailing
    )
    return new.encode("utf-8") + eol


def clean_reason(reason: str) -> str:
    """A reason as a note on one TASKS.md line: one line, no control sequences, no parens."""
    from loopkit.text import clean  # lazy: only marking writes a note

    one = clean(" ".join(reason.split()))
    one = one.replace("(", "[").replace(")", "]")
    return one[:200] if len(one) <= 200 else one[:197] + "..."


def plan_edit(
    raw: bytes, path: Path, task_id: str, status: str, reason: str | None, *, source: str
) -> Edit:
    if status not in MARKS:
        raise BadInput("--status", f"expected one of {', '.join(MARKS)}, got {status!r}")
    plan = parse(raw, source=source)
    task = plan.find(task_id)
    if task is None:
        known = ", ".join(t.id for t in plan.tasks[:12])
        raise BadInput(source, f"no task with id {task_id!r} (ids: {known})")
    lines = split_lines(raw)
    index = task.line - 1
    old = lines[index]
    return Edit(path, task_id, raw, index, old, rewrite_line(old, status, reason))


def prepare_mark(
    path: str | os.PathLike[str], task_id: str, status: str, *, reason: str | None = None
) -> Edit:
    """Read TASKS.md and prepare the rewrite of one task's line (nothing written yet)."""
    raw = read_bytes(path)
    # A symlinked TASKS.md is rewritten where it lives; replacing the link would cut it.
    target = Path(os.path.realpath(path))
    return plan_edit(raw, target, task_id, status, reason, source=str(path))


def apply_edit(edit: Edit, raw: bytes) -> bytes:
    lines = split_lines(raw)
    lines[edit.index] = edit.new_line
    return b"".join(lines)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    """An advisory lock on the file path currently names (re-opened if it was replaced)."""
    import fcntl

    for _ in range(50):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                yield fd
                return
        finally:
            os.close(fd)
    raise Conflict(f"{path}: the file keeps being replaced; nothing written")


def commit_edit(edit: Edit) -> bool:
    """Write the prepared rewrite atomically (temp file + os.replace) if the task's line is
    still what was read; lines others changed meanwhile are kept. False when nothing changed.
    Raises Conflict (exit 1) when the line itself changed, and writes nothing."""
    path = edit.path
    source = str(path)
    try:
        with _locked(path) as fd:
            current = b""
            while chunk := os.read(fd, 1 << 20):
                current += chunk
            if current != edit.original:
                # Someone wrote the file since we read it: re-find the task by its id.
                try:
                    again = plan_edit(current, path, edit.task_id, "open", None, source=source)
                except BadInput as e:
                    raise Conflict(
                        f"{source}: changed while marking ({e}); nothing written"
                    ) from None
                if again.old_line != edit.old_line:
                    raise Conflict(
                        f"{source}: line {again.index + 1} (task {edit.task_id!r}) changed "
                        "between read and write; nothing written -- read it again and retry"
                    )
                edit = Edit(path, edit.task_id, current, again.index, edit.old_line, edit.new_line)
            if not edit.changed:
                return False
            atomic_write(path, apply_edit(edit, current), sync=True, keep_mode=True)
            return True
    except FileNotFoundError:
        raise Conflict(f"{source}: removed while marking; nothing written") from None


def mark(
    path: str | os.PathLike[str], task_id: str, status: str, *, reason: str | None = None
) -> Edit:
    """Mark one task; returns the edit made (``edit.changed`` False when already so)."""
    edit = prepare_mark(path, task_id, status, reason=reason)
    commit_edit(edit)
    return edit
