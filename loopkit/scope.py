"""The scope policy: which paths a change may touch, and how big it may be.

Globs are relative to the repository root and use ``/`` as the separator:

- ``*`` matches within one path segment, ``?`` one character, ``[abc]`` a class;
- ``**`` as a whole segment matches any number of segments, zero included
  (``src/**/test_*.py`` matches ``src/test_a.py`` and ``src/a/b/test_c.py``);
- a glob that matches a directory covers everything beneath it, as in ``.gitignore``
  (``migrations`` and ``migrations/`` both cover ``migrations/0001.sql``);
- dotfiles are matched like any other name.

Rules, in order: a path matching ``always_allowed`` is never a violation; a path matching
``protected`` is one (protected wins over writable); otherwise it must match ``writable``.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Rule names, as they appear in ``violations[].rule``.
PROTECTED = "protected"
PROTECTED_DELETED = "protected_deleted"
OUTSIDE_WRITABLE = "outside_writable"
RENAME_OUT_OF_SCOPE = "rename_out_of_scope"
SYMLINK_OUTSIDE = "symlink_outside_repo"
SYMLINK_PROTECTED = "symlink_into_protected"
TOO_MANY_FILES = "changed_files"
TOO_MANY_LINES = "changed_lines"
#: ``path`` of a violation about the whole change (a budget) rather than one file.
WHOLE_CHANGE = "*"


def _segment(glob: str) -> str:
    """Regex for a glob segment without ``/`` (``*``, ``?``, ``[...]``, ``**`` inside a name)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                out.append(".*")  # "a**b": crosses directories, like git's wildmatch
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "["
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"(?!/)[{body}]")
                i = j
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 1
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def normalize_glob(glob: str) -> str:
    g = glob.strip()
    while g.startswith("./"):
        g = g[2:]
    g = re.sub("/{2,}", "/", g)
    if g.endswith("/"):
        g += "**"
    return g or "**"


def glob_to_regex(glob: str) -> str:
    """A regex (no anchors) matching the paths ``glob`` covers, directories' contents included."""
    parts = normalize_glob(glob).split("/")
    pieces: list[str] = []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if part == "**":
            # zero or more whole segments; the separator is folded into the repetition
            pieces.append(".*" if last else "(?:[^/]*/)*")
        else:
            pieces.append(_segment(part) + ("" if last else "/"))
    # A match on a directory covers what is under it.
    return "".join(pieces) + "(?:/.*)?"


@functools.lru_cache(maxsize=256)
def _compiled(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    if not globs:
        return None
    return re.compile("|".join(f"(?:{glob_to_regex(g)})" for g in globs), re.DOTALL)


def matches(path: str, globs: Iterable[str]) -> bool:
    """Whether ``path`` (repository-relative, ``/``-separated) is covered by any glob."""
    rx = _compiled(tuple(globs))
    return bool(rx is not None and rx.fullmatch(path))


@dataclass(frozen=True)
class Policy:
    writable: tuple[str, ...] = ("**",)
    protected: tuple[str, ...] = ()
    always_allowed: tuple[str, ...] = ()
    changed_files: int | None = None
    changed_lines: int | None = None
    #: Each path's (always_allowed, protected, writable) answers, computed once per path.
    _seen: dict[str, tuple[bool, bool, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False
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
            changed_files=budgets.get("changed_files"),
            changed_lines=budgets.get("changed_lines"),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "writable": list(self.writable),
            "protected": list(self.protected),
            "always_allowed": list(self.always_allowed),
            "changed_files": self.changed_files,
            "changed_lines": self.changed_lines,
        }

    def _facts(self, path: str) -> tuple[bool, bool, bool]:
        got = self._seen.get(path)
        if got is None:
            got = (
                matches(path, self.always_allowed),
                matches(path, self.protected),
                matches(path, self.writable),
            )
            self._seen[path] = got
        return got

    def allowed(self, path: str) -> bool:
        return self._facts(path)[0]

    def is_protected(self, path: str) -> bool:
        allowed, protected, _ = self._facts(path)
        return protected and not allowed

    def in_scope(self, path: str) -> bool:
        """May a change touch ``path``? (always_allowed, else not protected and writable)."""
        allowed, protected, writable = self._facts(path)
        return allowed or (writable and not protected)


@dataclass(frozen=True)
class Violation:
    rule: str
    path: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        d = {"rule": self.rule, "path": self.path}
        if self.detail:
            d["detail"] = self.detail
        return d


@dataclass(frozen=True)
class Change:
    """One changed path, as the policy sees it."""

    path: str
    status: str  # added, modified, deleted, renamed, type_changed, ...
    added: int = 0
    deleted: int = 0
    old_path: str | None = None
    symlink_target: str | None = None  # when the new side is a symlink
    extra: dict[str, Any] = field(default_factory=dict)


def symlink_escape(path: str, target: str, *, root: str | None = None) -> str | None:
    """Where a symlink at ``path`` points, repository-relative; None when it leaves the repository.

    ``root`` (the repository's absolute path) lets an absolute target that stays inside it
    count as inside; symlinks are judged by text, never by following them.
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
    return norm


def evaluate(
    policy: Policy | None, changes: Sequence[Change], *, root: str | None = None
) -> list[Violation]:
    """Every violation of ``policy`` by ``changes``, in path order then budgets."""
    if policy is None:
        return []
    out: list[Violation] = []
    counted_files = counted_lines = 0
    for ch in changes:
        ends = [ch.path] if ch.old_path is None else [ch.old_path, ch.path]
        if not all(policy.allowed(p) for p in ends):
            counted_files += 1
            counted_lines += ch.added + ch.deleted
        if ch.old_path is not None and ch.old_path != ch.path:
            for end in ends:
                if not policy.in_scope(end):
                    why = "protected" if policy.is_protected(end) else "outside writable"
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
    return out
