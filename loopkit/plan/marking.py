"""Marking: rewrite one task's line in TASKS.md -- and the parents it completes.

The rewrite is prepared from the bytes read (``prepare_mark``), then committed under an
advisory lock only if that line is still what was read (``commit_edit``): lines others
changed meanwhile are kept, a changed line itself is a ``Conflict`` and nothing is written.
Marking the last open slice done marks its parent done too (reopening or parking one reopens it);
the first mark of an ``each:`` slice writes the item's slices out before its ``end`` line,
so that each is marked on its own line from then on.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write
from loopkit.plan.expanding import expand, root_of, tree_files
from loopkit.plan.parsing import ITEM_LINE, STATUS_NOTE, parse, read_bytes, split_lines
from loopkit.plan.readiness import effective_status
from loopkit.text import clean

if TYPE_CHECKING:
    from loopkit.plan.parsing import Task

#: A task's status as the mark between its brackets.
MARKS = {"open": " ", "done": "x", "parked": "!"}


class Conflict(LoopkitError):
    """The line to rewrite changed between reading and writing: nothing was written."""

    code = ExitCode.FAILED_CHECK


class Edit:
    """A rewrite of one region of TASKS.md prepared from the bytes read: lines
    ``index .. index + count`` become ``new_line``. Usually the region is the task's own
    line; marking the last open slice also rewrites its parent's line (the region runs
    from the parent's line to the slice's), and the first mark of an ``each:`` slice
    writes the item's slices out before its ``end`` line. Applied only if ``own`` -- the
    task's line, or for an ``each:`` slice its item from the item's line to its ``end`` --
    is unchanged."""

    __slots__ = (
        "count",
        "index",
        "line",
        "new_line",
        "old_line",
        "old_status",
        "original",
        "own",
        "path",
        "reason",
        "status",
        "task_id",
        "tree",
    )

    def __init__(
        self,
        path: Path,
        task_id: str,
        original: bytes,
        index: int,
        old_line: bytes,
        new_line: bytes,
        *,
        count: int = 1,
        own: bytes | None = None,
        status: str = "open",
        reason: str | None = None,
        old_status: str = "open",
        line: int | None = None,
        tree: Collection[str] | None = None,
    ) -> None:
        self.path = path
        self.task_id = task_id
        self.original = original
        self.index = index  # 0-based index of the region's first line
        self.count = count  # lines in the region
        self.old_line = old_line  # the region's bytes as read
        self.new_line = new_line  # what replaces them
        self.own = old_line if own is None else own
        self.status = status
        self.reason = reason
        self.old_status = old_status
        self.line = index + 1 if line is None else line  # the task's line, once written
        self.tree = tree

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
    m = ITEM_LINE.match(text)
    if not m:
        raise ValueError("not a checklist item line")
    rest = m.group("rest")
    core = rest.rstrip()
    trailing = rest[len(core) :]
    note = STATUS_NOTE.search(core)
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
    one = clean(" ".join(reason.split()))
    one = one.replace("(", "[").replace(")", "]")
    return one[:200] if len(one) <= 200 else one[:197] + "..."


def plan_edit(
    raw: bytes,
    path: Path,
    task_id: str,
    status: str,
    reason: str | None,
    *,
    source: str,
    tree: Collection[str] | None = None,
) -> Edit:
    """The rewrite marking ``task_id``: its line, the parents it completes (or reopens),
    and for a slice of an ``each:`` item not yet written out, the item's slices written
    out before its ``end`` line. ``tree`` (the repository's files, found from ``path``
    when needed and not given) expands the ``each:`` items."""
    if status not in MARKS:
        raise BadInput("--status", f"expected one of {', '.join(MARKS)}, got {status!r}")
    plan = parse(raw, source=source)
    if any(t.each is not None and not t.slices for t in plan.tasks):
        if tree is None:
            tree = tree_files(root_of(path.parent if path.parent.is_dir() else Path.cwd()))
        expand(plan, tree)
    task = plan.find(task_id)
    if task is None:
        known = ", ".join(t.id for t in plan.tasks[:12])
        raise BadInput(source, f"no task with id {task_id!r} (ids: {known})")
    lines = split_lines(raw)
    if task.expanded:
        first, last, own, region, line = _write_out(lines, task, status, reason, raw)
    else:
        own, line = lines[task.line - 1], task.line
        new = {task.line - 1: rewrite_line(own, status, reason)}
        _roll_up(task, status, lines, new)
        first, last = min(new), max(new)
        region = b"".join(new.get(i, lines[i]) for i in range(first, last + 1))
    return Edit(
        path,
        task_id,
        raw,
        first,
        b"".join(lines[first : last + 1]),
        region,
        count=last - first + 1,
        own=own,
        status=status,
        reason=reason,
        old_status=task.status,
        line=line,
        tree=tree,
    )


def _roll_up(task: Task, status: str, lines: list[bytes], new: dict[int, bytes]) -> None:
    """A parent follows its slices: done once every slice is done, open again once one is
    reopened or parked (an open parent with a parked slice counts as parked)."""
    node, status_of = task, {id(task): status}
    while node.parent is not None:
        parent = node.parent
        slices = [status_of.get(id(s)) or effective_status(s) for s in parent.slices]
        if status == "done" and all(s == "done" for s in slices) and parent.status == "open":
            want = "done"
        elif status != "done" and parent.status == "done":
            want = "open"  # a slice reopened or parked: its parent is not done any more
        else:
            return
        i = parent.line - 1
        new[i] = rewrite_line(lines[i], want, None)
        status_of[id(parent)] = want
        node = parent


def _write_out(
    lines: list[bytes], task: Task, status: str, reason: str | None, raw: bytes
) -> tuple[int, int, bytes, bytes, int]:
    """The first mark of an ``each:`` slice: the item's slices written before its ``end``
    line (the item's own lines kept byte for byte), this one with its new status. The
    region's first and last index, the item as read, what replaces it, the slice's line."""
    parent = task.parent
    assert parent is not None and parent.end_line is not None
    first, end = parent.line - 1, parent.end_line - 1
    own = b"".join(lines[first : end + 1])
    if status == task.status and not reason:  # already so: nothing to write out
        return first, end, own, own, task.line
    end_line = lines[end]
    body = end_line.rstrip(b"\r\n")
    eol = end_line[len(body) :] or (b"\r\n" if b"\r\n" in raw else b"\n")
    lead = body[: len(body) - len(body.lstrip())].decode("utf-8")
    block = written_out(parent, {task.id: (status, reason)})
    inserted = [f"{lead}{line}".encode() + eol for line in block]
    # The item follows its slices as it does for written ones (see _roll_up).
    others = [s.status for s in parent.slices if s is not task]
    top = lines[first]
    if status == "done" and parent.status == "open" and all(o == "done" for o in others):
        top = rewrite_line(top, "done", None)
    elif status != "done" and parent.status == "done":
        top = rewrite_line(top, "open", None)
    region = top + b"".join(lines[first + 1 : end]) + b"".join(inserted) + end_line
    marked = [s.id for s in parent.slices].index(task.id)
    return first, end, own, region, end + 1 + _item_offset(block, marked)


def _item_offset(block: list[str], n: int) -> int:
    """The index in ``block`` of its ``n``-th item line (0-based)."""
    items = [i for i, line in enumerate(block) if line.startswith("- [")]
    return items[n]


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
    lines[edit.index : edit.index + edit.count] = [edit.new_line]
    return b"".join(lines)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    """An advisory lock on the file path currently names (re-opened if it was replaced)."""
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
    """Write the prepared rewrite atomically (temp file + os.replace) if the task's own
    line (for an ``each:`` slice: its item) is still what was read; lines others changed
    meanwhile are kept. False when nothing changed. Raises Conflict (exit 1) when that
    line itself changed, and writes nothing."""
    path = edit.path
    source = str(path)
    try:
        with _locked(path) as fd:
            current = b""
            while chunk := os.read(fd, 1 << 20):
                current += chunk
            if current != edit.original:
                # Someone wrote the file since we read it: re-find the task by its id and
                # prepare the same mark on what is there now.
                try:
                    again = plan_edit(
                        current,
                        path,
                        edit.task_id,
                        edit.status,
                        edit.reason,
                        source=source,
                        tree=edit.tree,
                    )
                except BadInput as e:
                    raise Conflict(
                        f"{source}: changed while marking ({e}); nothing written"
                    ) from None
                if again.own != edit.own:
                    raise Conflict(
                        f"{source}: line {again.index + 1} (task {edit.task_id!r}) changed "
                        "between read and write; nothing written -- read it again and retry"
                    )
                edit = again
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


def append_plan(path: Path, original: bytes, whole: bytes) -> None:
    """Write ``whole`` (``original`` with items appended) atomically, under the lock, if
    the file still holds ``original``; a Conflict (exit 1) and nothing written otherwise.
    No existing item is rewritten: ``whole`` must start with ``original``."""
    if not whole.startswith(original):
        raise ValueError("an appended plan keeps every byte of the file")
    if not original and not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise Conflict(f"{path}: created while drafting; nothing written") from None
        os.close(fd)
    replace_plan(path, original, whole, doing=("drafting", "draft"))


def replace_plan(
    path: Path, original: bytes, whole: bytes, *, doing: tuple[str, str] = ("splitting", "split")
) -> None:
    """Write ``whole`` atomically, under the lock, if the file still holds ``original``;
    a Conflict (exit 1) and nothing written otherwise (the model took its time, and the
    file may have moved on meanwhile). ``doing``: what was going on, and what to do again."""
    with _locked(path) as fd:
        current = b""
        while chunk := os.read(fd, 1 << 20):
            current += chunk
        if current != original:
            raise Conflict(f"{path}: changed while {doing[0]}; nothing written -- {doing[1]} again")
        atomic_write(path, whole, sync=True, keep_mode=True)


def written_out(parent: Task, statuses: dict[str, tuple[str, str | None]]) -> list[str]:
    """The expanded slices of ``parent`` as written slices (lines without indentation or
    line endings; a slice's plan lines indented by two): id, text, budget, scope, files,
    issue, closes, accept and check lines -- the same task documents as the expansion.
    ``statuses`` gives a slice its (status, note) other than the parent's."""
    out: list[str] = []
    for s in parent.slices:
        status, note = statuses.get(s.id, (s.status, None))
        tail = f" ({status}: {clean_reason(note)})" if note and status != "open" else ""
        goal = "GOAL: " if s.kind == "goal" else ""
        out.append(f"- [{MARKS[status]}] {goal}{s.text} {{#{s.id}}}{tail}")
        budget = " / ".join(f"{s.budget[k]} {k}" for k in ("lines", "files") if k in s.budget)
        if budget:
            out.append(f"  budget: {budget}")
        out.append(f"  scope: {', '.join(s.scope)}")
        out.append(f"  files: {', '.join(s.files)}")
        for key, value in (("issue", s.issue), ("closes", s.closes)):
            if value is not None:
                out.append(f"  {key}: {value}")
        out.extend(f"  accept: {a}" for a in s.accept)
        out.extend(f"  check: {c}" for c in s.checks)
        out.append("  end")
    return out
