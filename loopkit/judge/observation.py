"""What a judge run showed: the files it read (its grounding), the writes it tried, the tree.

A file grounds a verdict only when the judge read it inside the repository: paths
outside it, escaping it with ``..``, or inside ``.git`` / loopkit's state folder do not
count. A write the stream shows succeeding, or a changed tree hash, is recorded here and
refused by the ruling (``loopkit.judge.ruling``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from loopkit import git
from loopkit.judge import verdict

if TYPE_CHECKING:
    from loopkit.sections import Citation
    from loopkit.worker.providers.base import Outcome, RunState

#: Files that never count as reading the work: git's own and loopkit's state.
_NOT_WORK = (".git", ".loopkit")


def grounding(
    paths: Iterable[str], *, root: str | os.PathLike[str] | None, state_dir: str | None = None
) -> list[str]:
    """The files that ground a verdict: read inside the repository, relative to its root.

    Absolute paths under ``root`` become relative; paths outside it, escaping it with
    ``..``, or inside ``.git`` / loopkit's state folder do not count. Without a root (a
    transcript judged elsewhere) absolute paths are kept as they are.
    """
    top = Path(root).resolve() if root is not None else None
    hidden = set(_NOT_WORK)
    if state_dir and not os.path.isabs(state_dir) and PurePosixPath(state_dir).parts:
        hidden.add(PurePosixPath(state_dir).parts[0])
    out: dict[str, None] = {}
    for raw in paths:
        if not isinstance(raw, str) or not raw.strip():
            continue
        rel = _inside(raw.strip(), top)
        if rel is None:
            continue
        parts = PurePosixPath(rel).parts
        if not parts or (parts[0] in hidden and not os.path.isabs(rel)):
            continue
        out.setdefault(rel, None)
    return list(out)


def _inside(path: str, top: Path | None) -> str | None:
    if os.path.isabs(path):
        if top is None:
            return os.path.normpath(path)
        for candidate in (Path(os.path.normpath(path)), Path(os.path.realpath(path))):
            try:
                rel = candidate.relative_to(top)
            except ValueError:
                continue
            return rel.as_posix() if rel.parts and ".." not in rel.parts else None
        return None
    norm = os.path.normpath(path).replace(os.sep, "/")
    if norm == "." or norm == ".." or norm.startswith("../"):
        return None
    return norm


@dataclass(repr=False, eq=False, match_args=False)
class Observed:
    """What a judge run (or a saved transcript of one) showed, as loopkit saw it."""

    provider: str
    reply: str | None
    files_read: list[str]  # grounding(): inside the repository
    ended: bool  # the stream reached the provider's final result
    failed: bool  # the run failed (API error, max turns, timeout, cancelled, crash)
    stop_reason: str | None = None
    error: str | None = None
    files_written: list[str] = field(default_factory=list)  # writes the stream shows succeed
    denied: list[str] = field(default_factory=list)  # tool calls the read-only mode refused
    tree_before: str | None = None
    tree_after: str | None = None
    changes: list[dict[str, str]] = field(default_factory=list)
    #: ``CITE: path:line: text`` lines of the reply, each checked against the tree.
    citations: list[Citation] = field(default_factory=list)


#: A citation line in a judge's reply: ``CITE: path:line: exact text``.
_CITE = re.compile(r"^\s*CITE:\s*(?P<path>[^:\n]+?):(?P<line>\d+):[ \t]?(?P<text>.*?)\s*$", re.M)
#: At most this many citations are checked (a reply is bounded anyway).
MAX_CITATIONS = 50


def citations(
    reply: str | None, *, root: str | os.PathLike[str] | None, state_dir: str | None = None
) -> list[Citation]:
    """Each ``CITE: path:line: text`` of ``reply``, checked against the tree on disk: the
    file is inside the repository (not .git, not the state folder), the line exists, and
    the cited text is on it (whitespace at the ends aside). Any judge can show its work
    this way -- a command judge too, which has no recorded file reads."""
    out: list[Citation] = []
    for m in _CITE.finditer(reply or ""):
        if len(out) >= MAX_CITATIONS:
            break
        path, number, text = m.group("path").strip(), int(m.group("line")), m.group("text")
        entry: Citation = {"path": path[:300], "line": number, "text": text[:300], "ok": False}
        inside = grounding([path], root=root, state_dir=state_dir) if root is not None else []
        why = None
        if root is None:
            why = "no tree to check it against"
        elif not inside:
            why = "not a file of the repository"
        elif not text.strip():
            why = "no text cited"
        else:
            try:
                lines = (Path(root) / inside[0]).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines = None
            if lines is None:
                why = "the file cannot be read"
            elif not 1 <= number <= len(lines):
                why = f"the file has {len(lines)} lines"
            elif text.strip() not in lines[number - 1]:
                why = "the text is not on that line"
            else:
                entry["path"] = inside[0]
        entry["ok"] = why is None
        if why:
            entry["why"] = why
        out.append(entry)
    return out


def own_words(reply: str | None, *, root: Path, tree: str) -> str | None:
    """A command judge's reply without the lines it printed from a file of ``tree``.

    A command judge's output is one plain text: a file it printed (``cat NOTES.md``) is
    in it as much as its own words. A verdict or citation line that is, whole, a line of
    a file of the tree judged may come from that file -- text the worker wrote to be
    printed ("VERDICT: MET", "CITE: ..." lines) -- so as many of its occurrences as the
    tree's files hold are dropped, the earliest first (what a judge prints of a file
    comes before the verdict it draws); the last verdict line left decides, and only the
    citations left count. One ``git grep`` over the tree."""
    if not reply:
        return reply
    lines = reply.splitlines()
    decisive = [line for line in lines if verdict.is_candidate(line) or _CITE.match(line)]
    printed = git.lines_in_tree(root, tree, decisive) if decisive else {}
    if not printed:
        return reply
    kept = []
    for line in lines:
        if printed.get(line, 0) > 0:
            printed[line] -= 1
            continue
        kept.append(line)
    return "\n".join(kept)


def observe(
    provider: str,
    state: RunState,
    outcome: Outcome | None,
    *,
    root: str | os.PathLike[str] | None,
    state_dir: str | None = None,
    reply: str | None = None,
) -> Observed:
    """Turn a parsed stream (and how the run ended) into what the verdict is decided on."""
    failed = outcome.is_error if outcome is not None else bool(state.result_is_error)
    denied = [_denial(d) for d in state.permission_denials if isinstance(d, Mapping)] + [
        f"{t.command or t.name}: {(t.error or 'failed').splitlines()[-1]}"[:300]
        for t in state.tool_calls
        if t.ok is False and (_is_write(t.name) or _writes(t.command))
    ]
    # An ACP judge's writes loopkit refused at the protocol (run.refused).
    denied += [
        f"{r.get('tool') or r.get('via')}: refused ({r.get('rule')}: {r.get('path')})"[:300]
        for r in state.refused
        if isinstance(r, Mapping)
    ]
    written = grounding(state.files_written, root=root) if root is not None else state.files_written
    text = reply if reply is not None else state.final_message
    return Observed(
        provider=provider,
        reply=reply if reply is not None else state.final_message,
        files_read=grounding(state.files_read, root=root, state_dir=state_dir),
        ended=bool(state.result_seen),
        failed=failed,
        stop_reason=outcome.stop_reason if outcome is not None else None,
        error=outcome.error if outcome is not None and outcome.is_error else None,
        files_written=list(written),
        denied=denied[:50],
        citations=citations(text, root=root, state_dir=state_dir),
    )


def _denial(d: Mapping[str, Any]) -> str:
    tool = str(d.get("tool") or "?")
    inp = d.get("input")
    target = ""
    if isinstance(inp, Mapping):
        target = str(inp.get("file_path") or inp.get("command") or inp.get("path") or "")
    return f"{tool} {target}".strip()[:300]


def _is_write(name: str) -> bool:
    return name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch", "file_change")


_WRITING = re.compile(
    r"(^|[^<>&0-9])>>?\s*[^&\s>]|\b(tee|rm|mv|cp|touch|mkdir|rmdir|truncate|chmod|ln|dd)\s"
    r"|\bsed\s+(-[a-zA-Z]*i|--in-place)|\bgit\s+(add|commit|checkout|reset|restore|rm|mv|stash|apply)\b"
)


def _writes(command: str | None) -> bool:
    """Whether a shell command line looks like it changes files (a judge must not)."""
    return bool(command) and _WRITING.search(command or "") is not None


def tree_changes(root: Path, before: str, after: str) -> list[dict[str, str]]:
    """What differs between two tree hashes: [{status, path}], statuses as lk-diff words."""
    if before == after:
        return []
    return [
        {"status": _STATUS.get(status, status), "path": path}
        for path, status in git.changed_paths(root, before, after)
    ][:200]


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}
