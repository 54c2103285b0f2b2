"""Scope globs: one tokenizer, one meaning, for matching paths and for comparing globs.

Globs are relative to the repository root and use ``/`` as the separator:

- ``*`` matches within one path segment, ``?`` one character, ``[abc]``/``[a-z]``/``[!x]``
  a class (never ``/``), ``\\x`` the character ``x`` itself;
- ``**`` as a whole segment matches any number of segments, zero included
  (``src/**/test_*.py`` matches ``src/test_a.py`` and ``src/a/b/test_c.py``); inside a
  name (``a**b``) it crosses directories, like git's wildmatch;
- a glob that matches a directory covers everything beneath it, as in ``.gitignore``
  (``migrations`` and ``migrations/`` both cover ``migrations/0001.sql``);
- a glob with no wildcard names one path: a file, unless it is a folder. Matching needs
  no answer (a file has nothing beneath it), comparing does: ``src/a.py`` and
  ``**/conftest.py`` share a path only if ``src/a.py`` is a folder. ``overlap`` is told
  which literal globs name files; lk-plan reads a literal as a folder when it ends with
  ``/`` or is a folder in the work tree, as a file otherwise;
- dotfiles are matched like any other name.

``matches`` answers "does this glob cover this path" (a compiled regex: lk-diff asks it of
every changed path). ``overlap`` answers "is there a path both globs cover" (a product of
the two globs' automata: lk-plan asks it of a task's scope against the contract's). Both
are built from the same tokens, so a plan that ``lk-plan`` accepts is the scope that
``lk-diff`` enforces.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from loopkit.values import Value

# --------------------------------------------------------------------------- tokens

#: Token kinds. ``seg`` is a whole-segment ``**`` followed by ``/`` (zero or more whole
#: segments); ``any`` crosses directories (a trailing ``**``, or ``**`` inside a name).
LIT, ONE, CLASS, STAR, ANY, SEG = "lit", "one", "class", "star", "any", "seg"


class Token(Value):
    kind: str
    char: str  # LIT
    negated: bool  # CLASS
    ranges: tuple[tuple[str, str], ...]  # CLASS: inclusive (low, high) pairs

    _fields = ("kind", "char", "negated", "ranges")

    def __init__(
        self,
        kind: str,
        char: str = "",
        negated: bool = False,
        ranges: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self._set(kind=kind, char=char, negated=negated, ranges=ranges)

    def accepts(self, c: str) -> bool:
        if self.kind == LIT:
            return c == self.char
        if self.kind == ANY:
            return True
        if c == "/":
            return False
        if self.kind in (ONE, STAR):
            return True
        inside = any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negated


def normalize(glob: str) -> str:
    """The canonical spelling: no ``./`` prefix, no ``//``, ``dir/`` read as ``dir/**``."""
    g = glob.strip()
    while g.startswith("./"):
        g = g[2:]
    g = re.sub("/{2,}", "/", g)
    if g.endswith("/"):
        g += "**"
    return g or "**"


def escape_reason(glob: str) -> str | None:
    """Why a glob reaches outside the repository, or None when it stays inside."""
    g = glob.replace("\\", "/")
    if g.startswith("/") or re.match(r"^[A-Za-z]:", g) or g.startswith("~"):
        return "is absolute: scope globs are relative to the repository root"
    if ".." in g.split("/"):
        return "escapes the repository ('..')"
    return None


def is_literal(glob: str) -> bool:
    """True when the glob names one path (no wildcard, class or escape)."""
    return not any(c in "*?[\\" for c in glob)


@functools.lru_cache(maxsize=1024)
def tokens(glob: str) -> tuple[Token, ...]:
    """The tokens of a (normalized) glob."""
    parts = normalize(glob).split("/")
    out: list[Token] = []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if part == "**":
            out.append(Token(ANY) if last else Token(SEG))
            continue
        out.extend(_segment(part))
        if not last:
            out.append(Token(LIT, "/"))
    return tuple(out)


def _segment(part: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(part)
    while i < n:
        c = part[i]
        if c == "*":
            if part.startswith("**", i):
                out.append(Token(ANY))
                i += 2
                continue
            out.append(Token(STAR))
        elif c == "?":
            out.append(Token(ONE))
        elif c == "\\" and i + 1 < n:
            out.append(Token(LIT, part[i + 1]))
            i += 1
        elif c == "[":
            cls, end = _class(part, i)
            if cls is None:
                out.append(Token(LIT, "["))  # no closing bracket: a literal "["
            else:
                out.append(cls)
                i = end
        else:
            out.append(Token(LIT, c))
        i += 1
    return out


def _class(part: str, start: int) -> tuple[Token | None, int]:
    """The class opening at ``start``, and the index of its closing ``]``."""
    j = start + 1
    negated = j < len(part) and part[j] in "!^"
    if negated:
        j += 1
    first = j
    ranges: list[tuple[str, str]] = []
    while j < len(part):
        c = part[j]
        if c == "]" and j > first:
            return Token(CLASS, negated=negated, ranges=tuple(ranges)), j
        if c == "\\" and j + 1 < len(part):
            j += 1
            c = part[j]
        if j + 2 < len(part) and part[j + 1] == "-" and part[j + 2] != "]":
            hi = part[j + 2]
            if c <= hi:
                ranges.append((c, hi))
            j += 3
            continue
        ranges.append((c, c))
        j += 1
    return None, start


# --------------------------------------------------------------------------- matching


def _regex(toks: tuple[Token, ...]) -> str:
    out: list[str] = []
    for t in toks:
        if t.kind == LIT:
            out.append(re.escape(t.char))
        elif t.kind == ONE:
            out.append("[^/]")
        elif t.kind == STAR:
            out.append("[^/]*")
        elif t.kind == ANY:
            out.append(".*")
        elif t.kind == SEG:
            out.append("(?:[^/]*/)*")
        else:
            body = "".join(
                re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}"
                for lo, hi in t.ranges
            )
            if not body:  # an empty class matches nothing (or, negated, any one character)
                out.append("[^/]" if t.negated else "(?!)")
            else:
                out.append(f"(?!/)[{'^' if t.negated else ''}{body}]")
    # A match on a directory covers what is under it.
    return "".join(out) + "(?:/.*)?"


