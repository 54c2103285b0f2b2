"""The contract's scope, asked *before* a write: what an ACP agent may touch.

An ACP agent asks its client before a tool runs (``session/request_permission``) and, when
the client offers it, reads and writes files through the client (``fs/read_text_file``,
``fs/write_text_file``). loopkit is that client, and answers from the contract: a write
outside the writable scope, into a protected path, over a file of the base under
``add_only``, into ``.git`` or into a file that steers the loop (the contract, TASKS.md,
the memory file) is refused before it happens, and the refusal is recorded. This is a
first line only: an agent may ignore a refusal and write through its own shell, and
lk-diff, which reads the tree, remains the judge.

Files are reached by walking the repository one folder at a time with ``O_NOFOLLOW``
(``Room``): no symlink, planted before or swapped in during the call, leads a write or a
read out of the work tree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from loopkit.evidence import scope
from loopkit.values import record

#: Rules a refusal names (beside the scope's own: protected, add_only, outside_writable).
OUTSIDE_REPOSITORY = "outside_repository"
GIT_FOLDER = "git_folder"
READ_ONLY = "read_only"
#: Tool kinds (ACP ``ToolKind``) that change files.
WRITING_KINDS = ("edit", "delete", "move")
#: Tool kinds a read-only run (a judge) may use.
READING_KINDS = ("read", "search", "think", "fetch")
#: Keys of a tool's raw input that name a file it changes (claude, codex, gemini, ...).
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "filepath", "target", "new_path")


@record(slots=True)
class Verdict:
    """One decision: allowed or not, the rule that refused, the path it is about."""

    allowed: bool
    rule: str | None = None
    path: str | None = None


class Gate:
    """Decisions for one run: the repository's root, the scope, the control files."""

    root: str
    policy: scope.Policy | None
    control: tuple[str, ...]
    read_only: bool

    def __init__(
        self,
        root: str,
        scope_section: Mapping[str, Any] | None = None,
        *,
        control: Sequence[str] = (),
        read_only: bool = False,
    ) -> None:
        self.root = os.path.realpath(root)
        self.policy = (
            scope.Policy.from_contract({"scope": dict(scope_section)})
            if scope_section is not None
            else None
        )
        self.control = tuple(control)
        self.read_only = read_only

    def relative(self, path: str) -> str | None:
        """``path`` (absolute, or relative to the root) as a repository path, or None when
        it lies outside the repository (``..``, another absolute path)."""
        full = path if os.path.isabs(path) else os.path.join(self.root, path)
        for candidate in (os.path.normpath(full), os.path.realpath(full)):
            if candidate.startswith(self.root + os.sep):
                return os.path.relpath(candidate, self.root).replace(os.sep, "/")
        return None

    def _inside(self, rel: str) -> bool:
        """Whether ``rel`` still lies inside the root once symlinks are followed."""
        real = os.path.realpath(os.path.join(self.root, rel))
        return real.startswith(self.root + os.sep)

    def write(self, path: str) -> Verdict:
        """May the agent create, change or delete the file at ``path``?"""
        if self.read_only:
            return Verdict(False, READ_ONLY, self.relative(path) or path)
        rel = self.relative(path)
        if rel is None or not self._inside(rel):
            return Verdict(False, OUTSIDE_REPOSITORY, path)
        if rel == ".git" or rel.startswith(".git/"):
            return Verdict(False, GIT_FOLDER, rel)
        if rel in self.control:
            return Verdict(False, scope.CONTROL_FILE, rel)
        if self.policy is None:
            return Verdict(True, None, rel)
        new = not os.path.lexists(os.path.join(self.root, rel))
        if self.policy.in_scope(rel, new=new):
            return Verdict(True, None, rel)
        if self.policy.is_protected(rel):
            return Verdict(False, scope.PROTECTED, rel)
        if self.policy.is_add_only(rel) and not new:
            return Verdict(False, scope.ADD_ONLY, rel)
        return Verdict(False, scope.OUTSIDE_WRITABLE, rel)

    def tool(self, call: Mapping[str, Any]) -> Verdict:
        """May the tool call an agent asks about (``session/request_permission``'s
        ``toolCall``) run? Every file it would change must be writable; a command runs
        (the sandbox holds it, and lk-diff reads what it changed) unless the run is
        read-only."""
        kind = call.get("kind")
        paths = changed_paths(call)
        if self.read_only and kind not in READING_KINDS:
            return Verdict(
                False, READ_ONLY, (self.relative(paths[0]) or paths[0]) if paths else None
            )
        if kind in WRITING_KINDS or (kind in (None, "other") and _has_diff(call)):
            if not paths:
                return Verdict(True)
            for path in paths:
                verdict = self.write(path)
                if not verdict.allowed:
                    return verdict
            return Verdict(True, None, self.relative(paths[0]) or paths[0])
        return Verdict(True, None, paths[0] if paths else None)


def changed_paths(call: Mapping[str, Any]) -> list[str]:
    """The files a tool call names: its locations, its diffs, the raw input's path keys."""
    found: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str) and value and value not in found:
            found.append(value)

    for loc in _items(call.get("locations")):
        if isinstance(loc, Mapping):
            add(loc.get("path"))
    for item in _items(call.get("content")):
        if isinstance(item, Mapping) and item.get("type") == "diff":
            add(item.get("path"))
    raw = call.get("rawInput")
    if isinstance(raw, Mapping):
        for key in PATH_KEYS:
            add(raw.get(key))
        for edit in _items(raw.get("edits")):
            if isinstance(edit, Mapping):
                add(edit.get("file_path") or edit.get("path"))
    return found


def _has_diff(call: Mapping[str, Any]) -> bool:
    return any(
        isinstance(item, Mapping) and item.get("type") == "diff"
        for item in _items(call.get("content"))
    )


def _items(value: Any) -> list[Any]:
    """A list the agent sent, or nothing when it sent something else."""
    return value if isinstance(value, list) else []


class Escape(Exception):
    """A path that would lead out of the work tree (a symlink on the way, ``..``)."""


class Room:
    """Files inside one folder, reached without following any symlink."""

    root: str

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def _parent(self, rel: str, *, create: bool) -> tuple[int, str]:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise Escape(rel)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as e:
                    raise Escape(rel) from e  # a symlink (ELOOP) or a file on the way
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def read(self, rel: str) -> str:
        fd, name = self._parent(rel, create=False)
        try:
            try:
                f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno == 40:  # ELOOP: the file is a symlink
                    raise Escape(rel) from e
                raise
            with os.fdopen(f, "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        finally:
            os.close(fd)

    def write(self, rel: str, text: str) -> None:
        """Write ``rel`` whole (a temporary file beside it, renamed over it: a symlink
        there is replaced, never followed)."""
        fd, name = self._parent(rel, create=True)
        tmp = f".{name}.loopkit-acp-{os.getpid()}"
        try:
            mode = 0o644
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if st.st_mode & 0o170000 == 0o100000:
                    mode = st.st_mode & 0o7777
            except FileNotFoundError:
                pass
            f = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=fd)
            try:
                with os.fdopen(f, "wb") as handle:
                    handle.write(text.encode("utf-8"))
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=fd)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)


def window(text: str, line: Any, limit: Any) -> str:
    """``fs/read_text_file``'s ``line`` (1-based) and ``limit`` applied to ``text``."""
    if not isinstance(line, int) and not isinstance(limit, int):
        return text
    lines = text.splitlines(keepends=True)
    start = max(line - 1, 0) if isinstance(line, int) else 0
    end = start + limit if isinstance(limit, int) and limit >= 0 else len(lines)
    return "".join(lines[start:end])
