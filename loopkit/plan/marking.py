"""Marking: rewrite one task's line in TASKS.md, and only that line.

The rewrite is prepared from the bytes read (``prepare_mark``), then committed under an
advisory lock only if that line is still what was read (``commit_edit``): lines others
changed meanwhile are kept, a changed line itself is a ``Conflict`` and nothing is written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write
from loopkit.plan.parsing import ITEM_LINE, STATUS_NOTE, parse, read_bytes, split_lines

#: A task's status as the mark between its brackets.
MARKS = {"open": " ", "done": "x", "parked": "!"}


class Conflict(LoopkitError):
    """The line to rewrite changed between reading and writing: nothing was written."""

    code = ExitCode.FAILED_CHECK


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
    with _locked(path) as fd:
        current = b""
        while chunk := os.read(fd, 1 << 20):
            current += chunk
        if current != original:
            raise Conflict(f"{path}: changed while drafting; nothing written -- draft again")
        atomic_write(path, whole, sync=True, keep_mode=True)
