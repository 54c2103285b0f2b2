"""Plants: what a worker of a run side by side wrote where it was not its to write -- the
checkout, or a sibling's worktree -- found without a sandbox.

The sandbox shows a worker the checkout and its siblings read-only or not at all. Without
one (``sandbox.mode: off``, no bwrap) nothing stops the write, and loopkit sees **when** a
file changed (its change time), not which process changed it. What tells them apart is
when each worker ran: from the mark ``lk attempt --keep P`` leaves as it starts the worker
(``P-worker``) to lk-invoke's document it keeps as the run ends (``P-invoke.json``).

- The checkout: while slices run, only the queue's lander writes there (holding the
  queue's lock), so anything else that appears is a plant. ``sweep`` (under that lock)
  saves the checkout's whole tree under ``refs/loopkit/planted/<time>`` -- nothing a person
  had there is lost -- records each path and its change time in the queue's folder
  (``planted.jsonl``) and brings the checkout back to its commit.
- An attempt is refused (``intruders``) when a plant was written while its worker ran (an
  innocent sibling running at that moment too: the two cannot be told apart), or when its
  own worktree holds a change made while its own worker was not running (before it
  started, after it ended): a process not its own.

What this cannot see: a write into a sibling's worktree at the very time the sibling's own
worker runs looks like the sibling's own work. Only the sandbox keeps that out.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from loopkit import git
from loopkit.evidence.specialfiles import CLOCK_MARGIN_NS

TYPE_CHECKING = False  # typing stays unloaded at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: The record of plants, in the queue's folder (one JSON object a line).
RECORD = "planted.jsonl"


def changed(root: Path, rev: str, *, refresh: bool = True) -> list[str]:
    """The paths of the work tree at ``root`` that differ from ``rev``: changed, removed,
    and new but not ignored. Without ``refresh`` the index is only read (no lock taken
    on it): a file whose stat data alone changed is listed too."""
    if refresh:
        git.git(["update-index", "-q", "--refresh"], cwd=root, check=False)
    tracked = git.out(["diff-index", "-z", "--name-only", rev, "--"], cwd=root)
    new = git.out(["ls-files", "-z", "--others", "--exclude-standard"], cwd=root)
    return sorted({p for p in f"{tracked}\0{new}".split("\0") if p})


def changed_ns(path: Path) -> int:
    """When ``path`` last changed (its folder's change time when it is gone: a removal
    changes the folder)."""
    while True:
        try:
            return os.lstat(path).st_ctime_ns
        except FileNotFoundError:
            if path.parent == path:
                return 0
            path = path.parent


#: A worker's run when it never started: nothing written is its own.
NEVER_RAN = (0, -1)


def span(kept: Path) -> tuple[int, int] | None:
    """When the worker of the attempt whose decided document ``lk attempt --keep P`` kept
    as ``kept`` (``P-decide.json``) ran: ``P-worker``'s time to ``P-invoke.json``'s;
    ``NEVER_RAN`` when its worker never started; None when ``kept`` is no document
    ``lk attempt --keep`` kept (no ``P-admit.json`` beside it)."""
    stem = kept.name.rsplit("-", 1)[0]
    if not (kept.parent / f"{stem}-admit.json").is_file():
        return None
    try:
        start = (kept.parent / f"{stem}-worker").stat().st_mtime_ns
        end = (kept.parent / f"{stem}-invoke.json").stat().st_mtime_ns
    except OSError:
        return NEVER_RAN
    return start, end


def read(folder: Path) -> list[dict[str, Any]]:
    """Every plant recorded in the queue's ``folder``."""
    try:
        lines = (folder / RECORD).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line: a sweep killed while it wrote
        if isinstance(rec, dict) and isinstance(rec.get("changed_ns"), int):
            out.append(rec)
    return out


def sweep(folder: Path, root: Path, state: Path) -> list[dict[str, Any]]:
    """Save and record what appeared in the checkout at ``root``, and bring it back to its
    commit (the caller holds the queue's lock: the lander is not writing there). The
    plants recorded; none when the checkout is as committed."""
    from loopkit.ratchet import trees

    w = trees.Where(root, git.git_dirs(root).own, state)
    head, _ = trees.head(w)
    if not head:
        return []
    paths = changed(root, "HEAD")
    if not paths:
        return []
    stamps = {p: changed_ns(root / p) for p in paths}
    label = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    ref = trees.save(w, "planted", label, "loopkit: written into the checkout", head)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    records = [{"path": p, "changed_ns": stamps[p], "ref": ref, "at": at} for p in paths]
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    fd = os.open(folder / RECORD, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    trees.sync_to(w, "HEAD")
    return records


def intruders(
    worktree: Path, base: str, ran: tuple[int, int], plants: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Why an attempt whose worker ran ``ran`` (ns) in ``worktree`` (started from ``base``)
    is not its worker's own work alone: each a line naming the path."""
    lo, hi = (ran[0] - CLOCK_MARGIN_NS, ran[1] + CLOCK_MARGIN_NS) if ran != NEVER_RAN else NEVER_RAN
    out = [
        f"{p} in its worktree, written while its worker was not running"
        for p in changed(worktree, base)
        if not lo <= changed_ns(worktree / p) <= hi
    ]
    out += [
        f"{rec.get('path')} in the checkout, written while its worker ran (saved as "
        f"{rec.get('ref')})"
        for rec in plants
        if lo <= int(rec["changed_ns"]) <= hi
    ]
    return out
