"""Reading a TASKS.md: its bytes, its lines, its checklist items, and the Plan they make.

Everything wrong in a file that is text at all becomes a ``PlanProblem`` of the returned
plan (``loopkit.plan.checking`` adds the problems of the plans as a whole); only bytes
that are no checklist at all raise ``BadInput``.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from loopkit import loader
from loopkit.errors import BadInput
from loopkit.evidence import globs

#: A TASKS.md larger than this is refused before it is read (a plan is not a data file).
MAX_TASKS_BYTES = 4 * 1024 * 1024
STATUSES = {" ": "open", "x": "done", "X": "done", "!": "parked"}
PLAN_KEYS = (
    "budget",
    "scope",
    "files",
    "new",
    "depends",
    "allow-empty",
    "accept",
    "check",
    "note",
    "issue",
    "closes",
    "each",
)
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_SLUG = 48
#: A budget is a count of lines or files: more digits than this is not an estimate.
MAX_BUDGET_DIGITS = 12

#: A checklist item line; ``rest`` is everything after its "[m]" (marking rewrites it).
ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<bullet>[-*+])[ \t]+\[(?P<mark>.)\](?P<rest>.*)$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_EXPLICIT_ID = re.compile(r"\s*\{#(?P<id>[^{}\s]*)\}\s*$")
#: The note marking leaves at the end of an item: " (parked: why)" or " (done: why)".
STATUS_NOTE = re.compile(r"\s+\((?P<status>parked|done):\s*(?P<text>[^()]*)\)\s*$")
_KEY = re.compile(r"^(?P<key>[A-Za-z][A-Za-z_-]*)\s*:(?P<value>.*)$")
_BUDGET_PART = re.compile(r"^~?\s*(?P<n>-?\d+)\s*(?P<unit>lines?|files?)$", re.IGNORECASE)


# Plain classes rather than dataclasses: building dataclasses costs milliseconds at
# every start-up of `lk-plan next`.


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
        self.checks: list[str] = []  # check: lines, the task's own acceptance commands
        self.notes: list[str] = []
        self.files: list[str] = []  # files: the exact files the task changes
        self.new_files: list[str] = []  # the ones it creates (new: or a '+path' entry)
        self.file_lines: dict[str, int] = {}  # each file's line, for problems naming it
        self.issue: str | None = None  # issue: the issue the task belongs to
        self.closes: str | None = None  # closes: the issue it closes
        self.each: str | None = None  # each: one slice per matching file
        self.each_line: int | None = None
        self.expanded = False  # a slice made by an each: expansion, not written
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
        for name in ("accept", "checks", "notes", "files", "new_files"):
            if items := getattr(self, name):
                out[name] = list(items)
        for name in ("issue", "closes", "each"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        if self.expanded:
            out["expanded"] = True
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
    return loader.file_text(
        raw, source, "a Markdown checklist (TASKS.md)", most=MAX_TASKS_BYTES, noun="a TASKS.md"
    )


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
    m = ITEM_LINE.match(_strip_eol(line).lstrip("\ufeff"))
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
    m = STATUS_NOTE.search(" " + text)
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
    reader = _Reader()
    for lineno, line in enumerate(decode(raw, source).split("\n"), start=1):
        text = _strip_eol(line)
        reader.line(lineno, text.lstrip("\ufeff") if lineno == 1 else text)
    return reader.plan(source)


class _Reader:
    """A TASKS.md read line by line: the items found, the ones still open above the
    current line (``stack``), and the problems noted."""

    def __init__(self) -> None:
        self.found: list[tuple[Task, int, str]] = []  # (the task it concerns, line, message)
        self.tasks: list[Task] = []
        self.stack: list[Task] = []
        self.last_key: dict[int, str | None] = {}
        self.fence: str | None = None

    def note(self, task: Task, line: int, message: str) -> None:
        self.found.append((task, line, message))

    def close(self, task: Task) -> None:
        if task.has_plan and not task.ended:
            self.note(
                task,
                task.line,
                "truncated plan: no 'end' marker line after its plan; a plan without "
                "its end marker is refused",
            )

    def pop_to(self, col: int) -> None:
        while self.stack and self.stack[-1].indent >= col:
            self.close(self.stack.pop())

    def line(self, lineno: int, text: str) -> None:
        """One line: a code fence, an item, a plan line of the deepest item it is
        indented under, or prose."""
        fm = _FENCE.match(text)
        if self.fence is not None:
            if fm and fm.group(1) == self.fence:
                self.fence = None
            return
        if fm:
            self.pop_to(_columns(text[: len(text) - len(text.lstrip())]))
            self.fence = fm.group(1)
            return
        if not text.strip():
            return
        item = parse_item_line(text)
        if item is not None:
            self.item(lineno, *item)
            return
        self.pop_to(_columns(text[: len(text) - len(text.lstrip())]))
        if self.stack:
            _plan_line(self.stack[-1], text.strip(), lineno, self.last_key, self.note)

    def item(self, lineno: int, col: int, it: _Item) -> None:
        """A checklist item: a task, or a slice of the item it is indented under."""
        self.pop_to(col)
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
            self.note(
                task,
                lineno,
                f"unknown status mark [{it.mark}]: expected [ ] open, [x] done or [!] parked",
            )
        if not item_text:
            self.note(task, lineno, "empty item: a task needs a text")
        if self.stack:
            self.slice_of(self.stack[-1], task, lineno)
        self.stack.append(task)
        self.last_key[id(task)] = None
        self.tasks.append(task)

    def slice_of(self, parent: Task, task: Task, lineno: int) -> None:
        if parent.parent is not None and parent.parent.parent is not None:
            self.note(
                task,
                lineno,
                "slices do not nest deeper: a sub-slice (a slice's own slice, as "
                "lk-plan split writes) cannot hold slices of its own",
            )
        elif parent.ended:
            self.note(
                task,
                lineno,
                f"slice after the 'end' marker of its parent (line {parent.end_line})",
            )
        task.parent = parent
        parent.slices.append(task)
        parent.has_plan = True

    def plan(self, source: str) -> Plan:
        """The plan once every line is read: open items closed, ids assigned."""
        while self.stack:
            self.close(self.stack.pop())
        _assign_ids(self.tasks, self.note)
        for i, t in enumerate(self.tasks):
            t.index = i
        # Built only now: a problem names its task's index and id, known once all are read.
        problems = [
            PlanProblem(f"$.tasks[{t.index}]", message, line, t.id)
            for t, line, message in self.found
        ]
        return Plan(tasks=self.tasks, problems=problems, source=source)


def _plan_line(
    task: Task,
    line: str,
    lineno: int,
    last_key: dict[int, str | None],
    note: Callable[[Task, int, str], None],
) -> None:
    def problem(message: str) -> None:
        note(task, lineno, message)

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
    if line.startswith(("- ", "* ")) and last_key.get(id(task)) in ("files", "new"):
        _add_files(task, [line[2:]], lineno, problem, new=last_key.get(id(task)) == "new")
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
    last_key[id(task)] = key
    read = _KEY_READERS.get(key)
    if read is None:
        problem(
            f"unknown plan key {key!r}: expected one of "
            + ", ".join(f"{k}:" for k in PLAN_KEYS)
            + " or end"
        )
        return
    read(task, key, m.group("value").strip(), lineno, problem)


#: What one plan key's reader is given: the task, the key, its value, the line number,
#: and where a problem goes.
KeyReader = Callable[[Task, str, str, int, Callable[[str], None]], None]


def _read_budget(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    if task.budget:
        problem("budget given twice")
    task.budget = _parse_budget(value, problem)


def _read_scope(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    if value:
        _add_scope(task, value.split(","), problem)


def _read_depends(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    for dep in (d.strip() for d in value.split(",")):
        if not dep:
            continue
        dep = dep.removeprefix("#").removeprefix("{#").removesuffix("}")
        if dep not in task.depends:
            task.depends.append(dep)
    if not value:
        problem("depends: expected one or more task ids, comma separated")


def _read_allow_empty(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    v = value.lower()
    if v in ("yes", "true", "on"):
        task.allow_empty = True
    elif v in ("no", "false", "off"):
        task.allow_empty = False
    else:
        problem(f"allow-empty: expected yes or no, got {value[:40]!r}")


#: The keys each line of which adds one entry to a list of the task: key -> (the list,
#: the problem when the value is empty; None where an empty entry is kept).
_LISTED: dict[str, tuple[str, str | None]] = {
    "accept": ("accept", "accept: expected the acceptance statement"),
    "check": ("checks", "check: expected a shell command (the task's own acceptance check)"),
    "note": ("notes", None),
}


def _read_listed(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    """An ``accept:``, ``check:`` (a command: backticks around it dropped) or ``note:``."""
    entries, empty = _LISTED[key]
    entry = value.strip("`").strip() if key == "check" else value
    if entry or empty is None:
        getattr(task, entries).append(entry)
    else:
        problem(empty)


def _read_files(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    if value:
        _add_files(task, value.split(","), lineno, problem, new=key == "new")


def _read_issue(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    if not value:
        problem(f"{key}: expected the issue (a number such as #42, or a URL)")
    elif getattr(task, key) is not None:
        problem(f"{key} given twice")
    else:
        setattr(task, key, value)


def _read_each(
    task: Task, key: str, value: str, lineno: int, problem: Callable[[str], None]
) -> None:
    entry = value.strip("`").strip()
    reason = globs.escape_reason(entry) if entry else None
    if not entry:
        problem("each: expected a glob, one slice per matching file")
    elif task.each is not None:
        problem("each given twice")
    elif reason:
        problem(f"each {entry!r} {reason}")
    else:
        task.each = globs.normalize(entry)
        task.each_line = lineno


#: Each plan key (``budget:``, ``scope:`` ...) and how its value is read.
_KEY_READERS: dict[str, KeyReader] = {
    "budget": _read_budget,
    "scope": _read_scope,
    "depends": _read_depends,
    "allow-empty": _read_allow_empty,
    "accept": _read_listed,
    "check": _read_listed,
    "note": _read_listed,
    "files": _read_files,
    "new": _read_files,
    "issue": _read_issue,
    "closes": _read_issue,
    "each": _read_each,
}


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


def _add_files(task: Task, entries: Iterable[str], lineno: int, problem: Any, *, new: bool) -> None:
    """Exact paths of ``files:`` (a '+path' entry is a new file) or ``new:``."""
    for raw in entries:
        entry = raw.strip().strip("`").strip()
        is_new = new
        if entry.startswith("+"):
            is_new, entry = True, entry[1:].strip()
        if not entry:
            continue
        while entry.startswith("./"):
            entry = entry[2:]
        reason = globs.escape_reason(entry)
        if reason:
            problem(f"file {entry!r} {reason.replace('scope globs', 'paths')}")
            continue
        if not globs.is_literal(entry) or entry.endswith("/"):
            problem(f"file {entry!r} is not one path: files: lists exact paths, scope: takes globs")
            continue
        if entry not in task.files:
            task.files.append(entry)
            task.file_lines[entry] = lineno
        if is_new and entry not in task.new_files:
            task.new_files.append(entry)


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


def _assign_ids(tasks: list[Task], note: Callable[[Task, int, str], None]) -> None:
    """Explicit ids first, then slugs in document order; a repeated slug gets -2, -3, ..."""
    taken: dict[str, int] = {}
    for t in tasks:
        if t.explicit_id is None:
            continue
        if not ID_PATTERN.match(t.explicit_id):
            note(
                t,
                t.line,
                f"id {{#{t.explicit_id}}}: expected lowercase letters, digits and '-' "
                "(starting with a letter or digit)",
            )
            t.explicit_id = None
            continue
        if t.explicit_id in taken:
            note(
                t,
                t.line,
                f"duplicate id {{#{t.explicit_id}}} (first on line {taken[t.explicit_id]})",
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