def to_regex(glob: str) -> str:
    """A regex (no anchors) matching the paths ``glob`` covers, directories' contents included."""
    return _regex(tokens(glob))


@functools.lru_cache(maxsize=256)
def _compiled(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    if not globs:
        return None
    return re.compile("|".join(f"(?:{to_regex(g)})" for g in globs), re.DOTALL)


def matches(path: str, globs: Iterable[str]) -> bool:
    """Whether ``path`` (repository-relative, ``/``-separated) is covered by any glob."""
    rx = _compiled(tuple(globs))
    return bool(rx is not None and rx.fullmatch(path))


# --------------------------------------------------------------------------- overlap

# A glob as a small automaton: state i is "before token i"; the last state accepts.
# STAR, ANY and SEG loop; SEG's loop goes through one extra state (inside a segment).
# The directory-cover suffix "(/.*)?" adds two states after the last token.

_OTHER = "\ue000"  # stands for "any character no glob names"


def _moves(toks: tuple[Token, ...], state: int) -> list[tuple[Token | None, int]]:
    """The moves out of ``state``: (token to read, or None for an empty move, next state)."""
    n = len(toks)
    if state < 0:  # within a SEG's segment: more of it, or its closing "/"
        back = -state - 1
        return [(Token(ONE), state), (Token(LIT, "/"), back)]
    if state < n:
        t = toks[state]
        if t.kind in (STAR, ANY):
            return [(None, state + 1), (t, state)]
        if t.kind == SEG:
            inside = -(state + 1)  # the extra state of this SEG: "within a segment"
            return [(None, state + 1), (Token(LIT, "/"), state), (Token(STAR), inside)]
        return [(t, state + 1)]
    if state == n:  # matched: the path may go on below it
        return [(Token(LIT, "/"), n + 1)]
    return [(Token(ANY), n + 1)]  # state n + 1: anything under the match


def _accepting(toks: tuple[Token, ...], state: int) -> bool:
    return state in (len(toks), len(toks) + 1)


def _alphabet(*globs: tuple[Token, ...]) -> list[str]:
    """One representative of every class of characters the globs can tell apart."""
    chars = {"/", _OTHER, "a"}
    for toks in globs:
        for t in toks:
            if t.kind == LIT:
                chars.add(t.char)
            elif t.kind == CLASS:
                for lo, hi in t.ranges:
                    chars.update((lo, hi))
    return sorted(chars)


def witness(a: str, b: str) -> str | None:
    """A path both globs cover, or None when there is none."""
    ta, tb = tokens(a), tokens(b)
    alphabet = _alphabet(ta, tb)
    start = (0, 0)
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    todo = [start]
    while todo:
        here = todo.pop(0)  # breadth first: the shortest witness
        i, j = here
        if _accepting(ta, i) and _accepting(tb, j):
            return _spell(came, here)
        nexts: list[tuple[tuple[int, int], str]] = []
        moves_a, moves_b = _moves(ta, i), _moves(tb, j)
        for tok, ni in moves_a:
            if tok is None:
                nexts.append(((ni, j), ""))
        for tok, nj in moves_b:
            if tok is None:
                nexts.append(((i, nj), ""))
        for tok_a, ni in moves_a:
            if tok_a is None:
                continue
            for tok_b, nj in moves_b:
                if tok_b is None:
                    continue
                for c in alphabet:
                    if tok_a.accepts(c) and tok_b.accepts(c):
                        nexts.append(((ni, nj), c))
                        break  # one character per pair of moves is enough to reach (ni, nj)
        for nxt, c in nexts:
            if nxt not in came:
                came[nxt] = (here, c)
                todo.append(nxt)
    return None


def _spell(
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None], end: tuple[int, int]
) -> str:
    out: list[str] = []
    step = came[end]
    while step is not None:
        prev, c = step
        out.append(c)
        step = came[prev]
    return "".join(reversed(out))


def overlap(a: str, b: str, *, is_file: Callable[[str], bool] | None = None) -> bool:
    """True when some path is covered by both globs (directories cover what is under them).

    ``is_file`` tells which literal globs name a file (their normalized spelling is asked):
    a file covers its own path and nothing beneath it, so it shares a path with the other
    glob only when that glob covers it. Without ``is_file`` a literal may be a folder.
    """
    if normalize(a) == normalize(b):
        return True
    # A literal glob covers its own path: when the other covers it too, a regex match
    # answers without the automata (a plan of thousands of one-file scopes against a
    # contract's writable globs).
    for lit, other in ((a, b), (b, a)):
        path = normalize(lit)
        if is_literal(lit) and is_literal(path):
            if matches(path, (other,)):
                return True
            if is_file is not None and is_file(path):
                return False  # nothing beneath a file: its own path was the only one
    return witness(a, b) is not None


def covers_folder(folder: str, globs: Iterable[str]) -> bool:
    """Whether ``globs`` cover the literal ``folder`` itself or every name directly inside
    it (``tests/**``, ``tests/*``): everything a task could write there. A name made of
    characters no glob names stands for every name."""
    inside = folder.rstrip("/") + "/" + _OTHER * 2
    return matches(folder.rstrip("/"), globs) or matches(inside, globs)
