"""Artifacts routed by outcome: a completed task's bulky transcripts pruned, a parked one's kept.

Settings (contract ``artifacts``): ``keep_completed`` -- how many of the most recently
completed tasks keep their artifacts whole (default 10); ``retention_days`` -- a completed
task's artifacts are pruned only once they are older than this (default: no age limit,
only ``keep_completed`` counts). A task that ends blocked, failed, parked or out of budget
is never pruned: its transcripts are what a person needs to see why.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit import loader
from loopkit.files import atomic_write
from loopkit.state.artifacts import is_safe_id

DEFAULT_KEEP_COMPLETED = 10
#: Files larger than this are "bulky" whatever their name.
BULKY_BYTES = 1 << 20
_BULKY_NAME = re.compile(r"(transcript|stream|events)|\.(jsonl|ndjson|log)$", re.IGNORECASE)
PRUNED_NOTE = "PRUNED.txt"


def _is_bulky(path: Path) -> bool:
    try:
        return bool(_BULKY_NAME.search(path.name)) or path.stat().st_size > BULKY_BYTES
    except OSError:
        return False


def prune_dir(folder: Path) -> list[str]:
    """Remove the bulky files of one attempt folder; leave a note of what went."""
    removed: list[str] = []
    if not folder.is_dir():
        return removed
    for path in sorted(folder.rglob("*")):
        if (
            path.is_file()
            and not path.is_symlink()
            and path.name != PRUNED_NOTE
            and _is_bulky(path)
        ):
            size = path.stat().st_size
            path.unlink()
            removed.append(f"{path.relative_to(folder).as_posix()} ({size} bytes)")
    if removed:
        note = folder / PRUNED_NOTE
        with open(note, "a", encoding="utf-8") as f:
            f.write("pruned after the task completed (artifacts retention):\n")
            f.writelines(f"  {r}\n" for r in removed)
    return removed


def on_complete(
    state: Path,
    task_id: str,
    attempt_ids: list[str],
    settings: Mapping[str, Any] | None,
    *,
    now: float | None = None,
) -> list[str]:
    """Record a completed task and prune completed tasks past the retention settings.

    Returns the attempt folders that were pruned.
    """
    settings = settings or {}
    keep = int(settings.get("keep_completed", DEFAULT_KEEP_COMPLETED))
    days = settings.get("retention_days")
    now = time.time() if now is None else now
    book = state / "artifacts" / "completed.json"
    try:
        entries: list[dict[str, Any]] = loader.json_loads(book.read_bytes())
        if not isinstance(entries, list):
            entries = []
    except (FileNotFoundError, loader.LoadError):
        entries = []
    entries = [e for e in entries if e.get("task_id") != task_id]
    entries.append({"task_id": task_id, "at": now, "attempt_ids": attempt_ids, "pruned": False})
    entries.sort(key=lambda e: float(e.get("at") or 0), reverse=True)
    pruned: list[str] = []
    for i, entry in enumerate(entries):
        if entry.get("pruned") or i < keep:
            continue
        if days is not None and now - float(entry.get("at") or 0) < float(days) * 86400:
            continue
        for aid in entry.get("attempt_ids") or []:
            if is_safe_id(aid):
                folder = state / "artifacts" / str(aid)
                if prune_dir(folder):
                    pruned.append(str(folder))
        entry["pruned"] = True
    atomic_write(book, json.dumps(entries, indent=1) + "\n")
    return pruned
