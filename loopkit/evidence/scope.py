"""The scope policy: which paths a change may touch, and how big it may be.

Globs mean what ``loopkit.evidence.globs`` says (the one engine lk-plan uses too).

Rules, in order: a path matching ``always_allowed`` is never a violation; a path matching
``protected`` is one (protected wins over writable); a path matching ``add_only`` may be
added (a new file there is in scope, writable or not) but a file there the base already
holds may not be modified, deleted, renamed away or retyped (add, never change or delete:
the project's own tests, which judge the worker); otherwise it must match ``writable``.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopkit.evidence.globs import matches
from loopkit.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.sections import Policy as PolicySection
    from loopkit.sections import ScopeViolation

#: Rule names, as they appear in ``violations[].rule``.
PROTECTED = "protected"
PROTECTED_DELETED = "protected_deleted"
OUTSIDE_WRITABLE = "outside_writable"
RENAME_OUT_OF_SCOPE = "rename_out_of_scope"
SYMLINK_OUTSIDE = "symlink_outside_repo"
#: A file that steers the loop (the contract, TASKS.md, the memory file) was changed.
CONTROL_FILE = "control_file"
SYMLINK_PROTECTED = "symlink_into_protected"
#: A file the base holds under ``add_only`` scope was modified, deleted, renamed or retyped.
ADD_ONLY = "add_only"
#: Statuses that bring in a path the base did not hold (a copy's source is left as it was).
_NEW = ("added", "copied")
#: A new gitlink or a nested repository: the commit would not hold the files.
NESTED_REPOSITORY = "nested_repository"
#: A file under .git that steers git or loopkit (hooks, config, info/, modules/, the
#: contract cache) changed since lk-invoke recorded it.
GIT_CONTROL_CHANGED = "git_control_changed"
#: HEAD, or the branch it names, no longer points where it did when the worker started.
HEAD_MOVED = "head_moved"
#: A file the ignore rules of the base ignored is in the change: the worker rewrote a
#: ``.gitignore`` to let it in (an ignored ``.env`` swept into the commit).
IGNORED_AT_BASE = "ignored_at_base"
#: A changed path whose name is not UTF-8: no JSON document can name it as it is, and a
#: checkout on a system that wants UTF-8 names (macOS, Windows) cannot write it.
PATH_NOT_UTF8 = "path_not_utf8"
#: A FIFO, socket or device node in the work tree: git holds no such file (the commit
#: could not), and opening one blocks whoever reads it (git reading a ``.gitignore``).
SPECIAL_FILE = "special_file"
TOO_MANY_FILES = "changed_files"
TOO_MANY_LINES = "changed_lines"
TOO_MANY_BYTES = "changed_bytes"
#: ``path`` of a violation about the whole change (a budget) rather than one file.
WHOLE_CHANGE = "*"


class Policy(Value):
    writable: tuple[str, ...]
    protected: tuple[str, ...]
    always_allowed: tuple[str, ...]
    #: Globs where a new file is allowed and a file of the base may not change.
    add_only: tuple[str, ...]
    #: Files that steer the loop: a change is a violation whatever the globs say.
    control: tuple[str, ...]
    changed_files: int | None
    changed_lines: int | None
    changed_bytes: int | None
    #: Each path's (always_allowed, protected, writable, add_only) answers, computed once.
    _seen: dict[str, tuple[bool, bool, bool, bool]]

    _fields = (
        "writable",
        "protected",
        "always_allowed",
        "add_only",
        "control",
        "changed_files",
        "changed_lines",
        "changed_bytes",
    )

    def __init__(
        self,
        writable: tuple[str, ...] = ("**",),
        protected: tuple[str, ...] = (),
        always_allowed: tuple[str, ...] = (),
        add_only: tuple[str, ...] = (),
        control: tuple[str, ...] = (),
        changed_files: int | None = None,
        changed_lines: int | None = None,
        changed_bytes: int | None = None,
    ) -> None:
        self._set(
            writable=writable,
            protected=protected,
            always_allowed=always_allowed,
            add_only=add_only,
            control=control,
            changed_files=changed_files,
            changed_lines=changed_lines,
            changed_bytes=changed_bytes,
            _seen={},
        )

    @classmethod
    def from_contract(cls, contract: Mapping[str, Any] | None) -> Policy | None:
        """The policy a contract sets; None without a contract (nothing is checked)."""
        if not contract:
            return None
        scope = contract.get("scope") or {}
        budgets = contract.get("budgets") or {}
        return cls(
            writable=tuple(scope.get("writable") or ()),
            protected=tuple(scope.get("protected") or ()),
            always_allowed=tuple(scope.get("always_allowed") or ()),
            add_only=tuple(scope.get("add_only") or ()),
            changed_files=budgets.get("changed_files"),
            changed_lines=budgets.get("changed_lines"),
            changed_bytes=budgets.get("changed_bytes"),
        )

    def but(self, **changed: Any) -> Policy:
        """The same policy with ``changed`` fields replaced."""
        return Policy(**{**{name: getattr(self, name) for name in self._fields}, **changed})

    def as_dict(self) -> PolicySection:
        return {
            "writable": list(self.writable),
            "protected": list(self.protected),
            "always_allowed": list(self.always_allowed),
            "add_only": list(self.add_only),
            "changed_files": self.changed_files,
            "changed_lines": self.changed_lines,
            "changed_bytes": self.changed_bytes,
        }

    def _facts(self, path: str) -> tuple[bool, bool, bool, bool]:
        got = self._seen.get(path)
        if got is None:
            got = (
                matches(path, self.always_allowed),
                matches(path, self.protected),
                matches(path, self.writable),
                matches(path, self.add_only),
            )
            self._seen[path] = got
        return got

    def allowed(self, path: str) -> bool:
        return self._facts(path)[0]

    def is_protected(self, path: str) -> bool:
        allowed, protected, _, _ = self._facts(path)
        return protected and not allowed

    def is_add_only(self, path: str) -> bool:
        """Whether a file of the base at ``path`` must stay as it is (new ones may come)."""
        allowed, protected, _, add_only = self._facts(path)
        return add_only and not allowed and not protected

    def in_scope(self, path: str, *, new: bool = False) -> bool:
        """May a change touch ``path``? (always_allowed, else not protected and writable; a
        ``new`` file also under add_only, a file of the base there never)."""
        allowed, protected, writable, add_only = self._facts(path)
        if allowed:
            return True
        if protected:
            return False
        if add_only:
            return new
        return writable


class Violation(Value):
    rule: str
    path: str
    detail: str

    _fields = ("rule", "path", "detail")

    def __init__(self, rule: str, path: str, detail: str = "") -> None:
        self._set(rule=rule, path=path, detail=detail)

    def as_dict(self) -> ScopeViolation:
        d: ScopeViolation = {"rule": self.rule, "path": self.path}
        if self.detail:
            d["detail"] = self.detail
        return d


class Change(Value):
    """One changed path, as the policy sees it."""

    path: str
    status: str  # added, modified, deleted, renamed, type_changed, ...
    added: int
    deleted: int
    old_path: str | None
    symlink_target: str | None  # when the new side is a symlink
    size: int  # bytes of the new content (0 for a deletion)
    extra: dict[str, Any]

    _fields = ("path", "status", "added", "deleted", "old_path", "symlink_target", "size", "extra")

    def __init__(
        self,
        path: str,
        status: str,
        added: int = 0,
        deleted: int = 0,
        old_path: str | None = None,
        symlink_target: str | None = None,
        size: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self._set(
            path=path,
            status=status,
            added=added,
            deleted=deleted,
            old_path=old_path,
            symlink_target=symlink_target,
            size=size,
            extra={} if extra is None else extra,
        )


def symlink_escape(path: str, target: str, *, root: str | None = None) -> str | None:
    """Where a symlink at ``path`` points, repository-relative; None when it leaves the repository.

    ``root`` (the repository's absolute path) lets an absolute target that stays inside it
    count as inside. A target is judged by its text, and with ``root`` also as the link
    resolves on disk through the tree's other symlinks (their targets only are read, never a
    file's content): ``L1 -> L0/..`` reads as inside, yet with ``L0 -> ..`` it is the
    repository's parent, and a chain of such links reaches ``/``.
    """
    t = target.replace("\\", "/")
    if t.startswith("/") or re.match(r"^[A-Za-z]:/", t):
        if root is None:
            return None
        r = root.rstrip("/")
        if t != r and not t.startswith(r + "/"):
            return None
        rel = t[len(r) + 1 :]
    else:
        rel = posixpath.join(posixpath.dirname(path), t)
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".." or norm.startswith("../"):
        return None
    if root is not None and _on_disk(os.path.join(root, path), target):
        base = os.path.realpath(root)
        real = os.path.realpath(os.path.join(root, path))
        if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
            return None
        resolved = os.path.relpath(real, base).replace(os.sep, "/")
        if resolved != norm:
            return resolved  # where it really points: judged against the protected paths
    return norm


def _on_disk(link: str, target: str) -> bool:
    """Whether ``link`` is there as the symlink to ``target`` being judged."""
    try:
        return os.readlink(link) == target
    except OSError:
        return False


def evaluate(
    policy: Policy | None, changes: Sequence[Change], *, root: str | None = None
) -> list[Violation]:
    """Every violation of ``policy`` by ``changes``, in path order then budgets."""
    if policy is None:
        return []
    out: list[Violation] = []
    counted_files = counted_lines = 0
    # Every path's bytes count, always_allowed ones too: what is committed weighs the same
    # wherever it lies, and a 200 MB file is not a test however it is named.
    counted_bytes = sum(ch.size for ch in changes)
    for ch in changes:
        ends = [ch.path] if ch.old_path is None else [ch.old_path, ch.path]
        for end in ends:
            if end in policy.control:
                out.append(Violation(CONTROL_FILE, end, "a file that steers the loop changed"))
        if not all(policy.allowed(p) for p in ends):
            counted_files += 1
            counted_lines += ch.added + ch.deleted
        if ch.old_path is not None and ch.old_path != ch.path:
            for end in ends:
                # A rename's destination is a new path; its source a file of the base, gone
                # (a copy leaves its source as it was).
                new = end == ch.path or ch.status == "copied"
                if not policy.in_scope(end, new=new):
                    why = (
                        "protected"
                        if policy.is_protected(end)
                        else "add-only (a file of the base)"
                        if policy.is_add_only(end)
                        else "outside writable"
                    )
                    out.append(
                        Violation(
                            RENAME_OUT_OF_SCOPE,
                            end,
                            f"renamed {ch.old_path} -> {ch.path}; {end} is {why}",
                        )
                    )
        elif policy.is_protected(ch.path):
            if ch.status == "deleted":
                out.append(Violation(PROTECTED_DELETED, ch.path, "a protected file was deleted"))
            else:
                out.append(Violation(PROTECTED, ch.path, f"protected path {ch.status}"))
        elif policy.is_add_only(ch.path):
            if ch.status not in _NEW:
                out.append(
                    Violation(
                        ADD_ONLY,
                        ch.path,
                        f"{ch.status}: add-only scope allows new files, never a change to one "
                        "the base holds",
                    )
                )
        elif not policy.in_scope(ch.path):
            out.append(Violation(OUTSIDE_WRITABLE, ch.path, f"{ch.status} outside writable scope"))
        if ch.symlink_target is not None and ch.status != "deleted":
            where = symlink_escape(ch.path, ch.symlink_target, root=root)
            if where is None:
                out.append(
                    Violation(
                        SYMLINK_OUTSIDE,
                        ch.path,
                        f"symlink to {ch.symlink_target} points outside the repository",
                    )
                )
            elif policy.is_protected(where) or policy.is_protected(where + "/"):
                out.append(
                    Violation(
                        SYMLINK_PROTECTED,
                        ch.path,
                        f"symlink to {ch.symlink_target} points into protected {where}",
                    )
                )
    if policy.changed_files is not None and counted_files > policy.changed_files:
        out.append(
            Violation(
                TOO_MANY_FILES,
                WHOLE_CHANGE,
                f"{counted_files} files changed; budget {policy.changed_files}",
            )
        )
    if policy.changed_lines is not None and counted_lines > policy.changed_lines:
        out.append(
            Violation(
                TOO_MANY_LINES,
                WHOLE_CHANGE,
                f"{counted_lines} lines changed; budget {policy.changed_lines}",
            )
        )
    if policy.changed_bytes is not None and counted_bytes > policy.changed_bytes:
        out.append(
            Violation(
                TOO_MANY_BYTES,
                WHOLE_CHANGE,
                f"{counted_bytes} bytes changed; budget {policy.changed_bytes}",
            )
        )
    return out
